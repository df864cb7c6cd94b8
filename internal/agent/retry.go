package agent

import (
	"errors"
	"math/rand/v2"
	"time"

	"github.com/mcpl-go/mcpl/internal/model"
)

// Retries of a model call. A call that failed in a way a later one may not
// (model.Error.Retryable: a rate limit, an overloaded or unreachable
// provider, a stall, a stream cut short) is made again, up to
// RetryPolicy.Attempts calls in all and within RetryPolicy.MaxElapsed of
// the first:
//
//   - The wait before retry n doubles from retryFirst (1 s, 2 s, 4 s, …)
//     up to retryCap (30 s), plus a random part of up to half of it, so
//     that agents that failed together don't retry together; a provider's
//     RetryAfter is waited instead when it is longer. A wait that would
//     end past MaxElapsed is not begun: the call fails then.
//   - A failure that is not retryable (a refused key, a request the
//     provider rejects, anything not a *model.Error) is not retried.
//   - Once any text of the answer has been streamed into a channel, the
//     call is not made again: the channel's people have read the start of
//     an answer, and a second one would say it again. The stream is ended
//     (channels/outgoing/complete), and the agent is told where what it
//     said went.
//   - Every failed attempt is a transcript event (model_retry, or
//     model_failed for the last) and a warn line with the provider's own
//     words; the agent's history gets one text, in its terms, only when
//     the call failed for good (texts.go, textModelFailed).

// RetryPolicy bounds the retries of an agent's model calls.
type RetryPolicy struct {
	// Attempts is the most calls made, the first included; 0 is
	// DefaultRetryAttempts, 1 makes no retry.
	Attempts int
	// MaxElapsed bounds the time from the first call's start to the last
	// one's; 0 is DefaultRetryMaxElapsed.
	MaxElapsed time.Duration
}

// The retry defaults (config.DefaultRetryAttempts and
// DefaultRetryMaxElapsed name the same).
const (
	DefaultRetryAttempts   = 4
	DefaultRetryMaxElapsed = 2 * time.Minute
	retryFirst             = time.Second
	retryCap               = 30 * time.Second
)

// Why a failed call was not made again.
const (
	stopNotRetryable = "not-retryable" // the failure is not one a retry mends
	stopSpent        = "attempts"      // Attempts calls were made
	stopOutOfTime    = "max-elapsed"   // the next wait would end past MaxElapsed
	stopStreamed     = "streamed"      // text was streamed into a channel
)

// callFailed is a model call that failed for good: its last error, how
// many calls were made, and why no other was.
type callFailed struct {
	err      error
	attempts int
	stop     string
}

func (e *callFailed) Error() string { return e.err.Error() }
func (e *callFailed) Unwrap() error { return e.err }

// next says how long to wait before the call made attempt times, which
// failed with err after elapsed since the first began, is made again; or
// why it is not (the wait is then 0). jitter returns a random duration in
// [0, d].
func (p RetryPolicy) next(attempt int, elapsed time.Duration, err error, streamed bool, jitter func(d time.Duration) time.Duration) (time.Duration, string) {
	var me *model.Error
	if !errors.As(err, &me) || !me.Retryable {
		return 0, stopNotRetryable
	}
	if streamed {
		return 0, stopStreamed
	}
	attempts, maxElapsed := p.Attempts, p.MaxElapsed
	if attempts <= 0 {
		attempts = DefaultRetryAttempts
	}
	if maxElapsed <= 0 {
		maxElapsed = DefaultRetryMaxElapsed
	}
	if attempt >= attempts {
		return 0, stopSpent
	}
	d := retryCap
	if attempt < 6 { // 1 s << 5 = 32 s, past the cap
		d = min(retryFirst<<(attempt-1), retryCap)
	}
	d += jitter(d / 2)
	if me.RetryAfter > d {
		d = me.RetryAfter
	}
	if elapsed+d > maxElapsed {
		return 0, stopOutOfTime
	}
	return d, ""
}

// randomJitter is a random duration in [0, d].
func randomJitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d + 1)
}

// generate makes the model call of req, and makes it again as the
// runner's RetryPolicy allows; streamed reports whether any of the
// answer's text has reached a channel. A call that failed for good is a
// *callFailed; one the turn's ctx ended returns ctx's error.
func (t *turn) generate(req model.Request, streamed func() bool) (model.Response, error) {
	r := t.r
	start := time.Now()
	for attempt := 1; ; attempt++ {
		began := time.Now()
		resp, err := r.spec.Model.Generate(t.ctx, req)
		took := time.Since(began)
		if err == nil {
			t.attempt = Attempt{N: attempt, Ms: took.Milliseconds()}
			return resp, nil
		}
		if t.ctx.Err() != nil {
			return resp, err
		}
		wait, stop := r.spec.Retry.next(attempt, time.Since(start), err, streamed(), r.rt.opts.jitter)
		ev := Event{Event: EventModelRetry, Provider: r.spec.Provider, Attempt: &Attempt{N: attempt, Ms: took.Milliseconds(), WaitMs: wait.Milliseconds()}, Text: errorText(err)}
		if stop != "" {
			ev.Event, ev.Reason = EventModelFailed, stop
			t.event(ev)
			return resp, &callFailed{err: err, attempts: attempt, stop: stop}
		}
		t.event(ev)
		r.rt.log.Warn("an agent's model call failed; it is made again", "agent", r.name, "attempt", attempt, "wait", wait.String(), "error", errorText(err))
		timer := time.NewTimer(wait)
		select {
		case <-t.ctx.Done():
			timer.Stop()
			return resp, t.ctx.Err()
		case <-timer.C:
		}
	}
}
