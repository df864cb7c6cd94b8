package channels

import (
	"time"

	"github.com/mcpl-go/mcpl/internal/wire"
)

// What the operator views (the status page, host.Host's Channels) show of
// a channel on its server, beside its decision: the decision is durable
// and says what the host wants; whether the server has the channel open
// is only what its last answer said. The two are told apart so that a
// decision to open whose channels/open failed never reads as "open".
//
// The machine keeps, per channel, the last lifecycle request of the
// current registration that failed (failure): what it asked (open or
// close) and the operator's words for why (operatorReason): an error
// answer, a deadline, a request not sent, a server not there, an open
// answered for another channel, an op that did not converge. Work that a
// removal or the host's shutdown cancelled is no failure and is not kept.
// A later request for the channel that settles clears it, and so does the
// registration's removal (a new registration starts with nothing failed).
// The machine has no clock: the registry stamps a failure's time when it
// first publishes the view that holds it (stampFailure), which is the
// step its answer came in.
//
// It is not in channel_list (json "-"): the reason is operator detail (the
// method, the JSON-RPC code, the server's own words), and the agent whose
// call failed was told in its own words.

// failure is a lifecycle request that failed.
type failure struct {
	open   bool   // it asked to open (else to close)
	reason string // the operator's words (operatorReason)
}

// MaxFailureBytes bounds the operator's words for a failed lifecycle
// request, as the status page shows them (an ellipsis ends words cut).
const MaxFailureBytes = 300

// operatorReason is the operator's one-line account of a lifecycle
// request's failure: a failed request's (wire.CallError: method, server,
// what happened, the error answer's code and words), or the lifecycle
// failure's own text; bounded.
func operatorReason(err error) string {
	return wire.OneLine(err.Error(), MaxFailureBytes)
}

// failed records that c's lifecycle request asking open ended in err;
// cancelled work is not a failure.
func (m *machine) failed(c *chanState, open bool, err error) {
	if err == nil || cancelled(err) {
		return
	}
	c.failure = &failure{open: open, reason: operatorReason(err)}
	m.dirty[c.key] = true
}

// pendingOf is "open" or "close" while c's lane has such a request out
// for the current registration, "" else.
func pendingOf(c *chanState) string {
	r := c.lane.running
	switch {
	case r == nil || !r.out || r.gen != c.gen:
		return ""
	case r.want:
		return "open"
	}
	return "close"
}

// stampFailure gives next, about to replace prev, its failure's time:
// prev's when it holds the same failure, now when the failure is new.
func stampFailure(prev, next *view, now time.Time) {
	switch {
	case next.failure == nil:
	case prev != nil && prev.failure == next.failure:
		next.failedAt = prev.failedAt
	default:
		next.failedAt = now
	}
}

// serverSide copies what v knows of the channel on its server into l:
// whether its last request settled, the request out, and the last
// failure.
func (v *view) serverSide(l *ListedChannel) {
	l.Confirmed, l.Pending = v.confirmed, v.pending
	if f := v.failure; f != nil {
		if f.open {
			l.OpenFailed = f.reason
		} else {
			l.CloseFailed = f.reason
		}
		l.FailedAt = v.failedAt
	}
}
