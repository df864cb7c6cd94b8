package host

import (
	"fmt"
	"math"
	"time"

	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/internal/wire"
)

// The texts an agent reads when a request to a server fails, on any lane
// that passes a failed request on (a tool call today). They are a contract
// (seeds/002), pinned verbatim by tests: they say what happened, whether
// anything took effect, and what works from there. Method names, request
// ids, JSON-RPC codes, close codes and field names never appear in them;
// those are in the operator's log (package wire logs them).

// requestFailedText is what an agent reads for ce, chosen by its outcome,
// cause and server id.
func requestFailedText(ce *wire.CallError) string {
	s := ce.Server
	switch ce.Cause {
	case wire.CauseClosed:
		if ce.Outcome == wire.NotSent {
			return textNotSentClosed(s, ce.Reconnecting)
		}
		return textClosedPending(s, ce.Reconnecting)
	case wire.CauseClosedHere:
		if ce.Outcome == wire.NotSent {
			return textNotSentClosedHere(s)
		}
		return textClosedHerePending(s)
	case wire.CauseTooLarge:
		if ce.Outcome == wire.NotSent {
			return textNotSentTooLarge(s, ce.Reconnecting)
		}
		return textTooLargePending(s, ce.Reconnecting)
	case wire.CauseStalled:
		if ce.Outcome == wire.NotSent {
			return textNotSentStalled(s, ce.Timeout, ce.Reconnecting)
		}
		return textStalledPending(s, ce.Timeout, ce.Reconnecting)
	case wire.CauseWriteFailed:
		return textNotWritten(s)
	case wire.CauseEncodeFailed:
		return textNotEncoded(s)
	case wire.CauseDeadline:
		if ce.Outcome == wire.NotSent {
			return textNotWrittenInTime(s, ce.Timeout)
		}
		return textDeadline(s, ce.Timeout)
	case wire.CauseCanceled:
		if ce.Outcome == wire.NotSent {
			return textCanceledUnsent(s)
		}
		return textCanceled(s)
	case wire.CauseErrorAnswer:
		if ce.Answer != nil {
			if w := content.Words(ce.Answer.Message); w != "" {
				return textErrorAnswer(s, w)
			}
		}
		return textErrorAnswerNoWords(s)
	}
	return textBadAnswer(s)
}

func textClosedPending(server string, reconnecting bool) string {
	if reconnecting {
		return fmt.Sprintf(`The connection to the "%s" server closed before it answered, so whether the request took effect is unknown. Check its effect before trying again; this host is reconnecting to it.`, server)
	}
	return fmt.Sprintf(`The connection to the "%s" server closed before it answered, so whether the request took effect is unknown. This host won't reconnect to it on its own. If you need it, ask whoever runs this host.`, server)
}

func textClosedHerePending(server string) string {
	return fmt.Sprintf(`The "%s" server didn't answer before this host closed its connection, so whether the request took effect is unknown. Check its effect before trying again.`, server)
}

func textNotSentClosed(server string, reconnecting bool) string {
	if reconnecting {
		return fmt.Sprintf(`The request wasn't sent: the connection to the "%s" server is closed, so nothing ran. This host is reconnecting to it; try again later.`, server)
	}
	return fmt.Sprintf(`The request wasn't sent: the connection to the "%s" server is closed, so nothing ran. This host won't reconnect to it on its own. If you need it, ask whoever runs this host.`, server)
}

func textNotSentClosedHere(server string) string {
	return fmt.Sprintf(`The request wasn't sent: this host closed its connection to the "%s" server, so nothing ran. If calling it again fails, ask whoever runs this host.`, server)
}

// afterHostClosePending and afterHostCloseNotSent end a text for a
// connection this host closed because the server misbehaved: what works
// from there.
func afterHostClosePending(reconnecting bool) string {
	if reconnecting {
		return "Check its effect before trying again; this host is reconnecting to it."
	}
	return "Check its effect before trying again. This host won't reconnect to it on its own. If you need it, ask whoever runs this host."
}

func afterHostCloseNotSent(reconnecting bool) string {
	if reconnecting {
		return "This host is reconnecting to it; try again later."
	}
	return "This host won't reconnect to it on its own. If you need it, ask whoever runs this host."
}

// textTooLargePending and textNotSentTooLarge: this host closed the
// connection because the server sent a message over the size limit.
func textTooLargePending(server string, reconnecting bool) string {
	return fmt.Sprintf(`This host closed its connection to the "%s" server because the server sent a message over the size limit, before it answered, so whether the request took effect is unknown. %s`, server, afterHostClosePending(reconnecting))
}

