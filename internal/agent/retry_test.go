package agent

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/internal/model"
)

// Retries of model calls (retry.go), on the bubble's clock.

func retryable(after time.Duration) error {
	return &model.Error{Text: "openai: HTTP 429 from the model server at 127.0.0.1:18091: slow down (set OPENAI_API_KEY)", Retryable: true, RetryAfter: after}
}

func TestRetryPolicyNext(t *testing.T) {
	none := func(time.Duration) time.Duration { return 0 }
	all := func(d time.Duration) time.Duration { return d }
	p := RetryPolicy{Attempts: 8, MaxElapsed: time.Hour}
	var waits []time.Duration
	for n := 1; n < 8; n++ {
		w, stop := p.next(n, 0, retryable(0), false, none)
		if stop != "" {
			t.Fatalf("attempt %d: stop %q", n, stop)
		}
		waits = append(waits, w)
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}; !slices.Equal(waits, want) {
		t.Errorf("waits %v, want %v", waits, want)
	}
	for _, tc := range []struct {
		name     string
		p        RetryPolicy
		attempt  int
		elapsed  time.Duration
		err      error
		streamed bool
		jitter   func(time.Duration) time.Duration
		wait     time.Duration
		stop     string
	}{
		{"jitter adds up to half", p, 3, 0, retryable(0), false, all, 6 * time.Second, ""},
		{"Retry-After longer than the backoff", p, 1, 0, retryable(7 * time.Second), false, all, 7 * time.Second, ""},
		{"Retry-After shorter than the backoff", p, 3, 0, retryable(time.Second), false, none, 4 * time.Second, ""},
		{"not retryable", p, 1, 0, &model.Error{Text: "401"}, false, none, 0, stopNotRetryable},
		{"not a model error", p, 1, 0, context.DeadlineExceeded, false, none, 0, stopNotRetryable},
		{"streamed", p, 1, 0, retryable(0), true, none, 0, stopStreamed},
		{"attempts spent", RetryPolicy{Attempts: 3}, 3, 0, retryable(0), false, none, 0, stopSpent},
		{"one attempt: no retry", RetryPolicy{Attempts: 1}, 1, 0, retryable(0), false, none, 0, stopSpent},
		{"defaults: four attempts", RetryPolicy{}, 4, 0, retryable(0), false, none, 0, stopSpent},
		{"the wait would end past maxElapsed", RetryPolicy{MaxElapsed: 10 * time.Second}, 2, 9 * time.Second, retryable(0), false, none, 0, stopOutOfTime},
		{"Retry-After past maxElapsed", RetryPolicy{MaxElapsed: 5 * time.Second}, 1, 0, retryable(10 * time.Second), false, none, 0, stopOutOfTime},
	} {
		w, stop := tc.p.next(tc.attempt, tc.elapsed, tc.err, tc.streamed, tc.jitter)
		if w != tc.wait || stop != tc.stop {
			t.Errorf("%s: wait %v stop %q, want %v %q", tc.name, w, stop, tc.wait, tc.stop)
		}
	}
}

// failing answers with errs in turn, then with "done".
func failing(errs ...error) *fakeModel {
	return &fakeModel{respond: func(n int, req model.Request) (model.Response, error) {
		if n < len(errs) {
			return model.Response{}, errs[n]
		}
		return respond(model.EndTurn, textBlock("done")), nil
	}}
}

func noJitter(time.Duration) time.Duration { return 0 }

// TestModelRetried: a call that fails twice, retryably, is made again
// after the backoff or the provider's Retry-After, whichever is longer;
// the turn answers, and its history holds no failure.
func TestModelRetried(t *testing.T) {
	m := failing(retryable(3*time.Second), retryable(0))
	var at []time.Time
	inner := m.respond
	m.respond = func(n int, req model.Request) (model.Response, error) {
		at = append(at, time.Now())
		return inner(n, req)
	}
	bubble(t, Options{jitter: noJitter, Agents: []Spec{{Name: "ada", Model: m, Provider: "openai"}}}, func(h *harness) {
		t := h.t
		h.env.channel("chat", "general", "open")
		h.add(chanMsg("chat", "general", "g1", "hi", "chat:addressed"))
		time.Sleep(time.Minute)
		synctest.Wait()
		if len(at) != 3 {
			t.Fatalf("%d calls, want 3", len(at))
		}
		if gaps := []time.Duration{at[1].Sub(at[0]), at[2].Sub(at[1])}; !slices.Equal(gaps, []time.Duration{3 * time.Second, 2 * time.Second}) {
			t.Errorf("waits %v, want [3s (Retry-After over the 1 s backoff) 2s]", gaps)
		}
		_, _, _, pubs := h.env.snapshot()
		if len(pubs) != 1 || pubs[0].Text != "done" {
			t.Errorf("published %+v, want the answer", pubs)
		}
		for _, ev := range h.rec.of("ada", EventNotice) {
			if strings.HasPrefix(ev.Text, "[host]") {
				t.Errorf("a notice %q, want none from the host", ev.Text)
			}
		}
		var got []string
		for _, ev := range h.rec.of("ada", "") {
			switch ev.Event {
			case EventModelRetry, EventModelFailed, EventModel:
				got = append(got, ev.Event+" "+ev.Provider+" "+strconv.Itoa(ev.Attempt.N)+" "+strconv.FormatInt(ev.Attempt.WaitMs, 10))
			}
		}
		if diff := cmp.Diff([]string{"model_retry openai 1 3000", "model_retry openai 2 2000", "model openai 3 0"}, got); diff != "" {
			t.Errorf("transcript (-want +got):\n%s", diff)
		}
		for _, ev := range h.rec.of("ada", EventModelRetry) {
			if !strings.Contains(ev.Text, "HTTP 429") {
				t.Errorf("a retry's event %q doesn't say what failed, for the operator", ev.Text)
			}
		}
	})
}

