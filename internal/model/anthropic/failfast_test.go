package anthropic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/internal/model/fakeapi"
	"github.com/mcpl-go/mcpl/internal/model/idle"
)

// againstFake is a model of a fakeapi server's, with opts.
func againstFake(t *testing.T, s *fakeapi.Server, opts Options) *Model {
	t.Helper()
	opts.Model = "claude-test"
	opts.BaseURL = s.URL
	opts.APIKeyEnv = "TEST_ANTHROPIC_KEY"
	opts.LookupEnv = env(testKey)
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// modelError is err as a *model.Error, failing the test when it is not.
func modelError(t *testing.T, err error) *model.Error {
	t.Helper()
	var merr *model.Error
	if !errors.As(err, &merr) {
		t.Fatalf("err = %T %v, want a *model.Error", err, err)
	}
	return merr
}

func TestRetryAfter(t *testing.T) {
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	s := fakeapi.NewAnthropic(t,
		fakeapi.Reply{Status: 429, RetryAfter: "7"},
		fakeapi.Reply{Status: 529, RetryAfter: date},
		fakeapi.Reply{Status: 503, RetryAfter: "soon"},
		fakeapi.Reply{Status: 500},
		fakeapi.Reply{Status: 429, RetryAfter: "99999"},
	)
	m := againstFake(t, s, Options{})
	for i, want := range []struct{ lo, hi time.Duration }{
		{7 * time.Second, 7 * time.Second},
		{60 * time.Second, 90 * time.Second}, // a date, to the second, seen a moment later
		{0, 0},
		{0, 0},
		{10 * time.Minute, 10 * time.Minute},
	} {
		merr := modelError(t, func() error { _, err := m.Generate(context.Background(), hello()); return err }())
		if merr.RetryAfter < want.lo || merr.RetryAfter > want.hi || !merr.Retryable {
			t.Errorf("reply %d: RetryAfter %v (Retryable %v), want %v to %v, retryable", i, merr.RetryAfter, merr.Retryable, want.lo, want.hi)
		}
	}
}

func TestRetryAfterMs(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("retry-after-ms", "1500")
		w.Header().Set("Retry-After", "2")
		failing(429, "rate_limit_error", "slow down")(w, r)
	})
	merr := modelError(t, func() error { _, err := newModel(t, f, Options{}).Generate(context.Background(), hello()); return err }())
	if merr.RetryAfter != 1500*time.Millisecond {
		t.Errorf("RetryAfter %v, want 1.5s from retry-after-ms", merr.RetryAfter)
	}
}

func TestConnectionReset(t *testing.T) {
	s := fakeapi.NewAnthropic(t, fakeapi.Reply{Reset: true})
	merr := modelError(t, func() error {
		_, err := againstFake(t, s, Options{}).Generate(context.Background(), hello())
		return err
	}())
	if !merr.Retryable || !strings.Contains(merr.Text, "connection failed") {
		t.Errorf("Retryable %v, Text %q; want a retryable connection failure", merr.Retryable, merr.Text)
	}
	if n := len(s.Times()); n != 1 {
		t.Errorf("%d requests, want 1 (no retries inside)", n)
	}
}

// TestStallRealSocket: a stream that goes quiet after its first events
// ends the call after StreamIdleTimeout, over a real connection.
func TestStallRealSocket(t *testing.T) {
	for _, tc := range []struct {
		name       string
		stallAfter int
		texts      int // OnText calls before the stall
	}{
		{"mid-stream", 4, 1}, // message_start, content_block_start, ping, a delta
		{"before headers", fakeapi.StallBeforeHeaders, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := fakeapi.NewAnthropic(t, fakeapi.Reply{Text: "one two three", StallAfter: tc.stallAfter})
			m := againstFake(t, s, Options{StreamIdleTimeout: 750 * time.Millisecond})
			texts := 0
			req := hello()
			req.OnText = func(string) { texts++ }
			start := time.Now()
			_, err := m.Generate(context.Background(), req)
			merr := modelError(t, err)
			t.Log(merr.Text)
			if !merr.Retryable || !strings.Contains(merr.Text, "stalled: no data came for 750 milliseconds") {
				t.Errorf("Retryable %v, Text %q; want a retryable stall", merr.Retryable, merr.Text)
			}
			var stall *idle.StallError
			if !errors.As(err, &stall) || stall.Headers != (tc.stallAfter == fakeapi.StallBeforeHeaders) {
				t.Errorf("Err %v, want an *idle.StallError (before the headers: %v)", merr.Err, tc.stallAfter == fakeapi.StallBeforeHeaders)
			}
			if elapsed := time.Since(start); elapsed < 750*time.Millisecond {
				t.Errorf("gave up after %v, before the idle timeout", elapsed)
			}
			if texts != tc.texts {
				t.Errorf("OnText called %d times, want %d", texts, tc.texts)
			}
		})
	}
}

// bubble is a fake server for a synctest bubble: it sends events, each
// after its wait, then holds the stream open until the request ends.
type bubble struct {
	events []event
	every  time.Duration // the wait before each event
	repeat bool          // send the last event again, forever
}

func (b bubble) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	pr, pw := io.Pipe()
	go func() {
		ctx := req.Context()
		send := func(e event) bool {
			select {
			case <-time.After(b.every):
			case <-ctx.Done():
				return false
			}
			_, err := fmt.Fprintf(pw, "event: %s\ndata: %s\n\n", e.name, e.data)
			return err == nil
		}
		ok := true
		for _, e := range b.events {
			if ok = send(e); !ok {
				break
			}
		}
		for ok && b.repeat {
			ok = send(b.events[len(b.events)-1])
		}
		<-ctx.Done()
		pw.CloseWithError(ctx.Err())
	}()
	return &http.Response{
		StatusCode: 200,
		Header:     http.Header{"Content-Type": {"text/event-stream"}},
		Body:       pr,
		Request:    req,
	}, nil
}

