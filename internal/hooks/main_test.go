package hooks_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/hooks"
	"github.com/mcpl-go/mcpl/internal/model"
)

// TestMain fails the run if a test left a goroutine behind: a hook call
// Before did not wait for, say.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Grant leaves, short.
const (
	observe    = hooks.PathObserve
	injSystem  = hooks.PathInjectSystem
	injBefore  = hooks.PathInjectBeforeUser
	injAfter   = hooks.PathInjectAfterUser
	lifecycle  = hooks.PathLifecycle
	modelInfoP = hooks.PathModelInfo
)

// message is what a fake server got: a request's or a notification's
// method and params, as JSON.
type message struct {
	method string
	params json.RawMessage
}

// fake is an in-memory server: its grant can change at any time, it
// records what it is sent, and answer decides its answer to a request.
type fake struct {
	name string

	mu    sync.Mutex
	g     grant.Grant
	calls []message
	notes []message
	// answer returns the result's JSON, or an error; nil answers {}.
	answer func(ctx context.Context) (string, error)
	// failNotify, when set, fails every notification.
	failNotify error
}

func newFake(name string, paths ...string) *fake {
	return &fake{name: name, g: grant.Grant{Effective: paths}}
}

// answers makes f answer every request with result.
func (f *fake) answers(result string) *fake {
	f.answer = func(context.Context) (string, error) { return result, nil }
	return f
}

func (f *fake) setGrant(paths ...string) {
	f.mu.Lock()
	f.g = grant.Grant{Effective: paths}
	f.mu.Unlock()
}

func (f *fake) target() hooks.Target {
	return hooks.Target{
		Server: f.name,
		Grant: func() grant.Grant {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.g
		},
		Call:   f.call,
		Notify: f.notify,
	}
}

func (f *fake) call(ctx context.Context, method string, params, result any) error {
	b, err := json.Marshal(params)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.calls = append(f.calls, message{method, b})
	answer := f.answer
	f.mu.Unlock()
	res := "{}"
	if answer != nil {
		if res, err = answer(ctx); err != nil {
			return err
		}
	}
	return json.Unmarshal([]byte(res), result)
}

func (f *fake) notify(method string, params any) error {
	b, err := json.Marshal(params)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failNotify != nil {
		return f.failNotify
	}
	f.notes = append(f.notes, message{method, b})
	return nil
}

func (f *fake) sent() (calls, notes []message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls), slices.Clone(f.notes)
}

// targets returns the fakes' targets, in order.
func targets(fs ...*fake) []hooks.Target {
	var out []hooks.Target
	for _, f := range fs {
		out = append(out, f.target())
	}
	return out
}

func ptr(s string) *string { return &s }

// turn is the inference the tests run hooks for.
var turn = hooks.Turn{
	InferenceID:    "inf_1",
	ConversationID: "conv_1",
	TurnIndex:      3,
	UserMessage:    ptr("what did I say yesterday?"),
	Model:          model.Info{ID: "m-1", Vendor: "acme", ContextWindow: 200000},
}

// decode returns a JSON message as a generic value.
func decode(t testing.TB, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("params %s: %v", raw, err)
	}
	return m
}

// canon re-encodes JSON so that equal values compare equal.
func canon(t testing.TB, raw json.RawMessage) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// brief renders injections as "server/namespace@position:texts", the
// texts of its text blocks joined by "|" (another block shows as its JSON),
// for comparing order and content.
func brief(t testing.TB, injs []hooks.Injection) []string {
	t.Helper()
	out := []string{}
	for _, in := range injs {
		s := in.Server + "/" + in.Namespace + "@" + in.Position + ":"
		for j, c := range in.Content {
			if j > 0 {
				s += "|"
			}
			var b struct{ Type, Text string }
			if err := json.Unmarshal(c, &b); err == nil && b.Type == "text" {
				s += b.Text
			} else {
				s += canon(t, c)
			}
		}
		out = append(out, s)
	}
	return out
}

// mustJSON encodes v.
func mustJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
