package hooks_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/mcpl-go/mcpl/internal/hooks"
	"github.com/mcpl-go/mcpl/internal/logtest"
	"github.com/mcpl-go/mcpl/internal/model"
)

// phases returns the phases f was notified of, checking each is an
// inference/lifecycle for turn.
func phases(t testing.TB, f *fake) []string {
	t.Helper()
	_, notes := f.sent()
	out := []string{}
	for _, n := range notes {
		if n.method != hooks.MethodLifecycle {
			t.Fatalf("notification %s, want %s", n.method, hooks.MethodLifecycle)
		}
		p := decode(t, n.params)
		if p["inferenceId"] != "inf_1" || p["conversationId"] != "conv_1" || p["turnIndex"] != float64(3) {
			t.Fatalf("params %s do not identify the inference", n.params)
		}
		out = append(out, p["phase"].(string))
	}
	return out
}

func TestLifecycleTerminals(t *testing.T) {
	tests := []struct {
		name  string
		end   func(*hooks.Inference)
		phase string
		usage string // the terminal's usage as JSON, "" for none
	}{
		{"completed", func(i *hooks.Inference) { i.Completed(model.Usage{InputTokens: 1250, OutputTokens: 340}) }, "completed", `{"inputTokens":1250,"outputTokens":340}`},
		{"aborted", (*hooks.Inference).Aborted, "aborted", ""},
		{"failed", (*hooks.Inference).Failed, "failed", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake("a", lifecycle)
			tt.end(runner(nil).Start(targets(f), turn))
			if got, want := phases(t, f), []string{"started", tt.phase}; !slices.Equal(got, want) {
				t.Fatalf("phases %v, want %v", got, want)
			}
			_, notes := f.sent()
			for i, n := range notes {
				u, has := decode(t, n.params)["usage"]
				switch {
				case i == 1 && tt.usage != "":
					b := mustJSON(t, u)
					if string(b) != tt.usage {
						t.Fatalf("usage %s, want %s", b, tt.usage)
					}
				case has:
					t.Fatalf("%s carries usage %v; only completed may", decode(t, n.params)["phase"], u)
				}
			}
		})
	}
}

func TestLifecycleSecondTerminal(t *testing.T) {
	rec := logtest.New()
	f := newFake("a", lifecycle)
	inf := runner(rec).Start(targets(f), turn)
	inf.Aborted()
	inf.Completed(model.Usage{InputTokens: 1})
	inf.Failed()
	inf.Aborted()
	if got, want := phases(t, f), []string{"started", "aborted"}; !slices.Equal(got, want) {
		t.Fatalf("phases %v, want %v", got, want)
	}
	r := rec.One(t, "inference/lifecycle: a second terminal phase for one inference was asked for and not sent (a defect of the caller; later ones are not logged)")
	if r.Attr("sent") != "aborted" || r.Attr("refused") != "completed" || r.Attr("inference_id") != "inf_1" {
		t.Fatalf("the defect's record %v", r.Attrs)
	}
}

func TestLifecycleModelOnlyWithModelInfo(t *testing.T) {
	with := newFake("with", lifecycle, modelInfoP)
	without := newFake("without", lifecycle)
	runner(nil).Start(targets(with, without), turn).Completed(model.Usage{})
	for _, tc := range []struct {
		f    *fake
		want bool
	}{{with, true}, {without, false}} {
		_, notes := tc.f.sent()
		if len(notes) != 2 {
			t.Fatalf("%s got %d notifications, want 2", tc.f.name, len(notes))
		}
		for _, n := range notes {
			m, has := decode(t, n.params)["model"]
			if has != tc.want {
				t.Fatalf("%s: model present %v, want %v (%s)", tc.f.name, has, tc.want, n.params)
			}
			if has && canon(t, mustJSON(t, m)) != `{"contextWindow":200000,"id":"m-1","vendor":"acme"}` {
				t.Fatalf("model %v", m)
			}
		}
	}
}

// Lifecycle goes only where inferenceLifecycle is granted; a terminal goes
// only where "started" went, and only while it still is granted.
func TestLifecycleTargets(t *testing.T) {
	kept := newFake("kept", lifecycle)
	never := newFake("never", observe, injSystem, modelInfoP)
	gains := newFake("gains") // granted after started: no terminal without a started
	loses := newFake("loses", lifecycle)
	broken := newFake("broken", lifecycle)
	broken.failNotify = errors.New("connection closed")
	rec := logtest.New()
	inf := runner(rec).Start(targets(kept, never, gains, loses, broken), turn)
	gains.setGrant(lifecycle)
	loses.setGrant()
	broken.mu.Lock()
	broken.failNotify = nil // reachable again, but its started was never sent
	broken.mu.Unlock()
	inf.Failed()
	for _, tc := range []struct {
		f    *fake
		want []string
	}{
		{kept, []string{"started", "failed"}},
		{never, []string{}},
		{gains, []string{}},
		{loses, []string{"started"}},
		{broken, []string{}},
	} {
		if got := phases(t, tc.f); !slices.Equal(got, tc.want) {
			t.Errorf("%s: phases %v, want %v", tc.f.name, got, tc.want)
		}
	}
	if r := rec.One(t, "inference/lifecycle not sent"); r.Attr("server") != "broken" || r.Attr("phase") != "started" {
		t.Fatalf("the failed notification's record %v", r.Attrs)
	}
}

// The notifications carry identifiers, phase, model and usage: no field
// that could hold the user's message or injected content.
func TestLifecycleCarriesNoContent(t *testing.T) {
	f := newFake("a", lifecycle, modelInfoP, observe, injSystem)
	runner(nil).Start(targets(f), turn).Completed(model.Usage{InputTokens: 5, OutputTokens: 6})
	allowed := []string{"inferenceId", "conversationId", "turnIndex", "phase", "model", "usage"}
	_, notes := f.sent()
	for _, n := range notes {
		for k := range decode(t, n.params) {
			if !slices.Contains(allowed, k) {
				t.Fatalf("inference/lifecycle carries %q: %s", k, n.params)
			}
		}
	}
}

func TestNilInference(t *testing.T) {
	var inf *hooks.Inference
	inf.Completed(model.Usage{InputTokens: 1})
	inf.Aborted()
	inf.Failed()
}

func TestStartWithoutTargetsStillCounts(t *testing.T) {
	rec := logtest.New()
	inf := runner(rec).Start(nil, turn)
	if inf == nil {
		t.Fatal("Start returned nil")
	}
	inf.Completed(model.Usage{})
	inf.Failed()
	rec.One(t, "inference/lifecycle: a second terminal phase for one inference was asked for and not sent (a defect of the caller; later ones are not logged)")
}
