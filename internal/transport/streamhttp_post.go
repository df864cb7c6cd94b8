package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// The headers of the Streamable HTTP transport.
const (
	headerSession     = "Mcp-Session-Id"
	headerVersion     = "MCP-Protocol-Version"
	headerMethod      = "Mcp-Method"
	headerName        = "Mcp-Name"
	headerLastEventID = "Last-Event-ID"
)

// HTTPStatusError is a Write error for a notification or a response the
// server refused with an HTTP error status. The stream stays usable.
type HTTPStatusError struct {
	Method string // the HTTP method
	URL    string // redacted
	Status int
	Body   string // its first bytes, sanitized
}

func (e *HTTPStatusError) Error() string {
	return fmt.Sprintf("transport: %s %s: %s", e.Method, e.URL, statusWords(e.Status, e.Body))
}

// statusWords is "HTTP 400 Bad Request", followed by ": " and the body's
// first bytes when there are any.
func statusWords(status int, body string) string {
	w := fmt.Sprintf("HTTP %d %s", status, http.StatusText(status))
	if body != "" {
		w += ": " + body
	}
	return w
}

// post is one POST under way: its goroutine (run) reports the outcome
// Write returns through hdr, unless Write has stopped waiting (handOff):
// then a request's failure is answered through Read instead.
type post struct {
	s           *StreamableHTTP
	m           outgoing
	cancel      func(error)
	hdr         chan error // one outcome, buffered
	sentSession bool
	aborted     atomic.Bool // its request was cancelled: nothing more is read or answered

	mu       sync.Mutex
	handed   bool
	reported bool
	answered bool // the response to the request has been queued
}

// handOff tells run that Write no longer waits; false when run has
// reported already (the outcome is in hdr).
func (p *post) handOff() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reported {
		return false
	}
	p.handed = true
	return true
}

// finish reports err to Write, or, when Write has stopped waiting, to
// Read as the request's answer (failure words) when there is one to give.
func (p *post) finish(err error, words string) {
	p.mu.Lock()
	if p.reported {
		p.mu.Unlock()
		return
	}
	p.reported = true
	handed := p.handed
	p.mu.Unlock()
	if !handed {
		p.hdr <- err
		return
	}
	if err != nil && words != "" && p.m.isRequest() {
		p.s.answerFailed(p, words, 0)
	}
}

// run sends req and reads its answer.
func (p *post) run(req *http.Request) {
	s := p.s
	defer p.cancel(nil)
	resp, err := s.client.Do(req)
	if err != nil {
		if s.ctx.Err() != nil || p.aborted.Load() {
			p.finish(s.closedErr(), "")
			return
		}
		text := s.sec.scrub(redactURLErrors(err))
		s.noteHTTPError("POST " + s.shown + ": " + text)
		s.log.Warn("Streamable HTTP POST failed", "url", s.shown, "method", p.m.method, "err", text)
		p.finish(&safeDialError{msg: "transport: POST " + s.shown + ": " + text, causes: netCauses(err)}, "the request failed: "+text)
		return
	}
	if resp.StatusCode/100 == 2 {
		s.noteSession(resp.Header)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound && p.sentSession:
		drainBody(resp)
		s.expire(p.m.method)
		p.finish(errors.Join(ErrClosed, s.endedErr()), "")
		return
	case resp.StatusCode/100 != 2:
		body := readSnippet(resp.Body)
		resp.Body.Close()
		shown := sanitizeSnippet(body, s.sec)
		s.noteHTTPError("POST " + s.shown + ": " + statusWords(resp.StatusCode, ""))
		s.log.Warn("Streamable HTTP server refused a POST", "url", s.shown, "method", p.m.method, "status", resp.StatusCode, "body", shown)
		if p.m.isRequest() {
			p.finish(nil, "")
			s.queueAnswer(p, refusalAnswer(p.m.id, resp.StatusCode, body, shown))
			return
		}
		p.finish(&HTTPStatusError{Method: http.MethodPost, URL: s.shown, Status: resp.StatusCode, Body: shown}, "")
		return
	}
	if !p.m.isRequest() {
		drainBody(resp)
		p.finish(nil, "")
		if p.m.method == "notifications/initialized" && p.m.modernVersion == "" {
			s.openGET()
		}
		return
	}
	p.finish(nil, "")
	defer resp.Body.Close()
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case ct == "text/event-stream":
		s.readSSEAnswer(p, resp.Body)
	case resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusNoContent:
		// No answer here; a session-era server may send it on the GET
		// stream.
		s.log.Debug("Streamable HTTP request answered with no body", "url", s.shown, "method", p.m.method, "status", resp.StatusCode)
	default:
		s.readJSONAnswer(p, resp.Body)
	}
}

