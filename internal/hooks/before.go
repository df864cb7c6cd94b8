package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/protocol"
)

// beforeParams is context/beforeInference's params (SPEC §10.1).
// UserMessage has no omitempty: the key is always sent, null when the
// target is not granted observe.
type beforeParams struct {
	InferenceID    string                    `json:"inferenceId"`
	ConversationID string                    `json:"conversationId"`
	TurnIndex      int                       `json:"turnIndex"`
	UserMessage    *string                   `json:"userMessage"`
	Model          *protocol.ModelInfoResult `json:"model"`
}

// beforeResult is context/beforeInference's result (SPEC §10.2).
type beforeResult struct {
	FeatureSet        string          `json:"featureSet"`
	ContextInjections json.RawMessage `json:"contextInjections"`
}

// wireInjection is one injection as the server sent it (SPEC §10.4).
type wireInjection struct {
	Namespace string          `json:"namespace"`
	Position  string          `json:"position"`
	Content   json.RawMessage `json:"content"`
	Metadata  json.RawMessage `json:"metadata"`
}

// hookGranted reports whether g grants any part of context/beforeInference:
// observe or an inject leaf.
func hookGranted(g grant.Grant) bool {
	if g.Has(PathObserve) {
		return true
	}
	for _, p := range positions {
		if g.Has(p.path) {
			return true
		}
	}
	return false
}

// Before sends context/beforeInference to every target granted
// contextHooks.beforeInference.observe or any inject leaf, all in parallel,
// each bounded by the Runner's timeout, and returns the authorized
// injections grouped by position (system, beforeUser, afterUser), within a
// position in targets' order and then the server's. It returns when every
// call has ended or timed out, or when ctx ends; whatever has not answered
// by then contributes nothing. See the package doc for what is sent, what
// is accepted and what is logged.
func (r *Runner) Before(ctx context.Context, targets []Target, t Turn) []Injection {
	if ctx.Err() != nil {
		return nil
	}
	callCtx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	type answer struct {
		i    int
		injs []Injection
	}
	answers := make(chan answer, len(targets))
	calls := 0
	for i, tg := range targets {
		g := tg.grantNow()
		if !hookGranted(g) {
			continue
		}
		if tg.Call == nil {
			r.log.Warn("context/beforeInference not sent: the server cannot be called", slog.String("server", tg.Server), slog.String("inference_id", t.InferenceID))
			continue
		}
		p := beforeParams{InferenceID: t.InferenceID, ConversationID: t.ConversationID, TurnIndex: t.TurnIndex, Model: t.modelInfo()}
		if g.Has(PathObserve) {
			p.UserMessage = t.UserMessage
		}
		calls++
		r.enter(tg.Server)
		go func() { answers <- answer{i, r.call(ctx, callCtx, tg, p)} }()
	}
	byTarget := make([][]Injection, len(targets))
collect:
	for range calls {
		select {
		case a := <-answers:
			byTarget[a.i] = a.injs
		case <-callCtx.Done():
			// Take what has already arrived, and no more.
			for {
				select {
				case a := <-answers:
					byTarget[a.i] = a.injs
				default:
					break collect
				}
			}
		}
	}
	var out []Injection
	for _, p := range positions {
		for _, injs := range byTarget {
			for _, in := range injs {
				if in.Position == p.name {
					out = append(out, in)
				}
			}
		}
	}
	return out
}

// call makes one context/beforeInference call (the caller has entered
// tg.Server's hook) and returns the injections tg's grant authorizes when
// the answer arrives. ctx is Before's, callCtx the call's, bounded by the
// timeout.
func (r *Runner) call(ctx, callCtx context.Context, tg Target, p beforeParams) []Injection {
	var raw json.RawMessage
	err := tg.Call(callCtx, MethodBeforeInference, p, &raw)
	r.leave(tg.Server)
	log := r.log.With(slog.String("server", tg.Server), slog.String("inference_id", p.InferenceID))
	switch {
	case err != nil && ctx.Err() != nil:
		log.Info("context/beforeInference abandoned: the inference went on without it", slog.String("error", err.Error()))
		return nil
	case err != nil && errors.Is(callCtx.Err(), context.DeadlineExceeded):
		log.Warn(fmt.Sprintf("context/beforeInference timed out after %s: the inference goes on without this server's contribution", r.timeout))
		return nil
	case err != nil:
		log.Warn("context/beforeInference failed: the inference goes on without this server's contribution", slog.String("error", err.Error()))
		return nil
	case callCtx.Err() != nil:
		log.Warn("context/beforeInference answered too late: the inference went on without this server's contribution")
		return nil
	}
	injs, drops, bad := parseAnswer(raw, tg)
	if bad != "" {
		log.Warn("context/beforeInference answer is malformed and contributes nothing: "+bad, slog.String("answer", clip(raw)))
		return nil
	}
	if len(drops) > 0 {
		log.Warn(fmt.Sprintf("context/beforeInference: %d of the server's injections dropped", len(drops)),
			slog.Int("kept", len(injs)), slog.String("reasons", summarize(drops)))
	}
	if len(injs) > 0 {
		r.warnDeprecated(tg.Server)
	}
	return injs
}

