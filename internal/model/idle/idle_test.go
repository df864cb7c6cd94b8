package idle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// script is a fake server inside a synctest bubble: it answers after
// headerWait with a body whose chunks come after their waits, then holds
// the body open (silent) until the request is canceled.
type script struct {
	headerWait time.Duration
	chunks     []chunk
}

type chunk struct {
	wait time.Duration
	data string
}

func (s script) RoundTrip(req *http.Request) (*http.Response, error) {
	select {
	case <-time.After(s.headerWait):
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	pr, pw := io.Pipe()
	go func() {
		for _, c := range s.chunks {
			select {
			case <-time.After(c.wait):
			case <-req.Context().Done():
				pw.CloseWithError(req.Context().Err())
				return
			}
			if _, err := pw.Write([]byte(c.data)); err != nil {
				return
			}
		}
		<-req.Context().Done()
		pw.CloseWithError(req.Context().Err())
	}()
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: pr, Request: req}, nil
}

func get(t *testing.T, ctx context.Context, rt http.RoundTripper) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://fake.invalid/", nil)
	if err != nil {
		t.Fatal(err)
	}
	return rt.RoundTrip(req)
}

func TestStallBeforeHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		_, err := get(t, context.Background(), &Transport{Base: script{headerWait: time.Hour}, Timeout: time.Minute})
		var stall *StallError
		if !errors.As(err, &stall) || !stall.Headers || stall.Idle != time.Minute {
			t.Fatalf("err = %v, want a stall before the headers", err)
		}
		if got := time.Since(start); got != time.Minute {
			t.Errorf("it gave up after %v, want 1m", got)
		}
		if !strings.Contains(err.Error(), "no data for 60 seconds, before the response headers") {
			t.Errorf("Error() = %q", err)
		}
	})
}

func TestHeadersInTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		resp, err := get(t, context.Background(), &Transport{
			Base:    script{headerWait: 59 * time.Second, chunks: []chunk{{0, "all"}}},
			Timeout: time.Minute,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		buf := make([]byte, 3)
		if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "all" {
			t.Fatalf("read %q, %v", buf, err)
		}
	})
}

func TestStallMidBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Each chunk comes just inside the limit: the clock restarts at
		// each byte, so only the silence after the last one is a stall.
		chunks := []chunk{{59 * time.Second, "a"}, {59 * time.Second, "b"}, {59 * time.Second, "c"}}
		resp, err := get(t, context.Background(), &Transport{Base: script{chunks: chunks}, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		start := time.Now()
		got, err := io.ReadAll(resp.Body)
		if string(got) != "abc" {
			t.Errorf("read %q before the stall, want abc", got)
		}
		var stall *StallError
		if !errors.As(err, &stall) || stall.Headers {
			t.Fatalf("err = %v, want a stall mid-body", err)
		}
		if elapsed := time.Since(start); elapsed != 3*59*time.Second+time.Minute {
			t.Errorf("stalled after %v, want %v", elapsed, 3*59*time.Second+time.Minute)
		}
		// Later reads say the same.
		if _, err := resp.Body.Read(make([]byte, 1)); !errors.As(err, &stall) {
			t.Errorf("a read after the stall: %v", err)
		}
	})
}

func TestSlowReaderIsNotAStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The server sends everything at once; the client takes an hour
		// between reads. That is not the server's silence.
		resp, err := get(t, context.Background(), &Transport{Base: script{chunks: []chunk{{0, "abcdef"}}}, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got []byte
		buf := make([]byte, 2)
		for len(got) < 6 {
			n, err := resp.Body.Read(buf)
			if err != nil {
				t.Fatalf("read after %q: %v", got, err)
			}
			got = append(got, buf[:n]...)
			time.Sleep(time.Hour)
		}
	})
}

func TestCallerCancelIsNotAStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(10*time.Second, cancel)
		_, err := get(t, ctx, &Transport{Base: script{headerWait: time.Hour}, Timeout: time.Minute})
		var stall *StallError
		if errors.As(err, &stall) || !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled and no stall", err)
		}

		ctx, cancel = context.WithCancel(context.Background())
		resp, err := get(t, ctx, &Transport{Base: script{}, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		time.AfterFunc(10*time.Second, cancel)
		_, err = io.ReadAll(resp.Body)
		if errors.As(err, &stall) || !errors.Is(err, context.Canceled) {
			t.Fatalf("body err = %v, want context.Canceled and no stall", err)
		}
	})
}

func TestCloseStopsTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		resp, err := get(t, context.Background(), &Transport{Base: script{chunks: []chunk{{0, "x"}}}, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := resp.Body.Read(make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// The request's context is released: the fake server's goroutine
		// ends, which synctest.Test checks before it returns.
		synctest.Wait()
	})
}

func TestZeroTimeoutPassesThrough(t *testing.T) {
	base := script{}
	tr := &Transport{Base: base}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := get(t, ctx, tr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, ok := resp.Body.(*body); ok {
		t.Error("a zero Timeout wrapped the body")
	}
}

// TestRealSocketStall is the stall over a real connection: a server that
// sends its first chunk, then nothing until the client goes away.
func TestRealSocketStall(t *testing.T) {
	gone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(gone)
	}))
	defer srv.Close()
	const timeout = 750 * time.Millisecond // wide: a loaded machine still answers well within it
	client := &http.Client{Transport: &Transport{Base: srv.Client().Transport, Timeout: timeout}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, len("data: first\n\n"))
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatalf("first chunk: %v", err)
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := resp.Body.Read(make([]byte, 1))
		done <- err
	}()
	select {
	case err := <-done:
		var stall *StallError
		if !errors.As(err, &stall) || stall.Headers {
			t.Fatalf("err = %v, want a stall mid-body", err)
		}
		if elapsed := time.Since(start); elapsed < timeout {
			t.Errorf("stalled after %v, before the %v timeout", elapsed, timeout)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no stall after 30s")
	}
	select {
	case <-gone: // the server saw the client go
	case <-time.After(30 * time.Second):
		t.Fatal("the server still holds the request 30s after the stall")
	}
}

func TestWords(t *testing.T) {
	for d, want := range map[time.Duration]string{
		60 * time.Second:        "60 seconds",
		10 * time.Minute:        "10 minutes",
		90 * time.Second:        "90 seconds",
		time.Second:             "1 second",
		200 * time.Millisecond:  "200 milliseconds",
		1500 * time.Millisecond: "1.5 seconds",
	} {
		if got := Words(d); got != want {
			t.Errorf("Words(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestClient(t *testing.T) {
	base := &script{}
	own := &http.Client{Transport: base, Timeout: time.Hour}
	c := Client(own, time.Minute)
	tr, ok := c.Transport.(*Transport)
	if !ok || tr.Timeout != time.Minute || tr.Base != base || c.Timeout != time.Hour {
		t.Errorf("Client(own) = %+v, want own's transport wrapped, its Timeout kept", c)
	}
	if own.Transport != base {
		t.Error("Client changed the caller's client")
	}
	c = Client(nil, time.Minute)
	tr, ok = c.Transport.(*Transport)
	if !ok {
		t.Fatalf("Client(nil) transport %T", c.Transport)
	}
	if base, ok := tr.Base.(*http.Transport); !ok || base == http.DefaultTransport || base.ResponseHeaderTimeout != 0 {
		t.Errorf("Client(nil) base %T, want a clone of http.DefaultTransport with no header timeout", tr.Base)
	}
}
