package hooks_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/internal/hooks"
	"github.com/mcpl-go/mcpl/internal/logtest"
)

// inj is one injection's JSON with a single text block.
func inj(namespace, position, text string) string {
	return fmt.Sprintf(`{"namespace":%q,"position":%q,"content":[{"type":"text","text":%q}]}`, namespace, position, text)
}

// result is a context/beforeInference result holding injections.
func result(injs ...string) string {
	return `{"featureSet":"memory.retrieval","contextInjections":[` + strings.Join(injs, ",") + `]}`
}

func runner(rec *logtest.Recorder) *hooks.Runner {
	var log *slog.Logger
	if rec != nil {
		log = rec.Logger()
	}
	return hooks.New(hooks.Options{Logger: log})
}

func TestBeforeParams(t *testing.T) {
	tests := []struct {
		name  string
		paths []string
		user  *string
		want  string // userMessage as JSON
	}{
		{"observe gets the user's text", []string{observe}, ptr("hello"), `"hello"`},
		{"no observe: null though the caller passes text", []string{injAfter}, ptr("hello"), `null`},
		{"observe, continued generation: null", []string{observe}, nil, `null`},
		{"every inject leaf, no observe: null", []string{injSystem, injBefore, injAfter}, ptr("hello"), `null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake("a", tt.paths...)
			tu := turn
			tu.UserMessage = tt.user
			runner(nil).Before(t.Context(), targets(f), tu)
			calls, _ := f.sent()
			if len(calls) != 1 || calls[0].method != hooks.MethodBeforeInference {
				t.Fatalf("calls %v, want one %s", calls, hooks.MethodBeforeInference)
			}
			want := `{"inferenceId":"inf_1","conversationId":"conv_1","turnIndex":3,"userMessage":` + tt.want +
				`,"model":{"id":"m-1","vendor":"acme","contextWindow":200000}}`
			if got := canon(t, calls[0].params); got != canon(t, []byte(want)) {
				t.Fatalf("params %s, want %s", got, want)
			}
		})
	}
}

func TestBeforeModelOmitsUnknownContextWindow(t *testing.T) {
	f := newFake("a", observe)
	tu := turn
	tu.Model.ContextWindow = 0
	runner(nil).Before(t.Context(), targets(f), tu)
	calls, _ := f.sent()
	m := decode(t, calls[0].params)["model"].(map[string]any)
	if _, ok := m["contextWindow"]; ok {
		t.Fatalf("model %v has a contextWindow, want it omitted when unknown", m)
	}
}

func TestBeforeWhoIsCalled(t *testing.T) {
	tests := []struct {
		paths []string
		want  bool
	}{
		{[]string{observe}, true},
		{[]string{injSystem}, true},
		{[]string{injBefore}, true},
		{[]string{injAfter}, true},
		{[]string{lifecycle, modelInfoP, "pushEvents"}, false},
		{nil, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.paths), func(t *testing.T) {
			f := newFake("a", tt.paths...)
			runner(nil).Before(t.Context(), targets(f), turn)
			if calls, _ := f.sent(); (len(calls) == 1) != tt.want {
				t.Fatalf("granted %v: %d calls, want called %v", tt.paths, len(calls), tt.want)
			}
		})
	}
}

func TestBeforeAuthorizesEachInjection(t *testing.T) {
	rec := logtest.New()
	f := newFake("a", injAfter).answers(result(inj("mem", "system", "SYS"), inj("mem", "afterUser", "AFTER")))
	got := brief(t, runner(rec).Before(t.Context(), targets(f), turn))
	if want := []string{"a/mem@afterUser:AFTER"}; !slices.Equal(got, want) {
		t.Fatalf("injections %v, want %v", got, want)
	}
	r := rec.One(t, "context/beforeInference: 1 of the server's injections dropped")
	if !strings.Contains(r.Attr("reasons"), hooks.PathInjectSystem) {
		t.Fatalf("the drop's reasons %q do not name the missing leaf", r.Attr("reasons"))
	}
}

// The grant read when the answer arrives decides, not the one the call
// was made under.
func TestBeforeGrantAtReceipt(t *testing.T) {
	tests := []struct {
		name          string
		atCall, atAns []string
		want          []string
	}{
		{"inject.system revoked in flight", []string{observe, injSystem}, []string{observe}, []string{}},
		{"inject.system granted in flight", []string{observe}, []string{observe, injSystem}, []string{"a/mem@system:SYS"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake("a", tt.atCall...)
			f.answer = func(context.Context) (string, error) {
				f.setGrant(tt.atAns...)
				return result(inj("mem", "system", "SYS")), nil
			}
			if got := brief(t, runner(nil).Before(t.Context(), targets(f), turn)); !slices.Equal(got, tt.want) {
				t.Fatalf("injections %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBeforeContent(t *testing.T) {
	f := newFake("a", injSystem).answers(`{"contextInjections":[
		{"namespace":"n","position":"system","content":"plain text","metadata":{"memoryIds":["m1"]}},
		{"namespace":"n","position":"system","content":[{"type":"image","data":"AAAA","mimeType":"image/png"},{"type":"resource","uri":"memory://x"}]}]}`)
	injs := runner(nil).Before(t.Context(), targets(f), turn)
	if len(injs) != 2 {
		t.Fatalf("%d injections, want 2: %v", len(injs), brief(t, injs))
	}
	if len(injs[0].Content) != 1 || canon(t, injs[0].Content[0]) != `{"text":"plain text","type":"text"}` {
		t.Fatalf("string content became %s, want one text block", injs[0].Content)
	}
	if canon(t, injs[0].Metadata) != `{"memoryIds":["m1"]}` {
		t.Fatalf("metadata %s", injs[0].Metadata)
	}
	if injs[1].Metadata != nil {
		t.Fatalf("absent metadata became %s, want nil", injs[1].Metadata)
	}
	want := []string{`{"data":"AAAA","mimeType":"image/png","type":"image"}`, `{"type":"resource","uri":"memory://x"}`}
	var got []string
	for _, c := range injs[1].Content {
		got = append(got, canon(t, c))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("blocks %v, want them as the server sent them %v", got, want)
	}
}

// A malformed injection is dropped; the good one beside it is kept.
func TestBeforeMalformedInjection(t *testing.T) {
	tests := []struct{ name, injection, reason string }{
		{"unknown position", `{"namespace":"n","position":"footer","content":"x"}`, `position "footer"`},
		{"no position", `{"namespace":"n","content":"x"}`, `position ""`},
		{"no namespace", `{"position":"system","content":"x"}`, "no namespace"},
		{"no content", `{"namespace":"n","position":"system"}`, "no content"},
		{"empty string content", `{"namespace":"n","position":"system","content":""}`, "empty content"},
		{"empty block list", `{"namespace":"n","position":"system","content":[]}`, "empty content"},
		{"content a number", `{"namespace":"n","position":"system","content":7}`, "neither a string nor an array"},
		{"block not an object", `{"namespace":"n","position":"system","content":["x"]}`, "content[0] that is not a content block"},
		{"block without type", `{"namespace":"n","position":"system","content":[{"text":"x"}]}`, "content[0] with no type"},
		{"text block without text", `{"namespace":"n","position":"system","content":[{"type":"text"}]}`, "content[0] with no text"},
		{"metadata a string", `{"namespace":"n","position":"system","content":"x","metadata":"m"}`, "metadata that is not an object"},
		{"namespace a number", `{"namespace":1,"position":"system","content":"x"}`, "not an injection object"},
		{"not an object", `"system"`, "not an injection object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := logtest.New()
			f := newFake("a", injSystem).answers(result(tt.injection, inj("good", "system", "kept")))
			got := brief(t, runner(rec).Before(t.Context(), targets(f), turn))
			if want := []string{"a/good@system:kept"}; !slices.Equal(got, want) {
				t.Fatalf("injections %v, want %v", got, want)
			}
			r := rec.One(t, "context/beforeInference: 1 of the server's injections dropped")
			if !strings.Contains(r.Attr("reasons"), tt.reason) {
				t.Fatalf("reasons %q do not say %q", r.Attr("reasons"), tt.reason)
			}
		})
	}
}

// An answer that fails, or cannot be read, contributes nothing and is
// logged; the other server's injections are kept.
func TestBeforeFailOpen(t *testing.T) {
	tests := []struct {
		name   string
		answer func(context.Context) (string, error)
		log    string
	}{
		{"error answer", func(context.Context) (string, error) { return "", errors.New("jsonrpc error -32603: boom") },
			"context/beforeInference failed: the inference goes on without this server's contribution"},
		{"closed connection", func(context.Context) (string, error) { return "", errors.New("connection closed") },
			"context/beforeInference failed: the inference goes on without this server's contribution"},
		{"result an array", func(context.Context) (string, error) { return `[1]`, nil },
			"context/beforeInference answer is malformed and contributes nothing: the result is not an object of the right shape"},
		{"contextInjections an object", func(context.Context) (string, error) { return `{"contextInjections":{}}`, nil },
			"context/beforeInference answer is malformed and contributes nothing: contextInjections is not an array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := logtest.New()
			bad := newFake("bad", injSystem)
			bad.answer = tt.answer
			good := newFake("good", injSystem).answers(result(inj("n", "system", "ok")))
			got := brief(t, runner(rec).Before(t.Context(), targets(bad, good), turn))
			if want := []string{"good/n@system:ok"}; !slices.Equal(got, want) {
				t.Fatalf("injections %v, want %v", got, want)
			}
			if r := rec.One(t, tt.log); r.Attr("server") != "bad" {
				t.Fatalf("logged for server %q, want bad", r.Attr("server"))
			}
		})
	}
}

func TestBeforeEmptyAnswers(t *testing.T) {
	for _, answer := range []string{`{}`, `null`, `{"featureSet":"x","contextInjections":null}`, `{"contextInjections":[]}`} {
		rec := logtest.New()
		f := newFake("a", observe, injSystem).answers(answer)
		if got := runner(rec).Before(t.Context(), targets(f), turn); len(got) != 0 {
			t.Fatalf("answer %s gave %v", answer, got)
		}
		if warns := rec.AtLeast(slog.LevelWarn); len(warns) != 0 {
			t.Fatalf("answer %s logged warnings:\n%s", answer, rec.Dump())
		}
	}
}

// Order is by position, then by target (not by arrival), then by the
// server's order.
func TestBeforeOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		all := []string{injSystem, injBefore, injAfter}
		a := newFake("a", all...)
		a.answer = func(context.Context) (string, error) {
			time.Sleep(time.Second) // a answers after b
			return result(inj("n", "afterUser", "a1"), inj("n", "system", "a2"), inj("n", "beforeUser", "a3"), inj("n", "system", "a4")), nil
		}
		b := newFake("b", all...).answers(result(inj("n", "system", "b1"), inj("n", "afterUser", "b2")))
		got := brief(t, runner(nil).Before(t.Context(), targets(a, b), turn))
		want := []string{"a/n@system:a2", "a/n@system:a4", "b/n@system:b1", "a/n@beforeUser:a3", "a/n@afterUser:a1", "b/n@afterUser:b2"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("order (-want +got):\n%s", diff)
		}
	})
}

func TestBeforeSlowHookSkipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := logtest.New()
		slow := newFake("slow", injSystem)
		slow.answer = func(ctx context.Context) (string, error) {
			select {
			case <-time.After(time.Minute):
				return result(inj("n", "system", "late")), nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		fast := newFake("fast", injSystem).answers(result(inj("n", "system", "quick")))
		start := time.Now()
		got := brief(t, runner(rec).Before(t.Context(), targets(slow, fast), turn))
		if took := time.Since(start); took != hooks.DefaultTimeout {
			t.Fatalf("Before took %s, want the %s timeout", took, hooks.DefaultTimeout)
		}
		if want := []string{"fast/n@system:quick"}; !slices.Equal(got, want) {
			t.Fatalf("injections %v, want %v", got, want)
		}
		synctest.Wait() // the slow call's goroutine logs as it ends
		if r := rec.One(t, "context/beforeInference timed out after 5s: the inference goes on without this server's contribution"); r.Attr("server") != "slow" {
			t.Fatalf("timeout logged for %q", r.Attr("server"))
		}
	})
}

func TestBeforeCustomTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := newFake("slow", injSystem)
		slow.answer = func(ctx context.Context) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		}
		start := time.Now()
		hooks.New(hooks.Options{Timeout: 300 * time.Millisecond}).Before(t.Context(), targets(slow), turn)
		if took := time.Since(start); took != 300*time.Millisecond {
			t.Fatalf("Before took %s, want 300ms", took)
		}
	})
}

// A hook that answers after the caller's ctx ended contributes nothing:
// Before has returned by then.
func TestBeforeAnswerAfterCtxEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := logtest.New()
		late := newFake("late", injSystem)
		late.answer = func(context.Context) (string, error) {
			time.Sleep(3 * time.Second) // ignores ctx
			return result(inj("n", "system", "too late")), nil
		}
		ontime := newFake("ontime", injSystem).answers(result(inj("n", "system", "in time")))
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			time.Sleep(time.Second)
			cancel()
		}()
		r := runner(rec)
		start := time.Now()
		got := brief(t, r.Before(ctx, targets(late, ontime), turn))
		if took := time.Since(start); took != time.Second {
			t.Fatalf("Before returned after %s, want 1s, when ctx ended", took)
		}
		if want := []string{"ontime/n@system:in time"}; !slices.Equal(got, want) {
			t.Fatalf("injections %v, want %v", got, want)
		}
		if !r.InHook("late") {
			t.Fatal("InHook(late) is false while its call is still in flight")
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if r.InHook("late") {
			t.Fatal("InHook(late) is still true after its call returned")
		}
		rec.One(t, "context/beforeInference answered too late: the inference went on without this server's contribution")
	})
}

func TestBeforeCtxAlreadyEnded(t *testing.T) {
	f := newFake("a", observe)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if got := runner(nil).Before(ctx, targets(f), turn); got != nil {
		t.Fatalf("got %v", got)
	}
	if calls, _ := f.sent(); len(calls) != 0 {
		t.Fatalf("called after ctx ended: %v", calls)
	}
}

func TestInHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := runner(nil)
		type seen struct{ self, other bool }
		var during seen
		a := newFake("a", observe)
		a.answer = func(context.Context) (string, error) {
			during = seen{r.InHook("a"), r.InHook("b")}
			time.Sleep(time.Second)
			return "{}", nil
		}
		b := newFake("b", lifecycle) // not called
		if r.InHook("a") {
			t.Fatal("InHook(a) before any call")
		}
		r.Before(t.Context(), targets(a, b), turn)
		if during != (seen{true, false}) {
			t.Fatalf("during the call InHook(a)=%v InHook(b)=%v, want true false", during.self, during.other)
		}
		if r.InHook("a") {
			t.Fatal("InHook(a) after Before returned")
		}
	})
}

func TestDeprecationWarnedOncePerServer(t *testing.T) {
	rec := logtest.New()
	r := runner(rec)
	a := newFake("a", injSystem).answers(result(inj("n", "system", "x")))
	b := newFake("b", injSystem).answers(result(inj("n", "system", "y")))
	quiet := newFake("quiet", injSystem).answers(result(inj("n", "afterUser", "not granted"))) // all dropped
	for range 3 {
		r.Before(t.Context(), targets(a, b, quiet), turn)
	}
	const msg = "context injection is deprecated: this server's authorized contextInjections are applied for the rest of MCPL 0.5, and MCPL 0.6 ignores them (RFC-010); the server should move to channels or tools"
	var servers []string
	for _, rec := range rec.Find(msg) {
		servers = append(servers, rec.Attr("server"))
	}
	slices.Sort(servers)
	if want := []string{"a", "b"}; !slices.Equal(servers, want) {
		t.Fatalf("deprecation warned for %v, want once each for %v", servers, want)
	}
	if other := runner(rec); len(other.Before(t.Context(), targets(a), turn)) != 1 {
		t.Fatal("a second runner dropped the injection")
	}
	if n := len(rec.Find(msg)); n != 3 {
		t.Fatalf("%d deprecation warnings, want a second runner to warn once more (3)", n)
	}
}

// A call the caller's ctx ends is abandoned quietly (Info), not reported
// as the server's failure.
func TestBeforeAbandonedWhenCtxEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := logtest.New()
		f := newFake("a", observe)
		f.answer = func(ctx context.Context) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		runner(rec).Before(ctx, targets(f), turn)
		synctest.Wait()
		r := rec.One(t, "context/beforeInference abandoned: the inference went on without it")
		if r.Level != slog.LevelInfo {
			t.Fatalf("logged at %s, want info", r.Level)
		}
		if warns := rec.AtLeast(slog.LevelWarn); len(warns) != 0 {
			t.Fatalf("warnings for an abandoned call:\n%s", rec.Dump())
		}
	})
}
