package host

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// TestRequestFailedText pins what an agent reads for each way a request
// fails, verbatim (seeds/002), for the server "discord", and what the
// ToolError says of its outcome. The operator's line (the CallError's own
// text) is never what the agent reads.
func TestRequestFailedText(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ce      wire.CallError
		outcome Outcome
		want    string
	}{
		{"closed pending, reconnecting", wire.CallError{Outcome: wire.NoResponse, Cause: wire.CauseClosed, Reconnecting: true}, OutcomeNoAnswer,
			`The connection to the "discord" server closed before it answered, so whether the request took effect is unknown. Check its effect before trying again; this host is reconnecting to it.`},
		{"closed pending", wire.CallError{Outcome: wire.NoResponse, Cause: wire.CauseClosed}, OutcomeNoAnswer,
			`The connection to the "discord" server closed before it answered, so whether the request took effect is unknown. This host won't reconnect to it on its own. If you need it, ask whoever runs this host.`},
		{"this host closed, pending", wire.CallError{Outcome: wire.NoResponse, Cause: wire.CauseClosedHere}, OutcomeNoAnswer,
			`The "discord" server didn't answer before this host closed its connection, so whether the request took effect is unknown. Check its effect before trying again.`},
		{"not sent, reconnecting", wire.CallError{Outcome: wire.NotSent, Cause: wire.CauseClosed, Reconnecting: true}, OutcomeNotSent,
			`The request wasn't sent: the connection to the "discord" server is closed, so nothing ran. This host is reconnecting to it; try again later.`},
		{"not sent", wire.CallError{Outcome: wire.NotSent, Cause: wire.CauseClosed}, OutcomeNotSent,
			`The request wasn't sent: the connection to the "discord" server is closed, so nothing ran. This host won't reconnect to it on its own. If you need it, ask whoever runs this host.`},
		{"not sent, this host closed", wire.CallError{Outcome: wire.NotSent, Cause: wire.CauseClosedHere}, OutcomeNotSent,
			`The request wasn't sent: this host closed its connection to the "discord" server, so nothing ran. If calling it again fails, ask whoever runs this host.`},
		{"too large, pending", wire.CallError{Outcome: wire.NoResponse, Cause: wire.CauseTooLarge}, OutcomeNoAnswer,
			`This host closed its connection to the "discord" server because the server sent a message over the size limit, before it answered, so whether the request took effect is unknown. Check its effect before trying again. This host won't reconnect to it on its own. If you need it, ask whoever runs this host.`},
		{"too large, pending, reconnecting", wire.CallError{Outcome: wire.NoResponse, Cause: wire.CauseTooLarge, Reconnecting: true}, OutcomeNoAnswer,
			`This host closed its connection to the "discord" server because the server sent a message over the size limit, before it answered, so whether the request took effect is unknown. Check its effect before trying again; this host is reconnecting to it.`},
		{"too large, not sent", wire.CallError{Outcome: wire.NotSent, Cause: wire.CauseTooLarge}, OutcomeNotSent,
			`The request wasn't sent: this host closed its connection to the "discord" server because the server sent a message over the size limit, so nothing ran. This host won't reconnect to it on its own. If you need it, ask whoever runs this host.`},
		{"stalled, pending", wire.CallError{Outcome: wire.NoResponse, Cause: wire.CauseStalled, Timeout: 10 * time.Second}, OutcomeNoAnswer,
			`The "discord" server stopped reading what this host sends (it took nothing for 10 seconds), so this host closed its connection to it before it answered, and whether the request took effect is unknown. Check its effect before trying again. This host won't reconnect to it on its own. If you need it, ask whoever runs this host.`},
		{"stalled, not sent, reconnecting", wire.CallError{Outcome: wire.NotSent, Cause: wire.CauseStalled, Timeout: 2 * time.Second, Reconnecting: true}, OutcomeNotSent,
			`The request wasn't sent: the "discord" server stopped reading what this host sends (it took nothing for 2 seconds), so this host closed its connection to it and nothing ran. This host is reconnecting to it; try again later.`},
		{"not written", wire.CallError{Outcome: wire.NotSent, Cause: wire.CauseWriteFailed, Err: errors.New("broken pipe")}, OutcomeNotSent,
			`The request wasn't sent: this host couldn't write it to the "discord" server, so nothing ran. Try again later.`},
		{"error answer", wire.CallError{Outcome: wire.ErrorResponse, Cause: wire.CauseErrorAnswer, Answer: &protocol.Error{Code: -32000, Message: "the channel\nis archived"}}, OutcomeErrorAnswer,
			`The "discord" server answered with an error: the channel is archived`},
		{"error answer, no words", wire.CallError{Outcome: wire.ErrorResponse, Cause: wire.CauseErrorAnswer, Answer: &protocol.Error{Code: -32000, Message: " \t\x07"}}, OutcomeErrorAnswer,
			`The "discord" server answered with an error without saying what went wrong, so whether the request took effect is unknown. Check its effect before trying again.`},
		{"deadline 1s", wire.CallError{Outcome: wire.NoResponse, Cause: wire.CauseDeadline, Timeout: time.Second}, OutcomeNoAnswer,
			`The "discord" server didn't answer within 1 second, so whether the request took effect is unknown: it was abandoned here, and the server was asked to cancel it, but it may still complete on the server. Check its effect before trying again, since repeating something that changes state may do it twice.`},
		{"deadline 1.5s", wire.CallError{Outcome: wire.NoResponse, Cause: wire.CauseDeadline, Timeout: 1500 * time.Millisecond}, OutcomeNoAnswer,
			`The "discord" server didn't answer within 2 seconds, so whether the request took effect is unknown: it was abandoned here, and the server was asked to cancel it, but it may still complete on the server. Check its effect before trying again, since repeating something that changes state may do it twice.`},
		{"abandoned by the caller", wire.CallError{Outcome: wire.NoResponse, Cause: wire.CauseCanceled}, OutcomeNoAnswer,
			`The request to the "discord" server was abandoned here before it answered, so whether it took effect is unknown: the server was asked to cancel it, but it may still complete there. Check its effect before trying again.`},
		{"not written within the deadline", wire.CallError{Outcome: wire.NotSent, Cause: wire.CauseDeadline, Timeout: 2 * time.Second}, OutcomeNotSent,
			`The request wasn't sent: this host couldn't write it to the "discord" server within 2 seconds, so nothing ran. Try again later.`},
		{"abandoned before it was written", wire.CallError{Outcome: wire.NotSent, Cause: wire.CauseCanceled}, OutcomeNotSent,
			`The request to the "discord" server was abandoned here before it was sent, so nothing ran.`},
		{"params not encodable", wire.CallError{Outcome: wire.NotSent, Cause: wire.CauseEncodeFailed, Err: errors.New("json: unsupported type")}, OutcomeNotSent,
			`The request wasn't sent: this host couldn't put it into a form the "discord" server reads, so nothing ran. Calling it again the same way won't work.`},
		{"answer not readable", wire.CallError{Outcome: wire.BadResponse, Cause: wire.CauseBadAnswer, Err: errors.New("json: cannot unmarshal")}, OutcomeNoAnswer,
			`The "discord" server answered in a form this host couldn't read, so whether the request took effect is unknown. Check its effect before trying again.`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ce := tc.ce
			ce.Server, ce.Method, ce.ID = "discord", "tools/call", 12
			te := requestFailed("discord", &ce)
			if te.Text != tc.want {
				t.Errorf("text:\n got: %s\nwant: %s", te.Text, tc.want)
			}
			if te.Outcome != tc.outcome || te.Server != "discord" || !errors.Is(te, error(&ce)) {
				t.Errorf("ToolError %+v, want outcome %s wrapping the request's failure", te, tc.outcome)
			}
			for _, bad := range []string{"tools/call", "12", "-32000", "broken pipe", "json", "unsupported", "\n"} {
				if strings.Contains(te.Text, bad) {
					t.Errorf("the agent's text holds operator detail %q: %s", bad, te.Text)
				}
			}
		})
	}
}