func bubbleModel(t *testing.T, rt http.RoundTripper, opts Options) *Model {
	t.Helper()
	opts.Model = "claude-test"
	opts.BaseURL = "http://fake.invalid"
	opts.APIKeyEnv = "TEST_ANTHROPIC_KEY"
	opts.LookupEnv = env(testKey)
	opts.HTTPClient = &http.Client{Transport: rt}
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestStallDefault: with the default StreamIdleTimeout, a stream whose
// events come 59 s apart goes on, and one silent for 60 s is stopped then
// exactly (fake time).
func TestStallDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := bubble{every: 59 * time.Second, events: []event{messageStart("claude-test", 5), textStart(0), textDelta(0, "slow "), textDelta(0, "but alive")}}
		m := bubbleModel(t, rt, Options{})
		var got string
		req := hello()
		req.OnText = func(d string) { got += d }
		start := time.Now()
		_, err := m.Generate(context.Background(), req)
		merr := modelError(t, err)
		t.Log(merr.Text)
		if want := 4*59*time.Second + 60*time.Second; time.Since(start) != want {
			t.Errorf("stopped after %v, want %v", time.Since(start), want)
		}
		if !merr.Retryable || !strings.Contains(merr.Text, "stalled: no data came for 60 seconds") {
			t.Errorf("Retryable %v, Text %q", merr.Retryable, merr.Text)
		}
		if got != "slow but alive" {
			t.Errorf("OnText got %q before the stall", got)
		}
	})
}

// TestRequestTimeout: a stream that never stalls but never ends is
// stopped at RequestTimeout.
func TestRequestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := bubble{every: 30 * time.Second, repeat: true, events: []event{messageStart("claude-test", 5), textStart(0), textDelta(0, "more ")}}
		m := bubbleModel(t, rt, Options{RequestTimeout: 5 * time.Minute})
		start := time.Now()
		_, err := m.Generate(context.Background(), hello())
		merr := modelError(t, err)
		t.Log(merr.Text)
		if time.Since(start) != 5*time.Minute {
			t.Errorf("stopped after %v, want 5m", time.Since(start))
		}
		if !merr.Retryable || !strings.Contains(merr.Text, "took longer than 5 minutes") {
			t.Errorf("Retryable %v, Text %q", merr.Retryable, merr.Text)
		}
		var stall *idle.StallError
		if errors.As(err, &stall) {
			t.Error("a request timeout is reported as a stall")
		}
	})
}

// TestCallerDeadlineIsNotATimeout: the caller's own deadline, shorter
// than both timeouts, is ctx.Err() as it is.
func TestCallerDeadlineIsNotATimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := bubble{every: 10 * time.Second, repeat: true, events: []event{messageStart("claude-test", 5), textStart(0), textDelta(0, "more ")}}
		m := bubbleModel(t, rt, Options{RequestTimeout: 5 * time.Minute})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := m.Generate(ctx, hello())
		var merr *model.Error
		if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &merr) {
			t.Errorf("err = %v, want ctx.Err() as it is", err)
		}
	})
}

func TestNegativeTimeouts(t *testing.T) {
	for _, opts := range []Options{{StreamIdleTimeout: -1}, {RequestTimeout: -time.Second}} {
		opts.Model = "m"
		if _, err := New(opts); err == nil {
			t.Errorf("New(%+v) took a negative timeout", opts)
		}
	}
}

// TestUnauthorizedBodyRedacted: a 401 quoting a key other than the
// configured one says [redacted] in its place.
func TestUnauthorizedBodyRedacted(t *testing.T) {
	s := fakeapi.NewAnthropic(t, fakeapi.Reply{Status: 401,
		Body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key sk-mock-SECRET"}}`})
	merr := modelError(t, func() error {
		_, err := againstFake(t, s, Options{}).Generate(context.Background(), hello())
		return err
	}())
	if strings.Contains(merr.Text, "sk-mock") || strings.Contains(merr.Text, "SECRET") || !strings.Contains(merr.Text, "invalid x-api-key [redacted]") {
		t.Errorf("Text %q, want the key-shaped string redacted", merr.Text)
	}
	if merr.Retryable {
		t.Error("a 401 is retryable")
	}
}

// TestPlainTextErrorBody: a body that is not JSON (a proxy's) is quoted,
// redacted.
func TestPlainTextErrorBody(t *testing.T) {
	s := fakeapi.NewAnthropic(t, fakeapi.Reply{Status: 502, Body: "bad gateway; upstream said Bearer abc.def-123"})
	merr := modelError(t, func() error {
		_, err := againstFake(t, s, Options{}).Generate(context.Background(), hello())
		return err
	}())
	if !strings.Contains(merr.Text, "bad gateway; upstream said Bearer [redacted]") || !merr.Retryable {
		t.Errorf("Text %q (Retryable %v), want the body quoted and redacted, retryable", merr.Text, merr.Retryable)
	}
}

// TestDroppedMidStream: a connection that drops in the middle of the
// stream is retryable.
func TestDroppedMidStream(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		streaming(messageStart("claude-test", 5), textStart(0), textDelta(0, "Hel"))(w, r)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		conn.Close()
	})
	merr := modelError(t, func() error { _, err := newModel(t, f, Options{}).Generate(context.Background(), hello()); return err }())
	if !merr.Retryable {
		t.Errorf("a dropped stream is not retryable: %s", merr.Text)
	}
}
