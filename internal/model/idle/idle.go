// Package idle ends an HTTP request whose server has gone quiet: a
// Transport that cancels the request when no byte has come from the
// server for its Timeout, while the client waits for the response headers
// or for the next bytes of the body (a stalled stream). Both model
// providers use it for their StreamIdleTimeout.
//
// Decisions:
//
//   - The clock runs only while the client waits on the server: from the
//     start of the round trip until the headers come, then during each
//     Read of the body. Time the client spends between Reads (handling
//     an event, a slow OnText) is not the server's silence and is not
//     counted; a Read that returns bytes starts the next wait afresh.
//   - A stall cancels the request's context (its own, derived from the
//     caller's), so the connection is dropped and every blocked Read
//     returns at once, and the round trip or the Read fails with a
//     *StallError saying how long the server was silent and whether it
//     was before the headers. A caller's own cancel is never a
//     *StallError: the request's error is then the transport's as it is
//     (the context's error), so a provider tells the two apart with
//     errors.As.
//   - Closing the body stops the clock and releases the request's
//     context.
//   - A Timeout of 0 or less passes requests through untouched.
//   - Client wraps a provider's *http.Client (a copy: the caller's is not
//     changed); with none it starts from a clone of http.DefaultTransport
//     with no ResponseHeaderTimeout, since the idle timeout already
//     bounds the wait for the headers.
package idle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// StallError is the error of a request whose server sent nothing for
// Idle.
type StallError struct {
	// Idle is how long the server had sent nothing.
	Idle time.Duration
	// Headers: the server went quiet before sending the response
	// headers; else in the middle of the body.
	Headers bool
}

func (e *StallError) Error() string {
	where := "in the middle of the response body"
	if e.Headers {
		where = "before the response headers"
	}
	return fmt.Sprintf("idle: the server sent no data for %s, %s", Words(e.Idle), where)
}

// Transport is an http.RoundTripper that fails a request whose server is
// silent for Timeout (see the package doc).
type Transport struct {
	// Base makes the requests; http.DefaultTransport when nil.
	Base http.RoundTripper
	// Timeout is the longest silence allowed; 0 or less: no limit.
	Timeout time.Duration
}

// RoundTrip sends req, failing with a *StallError if the server sends no
// headers for Timeout; the response body fails the same way when the
// server goes quiet in the middle of it.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if t.Timeout <= 0 {
		return base.RoundTrip(req)
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	w := &watch{ctx: ctx, cancel: cancel, timeout: t.Timeout, headers: true}
	w.timer = time.AfterFunc(t.Timeout, w.fire)
	resp, err := base.RoundTrip(req.WithContext(ctx))
	w.stop()
	if err != nil {
		stall := w.stalled()
		cancel(nil)
		if stall != nil {
			if resp != nil && resp.Body != nil {
				resp.Body.Close()
			}
			return nil, stall
		}
		return resp, err
	}
	w.mu.Lock()
	w.headers = false
	w.mu.Unlock()
	resp.Body = &body{rc: resp.Body, w: w}
	return resp, nil
}

// Client returns a copy of hc whose transport is hc's wrapped in a
// Transport with timeout; with hc nil, a client of a clone of
// http.DefaultTransport (see the package doc).
func Client(hc *http.Client, timeout time.Duration) *http.Client {
	var c http.Client
	if hc != nil {
		c = *hc
	}
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
		if t, ok := base.(*http.Transport); ok && hc == nil {
			base = t.Clone()
		}
	}
	c.Transport = &Transport{Base: base, Timeout: timeout}
	return &c
}

// watch is one request's clock.
type watch struct {
	ctx     context.Context
	cancel  context.CancelCauseFunc
	timeout time.Duration
	timer   *time.Timer

	mu      sync.Mutex
	headers bool // still waiting for the headers
}

// fire is the clock running out: the request is canceled with a
// *StallError.
func (w *watch) fire() {
	w.mu.Lock()
	headers := w.headers
	w.mu.Unlock()
	w.cancel(&StallError{Idle: w.timeout, Headers: headers})
}

func (w *watch) start() { w.timer.Reset(w.timeout) }
func (w *watch) stop()  { w.timer.Stop() }

// stalled returns the *StallError that canceled the request, nil when
// it was not a stall.
func (w *watch) stalled() *StallError {
	var stall *StallError
	if errors.As(context.Cause(w.ctx), &stall) {
		return stall
	}
	return nil
}

// body times each Read of a response body.
type body struct {
	rc io.ReadCloser
	w  *watch
}

func (b *body) Read(p []byte) (int, error) {
	if stall := b.w.stalled(); stall != nil {
		return 0, stall
	}
	b.w.start()
	n, err := b.rc.Read(p)
	b.w.stop()
	if err != nil && err != io.EOF {
		if stall := b.w.stalled(); stall != nil {
			return n, stall
		}
	}
	return n, err
}

func (b *body) Close() error {
	b.w.stop()
	err := b.rc.Close()
	b.w.cancel(nil)
	return err
}

// Words says d in plain words: "60 seconds", "10 minutes", "1 second",
// "250 milliseconds", "1.5 seconds". Whole minutes are said in minutes
// from 2 minutes on.
func Words(d time.Duration) string {
	unit := func(n int64, one string) string {
		if n == 1 {
			return "1 " + one
		}
		return strconv.FormatInt(n, 10) + " " + one + "s"
	}
	switch {
	case d >= 2*time.Minute && d%time.Minute == 0:
		return unit(int64(d/time.Minute), "minute")
	case d >= time.Second && d%time.Second == 0:
		return unit(int64(d/time.Second), "second")
	case d < time.Second:
		return unit(d.Round(time.Millisecond).Milliseconds(), "millisecond")
	}
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " seconds"
}