// parseAnswer returns the injections of a context/beforeInference result
// that tg's grant, read now, authorizes, with why each other one was
// dropped; bad says why the whole answer is malformed ("" when it is not).
func parseAnswer(raw json.RawMessage, tg Target) (injs []Injection, drops []string, bad string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil, ""
	}
	var res beforeResult
	if raw[0] != '{' || json.Unmarshal(raw, &res) != nil {
		return nil, nil, "the result is not an object of the right shape"
	}
	list := bytes.TrimSpace(res.ContextInjections)
	if len(list) == 0 || bytes.Equal(list, []byte("null")) {
		return nil, nil, ""
	}
	var items []json.RawMessage
	if list[0] != '[' || json.Unmarshal(list, &items) != nil {
		return nil, nil, "contextInjections is not an array"
	}
	g := tg.grantNow()
	for i, item := range items {
		in, why := injection(item, g)
		if why != "" {
			drops = append(drops, fmt.Sprintf("#%d %s", i, why))
			continue
		}
		in.Server = tg.Server
		injs = append(injs, in)
	}
	return injs, drops, ""
}

// injection authorizes and checks one injection against g; why says why it
// is dropped ("" when it is kept).
func injection(item json.RawMessage, g grant.Grant) (in Injection, why string) {
	var w wireInjection
	if item = bytes.TrimSpace(item); len(item) == 0 || item[0] != '{' || json.Unmarshal(item, &w) != nil {
		return in, "is not an injection object of the right shape"
	}
	path, known := positionPath(w.Position)
	switch {
	case !known:
		return in, fmt.Sprintf("has position %q, which is none of system, beforeUser, afterUser", w.Position)
	case !g.Has(path):
		return in, fmt.Sprintf("at position %q is not granted (%s)", w.Position, path)
	case w.Namespace == "":
		return in, "has no namespace"
	}
	content, err := blocks(w.Content)
	if err != nil {
		return in, err.Error()
	}
	meta := bytes.TrimSpace(w.Metadata)
	switch {
	case len(meta) == 0 || bytes.Equal(meta, []byte("null")):
		meta = nil
	case meta[0] != '{':
		return in, "has metadata that is not an object"
	}
	return Injection{Namespace: w.Namespace, Position: w.Position, Content: content, Metadata: meta}, ""
}

// textBlock is the block a plain-string content becomes (SPEC §10.3).
type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// blocks returns an injection's content as content blocks.
func blocks(raw json.RawMessage) ([]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
		return nil, errors.New("has no content")
	case raw[0] == '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, errors.New("has content that is not a valid string")
		}
		if s == "" {
			return nil, errors.New("has empty content")
		}
		b, _ := json.Marshal(textBlock{Type: "text", Text: s})
		return []json.RawMessage{b}, nil
	case raw[0] != '[':
		return nil, errors.New("has content that is neither a string nor an array of content blocks")
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return nil, errors.New("has content that is not an array of content blocks")
	}
	if len(list) == 0 {
		return nil, errors.New("has empty content")
	}
	out := make([]json.RawMessage, 0, len(list))
	for j, b := range list {
		var head struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		b = bytes.TrimSpace(b)
		switch {
		case len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &head) != nil:
			return nil, fmt.Errorf("has content[%d] that is not a content block object", j)
		case head.Type == "":
			return nil, fmt.Errorf("has content[%d] with no type", j)
		case head.Type == "text" && head.Text == nil:
			return nil, fmt.Errorf("has text block content[%d] with no text", j)
		}
		out = append(out, b)
	}
	return out, nil
}

// summarize joins the first few drop reasons for one log line.
func summarize(drops []string) string {
	const most = 5
	if len(drops) <= most {
		return strings.Join(drops, "; ")
	}
	return strings.Join(drops[:most], "; ") + fmt.Sprintf("; and %d more", len(drops)-most)
}

// clip shortens an answer for a log line.
func clip(raw json.RawMessage) string {
	const most = 200
	if len(raw) <= most {
		return string(raw)
	}
	return string(raw[:most]) + "…"
}
