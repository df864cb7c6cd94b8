package fakeapi_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/internal/model/fakeapi"
	"github.com/mcpl-go/mcpl/internal/model/idle"
)

// endpoint is the path a provider's server answers, under its URL.
func endpoint(p provider) string {
	if p.name == "anthropic" {
		return "/v1/messages"
	}
	return "/chat/completions"
}

// TestFailureHeadersAndBody: a Status failure carries RetryAfter as the
// Retry-After header and Body verbatim.
func TestFailureHeadersAndBody(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			const raw = `{"error":{"message":"invalid x-api-key sk-mock-SECRET"}}`
			s := p.serve(t,
				fakeapi.Reply{Status: 429, RetryAfter: "7"},
				fakeapi.Reply{Status: 401, Body: raw},
				fakeapi.Reply{Status: 503, Body: "down"},
			)
			client := &http.Client{}
			defer client.CloseIdleConnections()
			for i, want := range []struct {
				status      int
				retryAfter  string
				contentType string
				body        string // "" checks nothing
			}{
				{429, "7", "application/json", ""},
				{401, "", "application/json", raw},
				{503, "", "text/plain; charset=utf-8", "down"},
			} {
				resp, err := client.Post(s.URL+endpoint(p), "application/json", strings.NewReader(`{"model":"m"}`))
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != want.status || resp.Header.Get("Retry-After") != want.retryAfter || resp.Header.Get("Content-Type") != want.contentType {
					t.Errorf("reply %d: status %d, Retry-After %q, Content-Type %q; want %d, %q, %q",
						i, resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("Content-Type"), want.status, want.retryAfter, want.contentType)
				}
				if want.body != "" && string(b) != want.body {
					t.Errorf("reply %d: body %q, want %q", i, b, want.body)
				}
			}
			if n := s.Answered(); n != 3 {
				t.Errorf("answered %d, want 3", n)
			}
		})
	}
}

// TestReset: the connection is dropped without an answer; the Reply is
// taken, so the next request gets the next one.
func TestReset(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			s := p.serve(t, fakeapi.Reply{Reset: true}, fakeapi.Reply{Text: "after"})
			client := &http.Client{}
			defer client.CloseIdleConnections()
			resp, err := client.Post(s.URL+endpoint(p), "application/json", strings.NewReader(`{"model":"m"}`))
			if err == nil {
				resp.Body.Close()
				t.Fatalf("got HTTP %d, want no answer", resp.StatusCode)
			}
			if n := s.Answered(); n != 0 {
				t.Errorf("answered %d after a reset, want 0", n)
			}
			got, err := p.model(t, s.URL).Generate(context.Background(), model.Request{Messages: []model.Message{user("hi")}})
			if err != nil || got.Text() != "after" {
				t.Errorf("Generate = %q, %v; want the second reply", got.Text(), err)
			}
			if n := len(s.Times()); n != 2 {
				t.Errorf("%d arrival times, want 2", n)
			}
		})
	}
}

// TestStallAfter: a streamed answer sends exactly its first N events,
// then nothing (the client's idle timeout is what ends it, not the end of
// the stream); StallBeforeHeaders sends no headers. The stalled request
// ends when the client goes away.
func TestStallAfter(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			s := p.serve(t, fakeapi.Reply{Text: "one two three", StallAfter: 2}, fakeapi.Reply{StallAfter: fakeapi.StallBeforeHeaders})
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: &idle.Transport{Base: tr, Timeout: 750 * time.Millisecond}}

			resp, err := client.Post(s.URL+endpoint(p), "application/json", strings.NewReader(`{"model":"m","stream":true}`))
			if err != nil {
				t.Fatal(err)
			}
			events := 0
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "data: ") {
					events++
				}
			}
			resp.Body.Close()
			var stall *idle.StallError
			if err := sc.Err(); !errors.As(err, &stall) || stall.Headers {
				t.Errorf("the stream ended with %v, want a stall mid-body", err)
			}
			if events != 2 {
				t.Errorf("%d events before the stall, want 2", events)
			}

			_, err = client.Post(s.URL+endpoint(p), "application/json", strings.NewReader(`{"model":"m","stream":true}`))
			if !errors.As(err, &stall) || !stall.Headers {
				t.Errorf("err = %v, want a stall before the headers", err)
			}
			if n := s.Answered(); n != 0 {
				t.Errorf("answered %d, want 0: stalls are not answers", n)
			}
		})
	}
}

// TestStallEndsAtCleanup: a stall whose client never leaves does not keep
// the server from closing.
func TestStallEndsAtCleanup(t *testing.T) {
	done := make(chan error, 1)
	t.Run("inner", func(t *testing.T) {
		s := fakeapi.NewAnthropic(t, fakeapi.Reply{Text: "never finished", StallAfter: 1})
		stalled := make(chan struct{})
		go func() {
			resp, err := http.Post(s.URL+"/v1/messages", "application/json", strings.NewReader(`{"model":"m","stream":true}`))
			if err != nil {
				close(stalled)
				done <- err
				return
			}
			defer resp.Body.Close()
			r := bufio.NewReader(resp.Body)
			for { // the first event's lines, then the server stalls
				line, err := r.ReadString('\n')
				if err != nil || strings.HasPrefix(line, "data: ") {
					break
				}
			}
			close(stalled)
			_, err = io.ReadAll(r)
			done <- err
		}()
		<-stalled
	})
	// The inner test's cleanup closed the server: the request has ended.
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the stalled request still runs 30s after the server closed")
	}
	http.DefaultClient.CloseIdleConnections()
}

// TestTimes: each request's arrival is recorded, in order, within the
// span of the calls.
func TestTimes(t *testing.T) {
	s := fakeapi.NewOpenAI(t, fakeapi.Reply{Status: 500}, fakeapi.Reply{Text: "ok"})
	m := providers[1].model(t, s.URL)
	before := time.Now()
	_, err := m.Generate(context.Background(), model.Request{Messages: []model.Message{user("hi")}})
	if err == nil {
		t.Fatal("the 500 reply did not fail")
	}
	between := time.Now()
	if _, err := m.Generate(context.Background(), model.Request{Messages: []model.Message{user("hi")}}); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	times := s.Times()
	if len(times) != 2 {
		t.Fatalf("%d times, want 2", len(times))
	}
	if times[0].Before(before) || times[0].After(between) || times[1].Before(between) || times[1].After(after) {
		t.Errorf("times %v are not within their calls (%v, %v, %v)", times, before, between, after)
	}
}
