package host

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/internal/fetchref"
	"github.com/mcpl-go/mcpl/protocol"
)

// ResultText renders a successful result of the tool named name as text
// for a reader that takes text only: text blocks as they are, a
// reference as its stub (registered with this host, bound to the server
// that delivered it, its link never shown), each inline image or audio as
// a line that says so, and every block this host can't show as its
// marker (docs/content.md).
func (h *Host) ResultText(name string, res protocol.CallToolResult) string {
	h.mu.Lock()
	id, _, _ := h.resolveLocked(name)
	h.mu.Unlock()
	lane := content.Lane{Server: id, Provenance: content.ProvenanceToolResult, Refs: h.refs}
	return content.PlainText(lane.View(res.Content))
}

// ToolFetchReference is the host's tool that fetches a reference's
// payload: the only way one is dereferenced.
const ToolFetchReference = "fetch_reference"

var fetchReferenceTool = protocol.Tool{
	Name: ToolFetchReference,
	Description: "Fetches the payload of a reference (the id in a stub like [ref_1_ab12] …) from the server that sent it, " +
		"checks it, and saves it; answers with the saved file's path. max_bytes caps the fetch (default 256 MiB).",
	InputSchema: fetchReferenceSchema(),
}

// fetchReferenceSchema is fetch_reference's input schema, each property
// described as the agent reads it (host/toolschema_test.go checks that
// both providers take it as it is).
func fetchReferenceSchema() json.RawMessage {
	refID, _ := json.Marshal("The reference's id, as its stub shows it: ref_1_ab12 in [ref_1_ab12].")
	maxBytes, _ := json.Marshal("The most bytes to fetch: a reference whose stated size is over it, or whose payload turns out longer, is refused. Leave it out for the default (256 MiB).")
	return json.RawMessage(`{"type":"object","properties":{` +
		`"ref_id":{"type":"string","description":` + string(refID) + `},` +
		`"max_bytes":{"type":"integer","minimum":1,"description":` + string(maxBytes) + `}},` +
		`"required":["ref_id"]}`)
}

// fetchServer tells the fetcher a server's dialed address and token.
func (h *Host) fetchServer(id string) (fetchref.Server, bool) {
	h.mu.Lock()
	srv := h.servers[id]
	h.mu.Unlock()
	if srv == nil {
		return fetchref.Server{}, false
	}
	s := fetchref.Server{URL: srv.cfg.URL}
	if srv.cfg.URL != "" && srv.cfg.TokenEnv != "" {
		tok, err := srv.cfg.Token(h.lookup)
		s.Token, s.NoToken = tok, err != nil
	}
	return s, true
}

// callFetchReference runs fetch_reference: its answer is the saved file,
// as JSON; a refusal is a *ToolError whose text says what happened.
func (h *Host) callFetchReference(ctx context.Context, args json.RawMessage) (protocol.CallToolResult, error) {
	var a struct {
		RefID    string `json:"ref_id"`
		MaxBytes int64  `json:"max_bytes"`
	}
	json.Unmarshal(args, &a)
	res, err := h.fetcher.Fetch(ctx, a.RefID, a.MaxBytes)
	if err != nil {
		var r *fetchref.Refusal
		te := &ToolError{Text: err.Error(), Outcome: OutcomeRefused, Err: err}
		if errors.As(err, &r) && r.Dialed {
			te.Outcome = OutcomeToolError
		}
		return protocol.CallToolResult{}, te
	}
	b, _ := json.Marshal(res)
	return protocol.TextResult(string(b), false), nil
}
