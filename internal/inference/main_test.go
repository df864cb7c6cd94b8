package inference_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/inference"
	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/protocol"
)

// TestMain fails the run if a test left a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Feature sets the tests' grants declare.
const (
	fsOn  = "memory.consolidation" // enabled
	fsOff = "memory.off"           // disabled: capability_denied
)

// granted returns a grant of paths, declaring fsOn (enabled) and fsOff
// (disabled).
func granted(paths ...string) grant.Grant {
	return grant.Grant{Effective: paths, FeatureSets: []grant.FeatureSetState{
		{Name: fsOn, State: grant.StateEnabled},
		{Name: fsOff, State: grant.StateDisabled, Reason: grant.ReasonCapabilityDenied, Missing: []string{"inferenceRequest"}},
	}}
}

// fakeModel answers with resp (or err), handing deltas to OnText first;
// gen, when set, answers instead. It records the requests it gets.
type fakeModel struct {
	info   model.Info
	resp   model.Response
	err    error
	deltas []string
	gen    func(context.Context, model.Request) (model.Response, error)

	mu  sync.Mutex
	got []model.Request
}

func (m *fakeModel) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	m.mu.Lock()
	m.got = append(m.got, req)
	m.mu.Unlock()
	if m.gen != nil {
		return m.gen(ctx, req)
	}
	for _, d := range m.deltas {
		if req.OnText != nil {
			req.OnText(d)
		}
	}
	return m.resp, m.err
}

func (m *fakeModel) Info() model.Info { return m.info }

func (m *fakeModel) requests() []model.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.got)
}

// answering is a model that answers text with real-looking usage.
func answering() *fakeModel {
	return &fakeModel{
		info: model.Info{ID: "haiku-info-id", Vendor: "anthropic", ContextWindow: 200000},
		resp: model.Response{
			Content: []model.Block{{Type: model.Text, Text: "Consolidated "}, {Type: model.Text, Text: "summary."}},
			Stop:    model.EndTurn,
			Usage:   model.Usage{InputTokens: 451, OutputTokens: 123},
			Model:   "claude-haiku-4-5-20251001",
		},
	}
}

// routeTo routes every request to m as agent "memory", recording the keys
// it was asked for.
func routeTo(m model.Model, asked *[]string) func(string, string) (model.Model, string, bool) {
	return func(server, featureSet string) (model.Model, string, bool) {
		if asked != nil {
			*asked = append(*asked, server+"/"+featureSet)
		}
		return m, "memory", true
	}
}

// notes records notifications.
type notes struct {
	mu   sync.Mutex
	list []json.RawMessage
	fail error
}

func (n *notes) notify(method string, params any) error {
	if method != inference.MethodChunk {
		panic("unexpected notification " + method)
	}
	b, err := json.Marshal(params)
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.list = append(n.list, b)
	return n.fail
}

func (n *notes) all() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, b := range n.list {
		out = append(out, string(b))
	}
	return out
}

// wantError fails unless err is a *protocol.Error with code, data equal to
// data (as JSON; "" for none) and a message holding each of words.
func wantError(t testing.TB, err error, code int64, data string, words ...string) {
	t.Helper()
	e, ok := err.(*protocol.Error)
	if !ok {
		t.Fatalf("error %v (%T), want a *protocol.Error %d", err, err, code)
	}
	if e.Code != code {
		t.Fatalf("error %d %q, want code %d", e.Code, e.Message, code)
	}
	if string(e.Data) != data {
		t.Fatalf("error data %s, want %s", e.Data, data)
	}
	for _, w := range words {
		if !strings.Contains(e.Message, w) {
			t.Fatalf("error message %q does not say %q", e.Message, w)
		}
	}
}

const minimal = `{"featureSet":"memory.consolidation","messages":[{"role":"user","content":"Summarize: a, b"}]}`
