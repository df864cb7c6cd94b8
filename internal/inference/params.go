package inference

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/protocol"
)

// request is a validated inference/request.
type request struct {
	featureSet     string
	conversationID string
	stream         bool
	messages       []model.Message
	maxTokens      int
}

// MaxMaxTokens is the largest preferences.maxTokens this host takes.
const MaxMaxTokens = math.MaxInt32

// parse validates params against g (SPEC §11.2) and returns the request,
// or the error to answer with.
func parse(params json.RawMessage, g grant.Grant) (request, *protocol.Error) {
	var req request
	var top map[string]json.RawMessage
	if p := bytes.TrimSpace(params); len(p) == 0 || p[0] != '{' || json.Unmarshal(p, &top) != nil {
		return req, invalid("inference/request params are not an object")
	}
	fs, e := featureSet(top["featureSet"], g)
	if e != nil {
		return req, e
	}
	req.featureSet = fs
	if raw, ok := present(top["stream"]); ok {
		if json.Unmarshal(raw, &req.stream) != nil {
			return req, invalid("stream must be a boolean")
		}
	}
	if req.stream && !g.Has(PathStreaming) {
		return req, protocol.NewError(protocol.CodeCapabilityDenied,
			fmt.Sprintf("inference/request rejected: stream is true but capability %q is not in the effective grant; ask again without stream", PathStreaming),
			map[string]string{"capability": PathStreaming})
	}
	if raw, ok := present(top["conversationId"]); ok {
		if json.Unmarshal(raw, &req.conversationID) != nil || raw[0] != '"' {
			return req, invalid("conversationId must be a string")
		}
	}
	if req.messages, e = messages(top["messages"]); e != nil {
		return req, e
	}
	if req.maxTokens, e = preferences(top["preferences"]); e != nil {
		return req, e
	}
	return req, nil
}

// featureSet checks the named feature set is declared and enabled in g,
// in push/event's words (internal/session/admit.go).
func featureSet(raw json.RawMessage, g grant.Grant) (string, *protocol.Error) {
	var name string
	if raw, ok := present(raw); ok {
		if raw[0] != '"' || json.Unmarshal(raw, &name) != nil {
			return "", invalid("featureSet must be a string")
		}
	}
	if name == "" {
		return "", protocol.NewError(protocol.CodeFeatureSetNotEnabled, "Feature set not enabled: inference/request must name its feature set", map[string]string{"featureSet": ""})
	}
	fs, declared := g.FeatureSet(name)
	if !declared {
		return "", protocol.NewError(protocol.CodeUnknownFeatureSet, fmt.Sprintf("Unknown feature set: %q is not declared", name), map[string]string{"featureSet": name})
	}
	if fs.State != grant.StateEnabled {
		return "", protocol.NewError(protocol.CodeFeatureSetNotEnabled, fmt.Sprintf("Feature set not enabled: %q is disabled (%s)", name, fs.Reason), map[string]string{"featureSet": name})
	}
	return name, nil
}

// wireMessage is one message as the server sent it.
type wireMessage struct {
	Role    json.RawMessage `json:"role"`
	Content json.RawMessage `json:"content"`
}

// wireBlock is one content block as the server sent it.
type wireBlock struct {
	Type     string  `json:"type"`
	Text     *string `json:"text"`
	Data     string  `json:"data"`
	MimeType string  `json:"mimeType"`
}

// messages converts the request's messages to the model's: each is
// {role: "user"|"assistant", content: string | content blocks}; a string
// is one text block, a text block is taken as is, an image block must be
// inline (data and mimeType); anything else is refused naming its index.
func messages(raw json.RawMessage) ([]model.Message, *protocol.Error) {
	raw, ok := present(raw)
	if !ok {
		return nil, invalid("messages is required: a non-empty array of {role, content}")
	}
	var list []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &list) != nil {
		return nil, invalid("messages must be an array of {role, content}")
	}
	if len(list) == 0 {
		return nil, invalid("messages is empty: there is nothing to infer from")
	}
	out := make([]model.Message, 0, len(list))
	for i, item := range list {
		var w wireMessage
		if item = bytes.TrimSpace(item); len(item) == 0 || item[0] != '{' || json.Unmarshal(item, &w) != nil {
			return nil, invalid(fmt.Sprintf("messages[%d] is not an object {role, content}", i))
		}
		var role string
		_ = json.Unmarshal(w.Role, &role)
		if role != string(model.User) && role != string(model.Assistant) {
			return nil, invalid(fmt.Sprintf(`messages[%d].role is %s: it must be "user" or "assistant"`, i, shown(w.Role)))
		}
		content, e := blocks(i, w.Content)
		if e != nil {
			return nil, e
		}
		out = append(out, model.Message{Role: model.Role(role), Content: content})
	}
	return out, nil
}