// readJSONAnswer reads a JSON body: one message, or a batch of them.
func (s *StreamableHTTP) readJSONAnswer(p *post, body io.Reader) {
	data, err := io.ReadAll(io.LimitReader(body, int64(s.max)+1))
	if len(data) > s.max {
		s.end(&TooLargeError{Limit: s.max, Size: len(data)})
		return
	}
	if err != nil {
		if s.ctx.Err() == nil {
			text := s.sec.scrub(redactURLErrors(err))
			s.answerFailed(p, "the response body broke: "+text, 0)
		}
		return
	}
	data = bytes.TrimSpace(data)
	switch {
	case len(data) == 0:
		s.answerFailed(p, "the server answered with an empty body", 0)
		return
	case !json.Valid(data):
		s.answerFailed(p, "the server's answer is not JSON", 0)
		return
	case data[0] == '[':
		var batch []json.RawMessage
		if err := json.Unmarshal(data, &batch); err != nil {
			s.answerFailed(p, "the server's answer is not JSON", 0)
			return
		}
		for _, m := range batch {
			if !s.deliver(p, m) {
				return
			}
		}
	default:
		if !s.deliver(p, data) {
			return
		}
	}
	if !p.isAnswered() {
		s.answerFailed(p, "the server's JSON answer holds no response to the request", 0)
	}
}

// deliver queues msg, a message received in answer to p's request, noting
// whether it is the answer, and for initialize the protocol version it
// chose. It is false when the stream has ended.
func (s *StreamableHTTP) deliver(p *post, msg []byte) bool {
	if p != nil && isResponseFor(msg, p.m.id) {
		if p.m.method == "initialize" {
			if v := initializeVersion(msg); v != "" {
				s.setVersion(v)
			}
		}
		p.mu.Lock()
		p.answered = true
		p.mu.Unlock()
	}
	return s.q.put(s.ctx, msg) == nil
}

func (p *post) isAnswered() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.answered
}

// queueAnswer queues msg as the answer to p's request.
func (s *StreamableHTTP) queueAnswer(p *post, msg []byte) {
	p.mu.Lock()
	p.answered = true
	p.mu.Unlock()
	_ = s.q.put(s.ctx, msg)
}

// answerFailed answers p's request, for Read, with an error response
// saying what went wrong, unless it has been answered or the stream ended.
func (s *StreamableHTTP) answerFailed(p *post, words string, status int) {
	if s.ctx.Err() != nil || p.isAnswered() || p.aborted.Load() {
		return
	}
	s.log.Warn("Streamable HTTP request failed; answering it with an error", "url", s.shown, "method", p.m.method, "reason", words)
	s.queueAnswer(p, errorAnswer(p.m.id, "transport: "+words, status))
}

// snippetMax bounds the bytes of an error body read, and snippetShown the
// bytes of it quoted.
const (
	snippetMax   = 64 << 10
	snippetShown = 200
)

func readSnippet(r io.Reader) []byte {
	b, _ := io.ReadAll(io.LimitReader(r, snippetMax))
	return b
}

// drainBody reads a little of a body, so that its connection can be reused,
// and closes it.
func drainBody(resp *http.Response) {
	io.CopyN(io.Discard, resp.Body, snippetMax)
	resp.Body.Close()
}

// backoff is the delay before the attempt after failures failed ones:
// base (the server's retry, or 1s), doubled each time, at most 30s.
func backoff(base time.Duration, failures int) time.Duration {
	if base <= 0 {
		base = time.Second
	}
	d := base
	for i := 1; i < failures && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

const maxBackoff = 30 * time.Second
