package fakeapi

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"time"
)

// errStalled is what a stalled answer's writes return.
var errStalled = errors.New("fakeapi: the answer stalled")

// StallBeforeHeaders is the Reply.StallAfter of an answer that stalls
// before it sends its headers.
const StallBeforeHeaders = -1

// Times returns when each request arrived, in order.
func (s *Server) Times() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.times...)
}

// endStalls ends the stalls still waiting for their clients.
func (s *Server) endStalls() { close(s.quit) }

// fail answers a Reply with a Status: its RetryAfter header, then its Body
// as it is, or the provider's error format with msg.
func (s *Server) fail(w http.ResponseWriter, rep Reply, msg string) {
	if rep.RetryAfter != "" {
		w.Header().Set("Retry-After", rep.RetryAfter)
	}
	if rep.Body == "" {
		s.failure(w, rep.Status, msg)
		return
	}
	ct := "text/plain; charset=utf-8"
	if json.Valid([]byte(rep.Body)) {
		ct = "application/json"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(rep.Status)
	_, _ = w.Write([]byte(rep.Body))
}

// fault carries out a's Reset or StallAfter, reporting whether it did
// (the request then has had all the answer it gets).
func (s *Server) fault(w http.ResponseWriter, r *http.Request, a *answer) bool {
	switch {
	case a.Reset:
		s.reset(w)
	case a.StallAfter == StallBeforeHeaders:
		s.stall(r)
	case a.StallAfter > 0 && a.stream && a.Status == 0:
		sw := &stallWriter{ResponseWriter: w, left: a.StallAfter, stall: func() { s.stall(r) }}
		s.answer(sw, a)
	default:
		return false
	}
	s.mu.Lock()
	s.changedLocked()
	s.mu.Unlock()
	return true
}

// reset drops the connection with no answer, as a TCP reset (linger 0)
// where the connection is TCP.
func (s *Server) reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		s.t.Errorf("fakeapi: Reset: the connection cannot be hijacked: %v", err)
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// stall waits until the client goes away or the server closes.
func (s *Server) stall(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-s.quit:
	}
}

// stallWriter lets an answer's first events through, then stalls: the
// answers flush after each event, so the flushes count them.
type stallWriter struct {
	http.ResponseWriter
	left    int    // events still to send
	stall   func() // waits for the client to go away
	stalled bool   // then nothing more is written
}

func (sw *stallWriter) Write(p []byte) (int, error) {
	if sw.stalled {
		return 0, errStalled
	}
	return sw.ResponseWriter.Write(p)
}

func (sw *stallWriter) Flush() {
	if sw.stalled {
		return
	}
	if f, ok := sw.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	sw.left--
	if sw.left == 0 {
		sw.stalled = true
		sw.stall()
	}
}
