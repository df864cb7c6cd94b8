package openai

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
	opts.Model = "gpt-test"
	opts.BaseURL = s.URL
	opts.LookupEnv = env(map[string]string{"OPENAI_API_KEY": testKey})
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// modelError is err as a *model.Error, failing the test when it is not.
func modelError(t *testing.T, err error) *model.Error {
	t.Helper()
	var me *model.Error
	if !errors.As(err, &me) {
		t.Fatalf("err = %T %v, want a *model.Error", err, err)
	}
	return me
}

func generate(m *Model, req model.Request) error {
	_, err := m.Generate(context.Background(), req)
	return err
}

func TestRetryAfter(t *testing.T) {
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	s := fakeapi.NewOpenAI(t,
		fakeapi.Reply{Status: 429, RetryAfter: "7"},
		fakeapi.Reply{Status: 503, RetryAfter: date},
		fakeapi.Reply{Status: 503, RetryAfter: "soon"},
		fakeapi.Reply{Status: 500},
		fakeapi.Reply{Status: 429, RetryAfter: "99999"},
		fakeapi.Reply{Status: 503, Body: "overloaded", RetryAfter: "3"}, // a body the SDK cannot read
	)
	m := againstFake(t, s, Options{})
	for i, want := range []struct{ lo, hi time.Duration }{
		{7 * time.Second, 7 * time.Second},
		{60 * time.Second, 90 * time.Second}, // a date, to the second, seen a moment later
		{0, 0},
		{0, 0},
		{10 * time.Minute, 10 * time.Minute},
		{3 * time.Second, 3 * time.Second},
	} {
		me := modelError(t, generate(m, userText("hi")))
		if me.RetryAfter < want.lo || me.RetryAfter > want.hi || !me.Retryable {
			t.Errorf("reply %d: RetryAfter %v (Retryable %v, %s), want %v to %v, retryable", i, me.RetryAfter, me.Retryable, me.Text, want.lo, want.hi)
		}
	}
}