func TestSeconds(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want string
	}{
		{time.Nanosecond, "1 second"},
		{200 * time.Millisecond, "1 second"},
		{999 * time.Millisecond, "1 second"},
		{time.Second, "1 second"},
		{time.Second + time.Nanosecond, "2 seconds"},
		{1500 * time.Millisecond, "2 seconds"},
		{2 * time.Second, "2 seconds"},
		{3 * time.Second, "3 seconds"},
		{60 * time.Second, "60 seconds"},
		{90 * time.Minute, "5400 seconds"},
	}
	for _, c := range cases {
		if got := seconds(c.d); got != c.want {
			t.Errorf("seconds(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}

// TestUnaccountedFailure: a failure that is not a request's (never
// expected) claims nothing and says nothing of the operator's.
func TestUnaccountedFailure(t *testing.T) {
	te := requestFailed("discord", errors.New("session: something odd"))
	want := `The request to the "discord" server failed in a way this host can't account for, so whether it took effect is unknown. Check its effect before trying again.`
	if te.Text != want || te.Outcome != OutcomeNoAnswer {
		t.Errorf("%+v", te)
	}
}

// TestChannelTimeouts: channels/open, channels/close and channels/publish
// keep a deadline of 60 s when the server's requestTimeout is 0, and take
// a configured one otherwise.
func TestChannelTimeouts(t *testing.T) {
	for _, tc := range []struct {
		timeout time.Duration
		want    time.Duration
	}{
		{config.NoTimeout, config.ChannelRequestTimeout},
		{0, config.DefaultRequestTimeout},
		{2 * time.Second, 2 * time.Second},
	} {
		cfg := config.Server{ID: "s", RequestTimeout: tc.timeout}.WithDefaults()
		if got := channelConfig(cfg).Timeout; got != tc.want {
			t.Errorf("requestTimeout %v: channel requests keep %v, want %v", tc.timeout, got, tc.want)
		}
	}
	if config.ChannelRequestTimeout != 60*time.Second {
		t.Errorf("ChannelRequestTimeout = %v, want 60s", config.ChannelRequestTimeout)
	}
}