// TestModelRetriesSpent: a call that keeps failing is made Attempts times;
// the agent is told, in its terms, with none of the provider's words.
func TestModelRetriesSpent(t *testing.T) {
	m := failing(retryable(0), retryable(0), retryable(0), retryable(0))
	bubble(t, Options{jitter: noJitter, Agents: []Spec{{Name: "ada", Model: m, Retry: RetryPolicy{Attempts: 3}}}}, func(h *harness) {
		t := h.t
		h.env.channel("chat", "general", "open")
		h.add(chanMsg("chat", "general", "g1", "hi", "chat:addressed"))
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := len(m.requests()); n != 3 {
			t.Fatalf("%d calls, want 3", n)
		}
		want := "[host] This turn ended early: the model call failed and was retried twice; the message was not answered. What you said before it stands; nothing after it was sent. The next message that wakes you starts a new turn."
		if evs := h.rec.of("ada", EventNotice); len(evs) != 1 || evs[0].Text != want {
			t.Errorf("notices %+v, want %q", evs, want)
		}
		if evs := h.rec.of("ada", EventModelFailed); len(evs) != 1 || evs[0].Reason != stopSpent || evs[0].Attempt.N != 3 {
			t.Errorf("model_failed %+v, want one, attempt 3, %s", evs, stopSpent)
		}
		if evs := h.rec.of("ada", EventTurnEnd); len(evs) != 1 || evs[0].Reason != "error" {
			t.Errorf("turn_end %+v, want error", evs)
		}
	})
}

// TestModelRetryOutOfTime: a Retry-After past maxElapsed is not waited.
func TestModelRetryOutOfTime(t *testing.T) {
	m := failing(retryable(10 * time.Minute))
	bubble(t, Options{jitter: noJitter, Agents: []Spec{{Name: "ada", Model: m}}}, func(h *harness) {
		t := h.t
		h.env.channel("chat", "general", "open")
		h.add(chanMsg("chat", "general", "g1", "hi", "chat:addressed"))
		if n := len(m.requests()); n != 1 {
			t.Fatalf("%d calls, want 1", n)
		}
		want := "[host] This turn ended early: the model call failed; the message was not answered. What you said before it stands; nothing after it was sent. The next message that wakes you starts a new turn."
		if evs := h.rec.of("ada", EventNotice); len(evs) != 1 || evs[0].Text != want {
			t.Errorf("notices %+v, want %q", evs, want)
		}
	})
}

// brokenStreamer streams its first piece, then fails retryably.
type brokenStreamer struct{ calls *int }

func (m brokenStreamer) Info() model.Info { return model.Info{ID: "broken"} }

func (m brokenStreamer) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	*m.calls++
	if req.OnText != nil {
		req.OnText("Hello, ")
	}
	return model.Response{}, retryable(0)
}

// TestNoRetryAfterStreaming: a call that fails once its text began to
// stream into the channel is not made again; the stream is completed with
// what went out, typing stops, and the agent is told what was posted.
func TestNoRetryAfterStreaming(t *testing.T) {
	env := newEnv()
	env.typing = map[string]bool{"chat/general": true}
	env.streams = map[string]bool{"chat/general": true}
	calls := 0
	bubble(t, Options{Env: env, jitter: noJitter, Agents: []Spec{{Name: "ada", Model: brokenStreamer{&calls}}}}, func(h *harness) {
		t := h.t
		h.env.channel("chat", "general", "open")
		h.add(chanMsg("chat", "general", "g1", "hi", "chat:addressed"))
		if calls != 1 {
			t.Fatalf("%d calls, want 1", calls)
		}
		want := []string{"typing start chat/general", "chunk chat/general 0 Hello, ", "complete chat/general Hello,", "typing stop chat/general"}
		if diff := cmp.Diff(want, h.env.sent()); diff != "" {
			t.Errorf("sent (-want +got):\n%s", diff)
		}
		note := `[host] This turn ended early: the model call failed after the start of your answer had been posted to #general (general): "Hello,". It was not tried again, so that nothing is posted twice, and the rest of your answer was not sent. The next message that wakes you starts a new turn.`
		if evs := h.rec.of("ada", EventNotice); len(evs) != 1 || evs[0].Text != note {
			t.Errorf("notices %+v, want %q", evs, note)
		}
		if evs := h.rec.of("ada", EventModelFailed); len(evs) != 1 || evs[0].Reason != stopStreamed {
			t.Errorf("model_failed %+v, want one, %s", evs, stopStreamed)
		}
	})
}

// The issue's own words, for the default four attempts: "the model call
// failed and was retried 3 times; the message was not answered".
func TestModelFailedTextAfterDefaultRetries(t *testing.T) {
	got := textModelFailed(&callFailed{err: retryable(0), attempts: DefaultRetryAttempts, stop: stopSpent}, "", "")
	want := "[host] This turn ended early: the model call failed and was retried 3 times; the message was not answered. What you said before it stands; nothing after it was sent. The next message that wakes you starts a new turn."
	if got != want {
		t.Errorf("text %q, want %q", got, want)
	}
	if strings.Contains(got, "127.0.0.1") || strings.Contains(got, "OPENAI_API_KEY") {
		t.Errorf("the provider's words reached the agent: %q", got)
	}
}
