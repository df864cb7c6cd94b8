package session

import (
	"errors"
	"math/rand/v2"
	"time"
)

// backoff returns the delay before reconnect attempt n (0 for the first):
// initial doubled n times, at most max, then varied by ±25% (jitter in
// [0,1) picks where in that range).
func backoff(n int, initial, max time.Duration, jitter float64) time.Duration {
	if initial <= 0 {
		initial = 5 * time.Second
	}
	if max <= 0 {
		max = 300 * time.Second
	}
	d := initial
	for i := 0; i < n && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	return time.Duration(float64(d) * (0.75 + 0.5*jitter))
}

// redialLoop reconnects with backoff until it succeeds, the session closes,
// or the server refuses the policy asking to close (then OnDisconnect hears
// that no reconnect is coming). It never gives up otherwise.
func (s *Session) redialLoop() {
	for n := 0; ; n++ {
		d := backoff(n, s.cfg.Reconnect.Initial, s.cfg.Reconnect.Max, rand.Float64())
		s.setNextDial(time.Now().Add(d))
		t := time.NewTimer(d)
		select {
		case <-s.ctx.Done():
			t.Stop()
			s.setNextDial(time.Time{})
			return
		case <-t.C:
		}
		s.setNextDial(time.Time{})
		err := s.connect(s.ctx, true)
		if err == nil {
			s.reconnects.Add(1)
			s.log.Info("reconnected", "attempt", n+1)
			return
		}
		if errors.Is(err, ErrRefusedClose) {
			// The server asked this host to close: no more redials, and
			// whoever was told it would reconnect is told it won't.
			s.log.Warn("reconnecting stopped: the server refused the policy and asked to close", "error", err.Error())
			if s.cfg.OnDisconnect != nil {
				s.callback(true, func() { s.cfg.OnDisconnect(s, false) })
			}
			return
		}
		if errors.Is(err, ErrVersion) {
			s.log.Warn("reconnecting stopped: the server shares no MCP protocol version with this host", "error", err.Error())
			if s.cfg.OnDisconnect != nil {
				s.callback(true, func() { s.cfg.OnDisconnect(s, false) })
			}
			return
		}
		if errors.Is(err, ErrClosed) || s.ctx.Err() != nil {
			return
		}
		s.log.Warn("reconnect attempt failed", "attempt", n+1, "error", err.Error())
	}
}

// setNextDial records when the next redial is due (NextAttempt).
func (s *Session) setNextDial(at time.Time) {
	s.mu.Lock()
	s.nextDial = at
	s.mu.Unlock()
}