func textNotSentTooLarge(server string, reconnecting bool) string {
	return fmt.Sprintf(`The request wasn't sent: this host closed its connection to the "%s" server because the server sent a message over the size limit, so nothing ran. %s`, server, afterHostCloseNotSent(reconnecting))
}

// textStalledPending and textNotSentStalled: this host closed the
// connection because the server stopped reading what it sends.
func textStalledPending(server string, d time.Duration, reconnecting bool) string {
	return fmt.Sprintf(`The "%s" server stopped reading what this host sends (it took nothing for %s), so this host closed its connection to it before it answered, and whether the request took effect is unknown. %s`, server, seconds(d), afterHostClosePending(reconnecting))
}

func textNotSentStalled(server string, d time.Duration, reconnecting bool) string {
	return fmt.Sprintf(`The request wasn't sent: the "%s" server stopped reading what this host sends (it took nothing for %s), so this host closed its connection to it and nothing ran. %s`, server, seconds(d), afterHostCloseNotSent(reconnecting))
}

func textNotWritten(server string) string {
	return fmt.Sprintf(`The request wasn't sent: this host couldn't write it to the "%s" server, so nothing ran. Try again later.`, server)
}

// textNotWrittenInTime is for a request whose deadline passed before it
// could be written (a write stuck behind another). The seed gives no text
// for it; it says what the write-failed text says, with the deadline.
func textNotWrittenInTime(server string, d time.Duration) string {
	return fmt.Sprintf(`The request wasn't sent: this host couldn't write it to the "%s" server within %s, so nothing ran. Try again later.`, server, seconds(d))
}

// textNotEncoded is for a request this host could not encode; nothing was
// written.
func textNotEncoded(server string) string {
	return fmt.Sprintf(`The request wasn't sent: this host couldn't put it into a form the "%s" server reads, so nothing ran. Calling it again the same way won't work.`, server)
}

// textCanceledUnsent is for a request its caller gave up on before it was
// written.
func textCanceledUnsent(server string) string {
	return fmt.Sprintf(`The request to the "%s" server was abandoned here before it was sent, so nothing ran.`, server)
}

// textUnaccounted is for a failure this host can't place (never expected:
// every failed request is a wire.CallError). It claims nothing.
func textUnaccounted(server string) string {
	return fmt.Sprintf(`The request to the "%s" server failed in a way this host can't account for, so whether it took effect is unknown. Check its effect before trying again.`, server)
}

func textErrorAnswer(server, words string) string {
	return fmt.Sprintf(`The "%s" server answered with an error: %s`, server, words)
}

func textErrorAnswerNoWords(server string) string {
	return fmt.Sprintf(`The "%s" server answered with an error without saying what went wrong, so whether the request took effect is unknown. Check its effect before trying again.`, server)
}

// textDeadline is seed 002's text for a request whose deadline passed,
// with one clause changed: the seed's host did not cancel ("abandoned
// here, not cancelled"), and this one does (the wire peer sends
// notifications/cancelled), so saying "not cancelled" would be untrue.
func textDeadline(server string, d time.Duration) string {
	return fmt.Sprintf(`The "%s" server didn't answer within %s, so whether the request took effect is unknown: it was abandoned here, and the server was asked to cancel it, but it may still complete on the server. Check its effect before trying again, since repeating something that changes state may do it twice.`, server, seconds(d))
}

// textCanceled is for a call its caller gave up on (its context ended)
// after the request was written. The seed gives no text for it; it says
// the same three things the others do.
func textCanceled(server string) string {
	return fmt.Sprintf(`The request to the "%s" server was abandoned here before it answered, so whether it took effect is unknown: the server was asked to cancel it, but it may still complete there. Check its effect before trying again.`, server)
}

// textBadAnswer is for an answer whose result could not be decoded into
// what the request expects.
func textBadAnswer(server string) string {
	return fmt.Sprintf(`The "%s" server answered in a form this host couldn't read, so whether the request took effect is unknown. Check its effect before trying again.`, server)
}

// seconds renders a deadline in whole seconds, rounding a fraction up:
// "1 second", "3 seconds".
func seconds(d time.Duration) string {
	n := int64(math.Ceil(d.Seconds()))
	if n < 1 {
		n = 1
	}
	if n == 1 {
		return "1 second"
	}
	return fmt.Sprintf("%d seconds", n)
}
