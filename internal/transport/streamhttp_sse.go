package transport

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"
)

// sseState is what a server-sent event stream has said that outlives one
// connection: the last event id, and the reconnection delay.
type sseState struct {
	lastID string
	retry  time.Duration
}

// sseReader takes server-sent events apart. Lines end with "\n" or
// "\r\n"; comments and fields other than data, id, retry and event are
// skipped; an event's data lines are joined by "\n". Only events of the
// default type ("message") carry messages.
type sseReader struct {
	br   *bufio.Reader
	max  int
	line []byte
	data []byte
}

func newSSEReader(r io.Reader, max int) *sseReader {
	return &sseReader{br: bufio.NewReaderSize(r, 32<<10), max: max}
}

// lineSlack is what a line may hold besides an event's data ("data: ").
const lineSlack = 64

// next returns the data of the next event that has any, a copy. It
// returns a *TooLargeError for an event whose data is over the limit, and
// the body's error (io.EOF at its end; an event cut short is dropped).
func (r *sseReader) next(st *sseState) ([]byte, error) {
	r.data = r.data[:0]
	typ := ""
	for {
		line, err := r.readLine()
		if err != nil {
			return nil, err
		}
		if len(line) == 0 {
			// An event with no data, or only empty data lines (a
			// priming event that only sets the id), carries no message.
			if len(bytes.TrimSpace(r.data)) == 0 || (typ != "" && typ != "message") {
				r.data, typ = r.data[:0], ""
				continue
			}
			return bytes.Clone(r.data[:len(r.data)-1]), nil
		}
		if line[0] == ':' {
			continue
		}
		field, value, found := bytes.Cut(line, []byte{':'})
		if found && len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch string(field) {
		case "data":
			if len(r.data)+len(value) > r.max {
				return nil, &TooLargeError{Limit: r.max, Size: len(r.data) + len(value)}
			}
			r.data = append(r.data, value...)
			r.data = append(r.data, '\n')
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				st.lastID = string(value)
			}
		case "retry":
			if ms, err := strconv.ParseUint(string(value), 10, 31); err == nil {
				st.retry = time.Duration(ms) * time.Millisecond
			}
		case "event":
			typ = string(value)
		}
	}
}

// readLine returns the next line without its end, bounded.
func (r *sseReader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		chunk, err := r.br.ReadSlice('\n')
		r.line = append(r.line, chunk...)
		if len(r.line) > r.max+lineSlack {
			return nil, &TooLargeError{Limit: r.max, Size: len(r.line)}
		}
		switch {
		case err == nil:
			line := r.line[:len(r.line)-1]
			return bytes.TrimSuffix(line, []byte{'\r'}), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, err
		}
	}
}

// readEvents reads the events of body, updating st, and gives the data of
// each to deliver, until deliver says stop (true), the body ends (its
// error), or an event is too large (*TooLargeError). It counts the events
// delivered.
func (s *StreamableHTTP) readEvents(body io.Reader, st *sseState, deliver func([]byte) (stop bool)) (int, error) {
	r := newSSEReader(body, s.max)
	n := 0
	for {
		data, err := r.next(st)
		if err != nil {
			return n, err
		}
		n++
		if deliver(data) {
			return n, nil
		}
	}
}

// maxResumes bounds the attempts in a row at resuming a broken event
// stream, and maxGETFailures the failures in a row of the GET stream
// before it is given up.
const (
	maxResumes     = 5
	maxGETFailures = 8
)

// readSSEAnswer reads the event stream answering p's request, until its
// answer has come. A stream that breaks first is resumed with a GET
// carrying Last-Event-ID when the server gave event ids; one that cannot
// be resumed answers the request with an error.
func (s *StreamableHTTP) readSSEAnswer(p *post, body io.ReadCloser) {
	st := &sseState{}
	stop := func(data []byte) bool { return !s.deliver(p, data) || p.isAnswered() }
	failures := 0
	for {
		n, err := s.readEvents(body, st, stop)
		body.Close()
		if p.isAnswered() || s.ctx.Err() != nil || p.aborted.Load() {
			return
		}
		var tl *TooLargeError
		if errors.As(err, &tl) {
			s.end(tl)
			return
		}
		if st.lastID == "" {
			s.answerFailed(p, "the server's event stream ended before the answer came, and gave no event id to resume it by", 0)
			return
		}
		if n > 0 {
			failures = 0
		}
		failures++
		if failures > maxResumes {
			s.answerFailed(p, "the server's event stream ended before the answer came, and resuming it failed", 0)
			return
		}
		if !s.sleep(backoff(st.retry, failures)) {
			return
		}
		resp, cancel, gerr := s.get(st.lastID)
		switch {
		case gerr != nil:
			s.log.Debug("Streamable HTTP resume failed", "url", s.shown, "err", s.sec.scrub(redactURLErrors(gerr)))
			body = io.NopCloser(bytes.NewReader(nil))
		case resp.StatusCode == http.StatusNotFound && resp.Request.Header.Get(headerSession) != "":
			drainBody(resp)
			cancel()
			s.expire("GET")
			return
		case resp.StatusCode/100 != 2 || !isEventStream(resp):
			drainBody(resp)
			cancel()
			s.noteHTTPError("GET " + s.shown + ": " + statusWords(resp.StatusCode, ""))
			s.answerFailed(p, "the server's event stream ended before the answer came, and the server refused to resume it ("+statusWords(resp.StatusCode, "")+")", 0)
			return
		default:
			s.log.Debug("Streamable HTTP event stream resumed", "url", s.shown, "method", p.m.method)
			body = cancelOnClose{resp.Body, cancel}
		}
	}
}