func TestRetryAfterMs(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("retry-after-ms", "1500")
		w.Header().Set("Retry-After", "2")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(429)
		fmt.Fprint(w, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`)
	})
	me := modelError(t, generate(newModel(t, f, Options{}), userText("hi")))
	if me.RetryAfter != 1500*time.Millisecond {
		t.Errorf("RetryAfter %v, want 1.5s from retry-after-ms", me.RetryAfter)
	}
}

func TestConnectionReset(t *testing.T) {
	s := fakeapi.NewOpenAI(t, fakeapi.Reply{Reset: true})
	me := modelError(t, generate(againstFake(t, s, Options{}), userText("hi")))
	if !me.Retryable || !strings.Contains(me.Text, "could not get an answer from the model server at") {
		t.Errorf("Retryable %v, Text %q; want a retryable transport failure", me.Retryable, me.Text)
	}
	if n := len(s.Times()); n != 1 {
		t.Errorf("%d requests, want 1 (no retries inside)", n)
	}
}

// TestStallRealSocket: a stream that goes quiet ends the call after
// StreamIdleTimeout, over a real connection.
func TestStallRealSocket(t *testing.T) {
	for _, tc := range []struct {
		name       string
		stallAfter int
		texts      int // OnText calls before the stall
	}{
		{"mid-stream", 2, 1}, // the role chunk, then "one "
		{"before headers", fakeapi.StallBeforeHeaders, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := fakeapi.NewOpenAI(t, fakeapi.Reply{Text: "one two three", StallAfter: tc.stallAfter})
			m := againstFake(t, s, Options{StreamIdleTimeout: 750 * time.Millisecond})
			texts := 0
			req := userText("hi")
			req.OnText = func(string) { texts++ }
			start := time.Now()
			err := generate(m, req)
			me := modelError(t, err)
			t.Log(me.Text)
			if !me.Retryable || !strings.Contains(me.Text, "stalled: no data came for 750 milliseconds") {
				t.Errorf("Retryable %v, Text %q; want a retryable stall", me.Retryable, me.Text)
			}
			var stall *idle.StallError
			if !errors.As(err, &stall) || stall.Headers != (tc.stallAfter == fakeapi.StallBeforeHeaders) {
				t.Errorf("Err %v, want an *idle.StallError (before the headers: %v)", me.Err, tc.stallAfter == fakeapi.StallBeforeHeaders)
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

// bubble is a fake server for a synctest bubble: it sends chunks, each
// after its wait, then holds the stream open until the request ends.
type bubble struct {
	chunks []string
	every  time.Duration // the wait before each chunk
	repeat bool          // send the last chunk again, forever
}

func (b bubble) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	pr, pw := io.Pipe()
	go func() {
		ctx := req.Context()
		send := func(c string) bool {
			select {
			case <-time.After(b.every):
			case <-ctx.Done():
				return false
			}
			_, err := fmt.Fprintf(pw, "data: %s\n\n", c)
			return err == nil
		}
		ok := true
		for _, c := range b.chunks {
			if ok = send(c); !ok {
				break
			}
		}
		for ok && b.repeat {
			ok = send(b.chunks[len(b.chunks)-1])
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
	opts.Model = "gpt-test"
	opts.BaseURL = "http://fake.invalid/v1"
	opts.LookupEnv = env(map[string]string{"OPENAI_API_KEY": testKey})
	opts.HTTPClient = &http.Client{Transport: rt}
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestStallDefault: with the default StreamIdleTimeout, chunks 59 s apart
// keep the call going, and 60 s of silence stops it then exactly (fake
// time).
func TestStallDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := bubbleModel(t, bubble{every: 59 * time.Second, chunks: []string{chunk(text("slow "), ""), chunk(text("but alive"), "")}}, Options{})
		var got string
		req := userText("hi")
		req.OnText = func(d string) { got += d }
		start := time.Now()
		me := modelError(t, generate(m, req))
		t.Log(me.Text)
		if want := 2*59*time.Second + 60*time.Second; time.Since(start) != want {
			t.Errorf("stopped after %v, want %v", time.Since(start), want)
		}
		if !me.Retryable || !strings.Contains(me.Text, "stalled: no data came for 60 seconds") {
			t.Errorf("Retryable %v, Text %q", me.Retryable, me.Text)
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
		m := bubbleModel(t, bubble{every: 30 * time.Second, repeat: true, chunks: []string{chunk(text("more "), "")}}, Options{RequestTimeout: 5 * time.Minute})
		start := time.Now()
		err := generate(m, userText("hi"))
		me := modelError(t, err)
		t.Log(me.Text)
		if time.Since(start) != 5*time.Minute {
			t.Errorf("stopped after %v, want 5m", time.Since(start))
		}
		if !me.Retryable || !strings.Contains(me.Text, "took longer than 5 minutes") {
			t.Errorf("Retryable %v, Text %q", me.Retryable, me.Text)
		}
		var stall *idle.StallError
		if errors.As(err, &stall) {
			t.Error("a request timeout is reported as a stall")
		}
	})
}

// TestCallerDeadlineIsNotATimeout: the caller's own deadline, shorter
// than both timeouts, is the caller's: not retryable, matching ctx.Err().
func TestCallerDeadlineIsNotATimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := bubbleModel(t, bubble{every: 10 * time.Second, repeat: true, chunks: []string{chunk(text("more "), "")}}, Options{RequestTimeout: 5 * time.Minute})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := m.Generate(ctx, userText("hi"))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want it to match context.DeadlineExceeded", err)
		}
		if me := modelError(t, err); me.Retryable || strings.Contains(me.Text, "RequestTimeout") {
			t.Errorf("Retryable %v, Text %q; want the caller's deadline, not retryable", me.Retryable, me.Text)
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
	s := fakeapi.NewOpenAI(t, fakeapi.Reply{Status: 401,
		Body: `{"error":{"message":"Incorrect API key provided: sk-mock-SECRET. You can find your API key in your account.","type":"invalid_request_error","code":"invalid_api_key"}}`})
	me := modelError(t, generate(againstFake(t, s, Options{}), userText("hi")))
	t.Log(me.Text)
	if strings.Contains(me.Text, "sk-mock") || strings.Contains(me.Text, "SECRET") || !strings.Contains(me.Text, "Incorrect API key provided: [redacted].") {
		t.Errorf("Text %q, want the key-shaped string redacted", me.Text)
	}
	if me.Retryable {
		t.Error("a 401 is retryable")
	}
}

// TestDroppedMidStream: a connection that drops in the middle of the
// stream is retryable.
func TestDroppedMidStream(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\n", chunk(text("Hel"), ""))
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		conn.Close()
	})
	me := modelError(t, generate(newModel(t, f, Options{}), userText("hi")))
	t.Log(me.Text)
	if !me.Retryable {
		t.Errorf("a dropped stream is not retryable: %s", me.Text)
	}
}