// blocks converts message i's content.
func blocks(i int, raw json.RawMessage) ([]model.Block, *protocol.Error) {
	raw, ok := present(raw)
	if !ok {
		return nil, invalid(fmt.Sprintf("messages[%d] has no content", i))
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil || s == "" {
			return nil, invalid(fmt.Sprintf("messages[%d].content is empty", i))
		}
		return []model.Block{{Type: model.Text, Text: s}}, nil
	}
	var list []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &list) != nil {
		return nil, invalid(fmt.Sprintf("messages[%d].content must be a string or an array of content blocks", i))
	}
	if len(list) == 0 {
		return nil, invalid(fmt.Sprintf("messages[%d].content is empty", i))
	}
	out := make([]model.Block, 0, len(list))
	for j, item := range list {
		var b wireBlock
		if item = bytes.TrimSpace(item); len(item) == 0 || item[0] != '{' || json.Unmarshal(item, &b) != nil {
			return nil, invalid(fmt.Sprintf("messages[%d].content[%d] is not a content block object", i, j))
		}
		switch b.Type {
		case "text":
			if b.Text == nil || *b.Text == "" {
				return nil, invalid(fmt.Sprintf("messages[%d].content[%d] is a text block with no text", i, j))
			}
			out = append(out, model.Block{Type: model.Text, Text: *b.Text})
		case "image":
			if b.Data == "" || b.MimeType == "" {
				return nil, invalid(fmt.Sprintf("messages[%d].content[%d] is an image without data and mimeType: this host takes images inline only, not by uri", i, j))
			}
			out = append(out, model.Block{Type: model.Image, Data: b.Data, MimeType: b.MimeType})
		default:
			return nil, invalid(fmt.Sprintf("messages[%d].content[%d] has type %q, which this host cannot pass to a model: only text blocks and inline image blocks (data and mimeType) are taken", i, j, b.Type))
		}
	}
	return out, nil
}

// preferences returns preferences.maxTokens, or DefaultMaxTokens when it is
// not given. Other keys are advisory and ignored (SPEC §11.2): temperature
// is accepted but not applied, since model.Request carries none.
func preferences(raw json.RawMessage) (int, *protocol.Error) {
	raw, ok := present(raw)
	if !ok {
		return DefaultMaxTokens, nil
	}
	var prefs map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &prefs) != nil {
		return 0, invalid("preferences must be an object")
	}
	mt, ok := present(prefs["maxTokens"])
	if !ok {
		return DefaultMaxTokens, nil
	}
	var f float64
	if mt[0] == '"' || json.Unmarshal(mt, &f) != nil || f != math.Trunc(f) || f < 1 || f > MaxMaxTokens {
		return 0, invalid(fmt.Sprintf("preferences.maxTokens is %s: it must be a positive integer of at most %d", shown(mt), MaxMaxTokens))
	}
	return int(f), nil
}

// present returns raw trimmed, and false when it is absent or null.
func present(raw json.RawMessage) (json.RawMessage, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, false
	}
	return raw, true
}

// shown renders a value a server sent for an error message, shortened.
func shown(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0:
		return "missing"
	case len(raw) > 40:
		return string(raw[:40]) + "…"
	}
	return string(raw)
}

// invalid is a -32602 Invalid params error saying why.
func invalid(why string) *protocol.Error {
	return protocol.NewError(protocol.CodeInvalidParams, "Invalid params: "+why, nil)
}