// cancelOnClose is a body whose request's context ends when it is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

func isEventStream(resp *http.Response) bool {
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return ct == "text/event-stream"
}

// sleep waits d, or until the stream ends (false).
func (s *StreamableHTTP) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// get sends a GET for an event stream, resuming after lastID when it is
// set. ConnectTimeout bounds it until the response's headers; cancel ends
// the request, body and all.
func (s *StreamableHTTP) get(lastID string) (*http.Response, context.CancelFunc, error) {
	ctx, cancel := context.WithCancel(s.ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url.String(), nil)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	s.setHeaders(req, outgoing{})
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set(headerLastEventID, lastID)
	}
	t := time.AfterFunc(s.timeout, cancel)
	resp, err := s.client.Do(req)
	if !t.Stop() && err == nil {
		resp.Body.Close()
		err = context.DeadlineExceeded
	}
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return resp, cancel, nil
}

// openGET starts the standalone GET event stream, once.
func (s *StreamableHTTP) openGET() {
	s.mu.Lock()
	if s.getOpened {
		s.mu.Unlock()
		return
	}
	s.getOpened = true
	s.mu.Unlock()
	s.goOwned(s.runGET)
}

// runGET keeps the standalone GET event stream open, queueing its
// messages, until Close: a stream that ends is opened again after the
// server's retry delay (1s when it gave none, doubled after each failure
// in a row, at most 30s), resuming after the last event id seen. It stops
// for good on 405 (the server offers none), on a session expiry, and
// after 8 failures in a row.
func (s *StreamableHTTP) runGET() {
	st := &sseState{}
	deliver := func(data []byte) bool { return !s.deliver(nil, data) }
	failures := 0
	for s.ctx.Err() == nil {
		resp, cancel, err := s.get(st.lastID)
		switch {
		case err != nil:
			if s.ctx.Err() != nil {
				return
			}
			failures++
			s.log.Debug("Streamable HTTP GET stream failed", "url", s.shown, "err", s.sec.scrub(redactURLErrors(err)))
		case resp.StatusCode == http.StatusMethodNotAllowed:
			drainBody(resp)
			cancel()
			s.log.Debug("Streamable HTTP server offers no GET stream (405)", "url", s.shown)
			return
		case resp.StatusCode == http.StatusNotFound && resp.Request.Header.Get(headerSession) != "":
			drainBody(resp)
			cancel()
			s.expire("GET")
			return
		case resp.StatusCode/100 != 2 || !isEventStream(resp):
			drainBody(resp)
			cancel()
			failures++
			s.noteHTTPError("GET " + s.shown + ": " + statusWords(resp.StatusCode, ""))
			s.log.Debug("Streamable HTTP GET stream refused", "url", s.shown, "status", resp.StatusCode, "content_type", resp.Header.Get("Content-Type"))
		default:
			n, rerr := s.readEvents(resp.Body, st, deliver)
			resp.Body.Close()
			cancel()
			if s.ctx.Err() != nil {
				return
			}
			var tl *TooLargeError
			if errors.As(rerr, &tl) {
				s.end(tl)
				return
			}
			if n > 0 {
				failures = 0
			} else {
				failures++
			}
		}
		if failures >= maxGETFailures {
			s.log.Warn("Streamable HTTP GET stream given up after repeated failures; server-initiated messages come only with answers", "url", s.shown, "failures", failures)
			return
		}
		if !s.sleep(backoff(st.retry, max(failures, 1))) {
			return
		}
	}
}
