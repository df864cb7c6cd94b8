package wire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/jsonrpc"
	"github.com/mcpl-go/mcpl/internal/transport"
)

var (
	errBrokenPipe = errors.New("write |1: broken pipe")
	errPartial    = errors.Join(transport.ErrPartialWrite, io.ErrShortWrite)
	errDecode     = errors.New("json: cannot unmarshal string into Go value of type int")
)

// callErrorKinds are the CallErrors the peer makes, each filled in as the
// peer fills it (see Peer.Call, Peer.Notify and NotSentError), with the
// operator text each must give, written out whole.
var callErrorKinds = []struct {
	name string
	ce   CallError
	want string
}{
	// Not sent: the params could not be encoded; the caller gave up, or the
	// deadline passed, before the write.
	{"not sent, params not encodable",
		CallError{Outcome: NotSent, Cause: CauseEncodeFailed, Server: "discord", Method: "tools/call", Err: errors.New("json: unsupported type: chan int")},
		`tools/call to "discord" not sent: its params could not be encoded: json: unsupported type: chan int`},
	{"not sent, canceled before the write",
		CallError{Outcome: NotSent, Cause: CauseCanceled, Server: "discord", Method: "tools/call", ID: 3, Err: context.Canceled},
		`tools/call to "discord" not sent: abandoned by its caller before it was written`},
	{"not sent, deadline before the write",
		CallError{Outcome: NotSent, Cause: CauseDeadline, Server: "discord", Method: "tools/call", ID: 3, Timeout: 2 * time.Second, Err: context.DeadlineExceeded},
		`tools/call to "discord" not sent: not written within 2s`},
	// Not sent: the connection was already closed by the peer.
	{"not sent, closed",
		CallError{Outcome: NotSent, Cause: CauseClosed, Server: "discord", Method: "tools/call", ID: 3},
		`tools/call to "discord" not sent: the connection is closed`},
	{"not sent, closed, reconnecting",
		CallError{Outcome: NotSent, Cause: CauseClosed, Server: "discord", Method: "tools/call", ID: 3, Reconnecting: true},
		`tools/call to "discord" not sent: the connection is closed`},
	{"not sent, closed, write found it closed",
		CallError{Outcome: NotSent, Cause: CauseClosed, Server: "discord", Method: "tools/call", ID: 3, Err: transport.ErrClosed},
		`tools/call to "discord" not sent: the connection is closed`},
	{"notification not sent, closed",
		CallError{Outcome: NotSent, Cause: CauseClosed, Server: "discord", Method: "notifications/progress"},
		`notifications/progress to "discord" not sent: the connection is closed`},
	{"not sent, closed, no name",
		CallError{Outcome: NotSent, Cause: CauseClosed, Method: "tools/call", ID: 3},
		`tools/call not sent: the connection is closed`},
	{"notification not sent, closed, no name",
		CallError{Outcome: NotSent, Cause: CauseClosed, Method: "notifications/progress"},
		`notifications/progress not sent: the connection is closed`},
	{"not sent, closed, no method",
		CallError{Outcome: NotSent, Cause: CauseClosed, Server: "discord"},
		`request to "discord" not sent: the connection is closed`},

	// Not sent: this side had closed the connection.
	{"not sent, closed here",
		CallError{Outcome: NotSent, Cause: CauseClosedHere, Server: "discord", Method: "tools/call", ID: 9},
		`tools/call to "discord" not sent: the connection was closed on this side`},
	{"notification not sent, closed here",
		CallError{Outcome: NotSent, Cause: CauseClosedHere, Server: "discord", Method: "notifications/cancelled"},
		`notifications/cancelled to "discord" not sent: the connection was closed on this side`},
	{"not sent, closed here, no name",
		CallError{Outcome: NotSent, Cause: CauseClosedHere, Method: "ping", ID: 9},
		`ping not sent: the connection was closed on this side`},

	// Not sent: the transport refused the write.
	{"write failed",
		CallError{Outcome: NotSent, Cause: CauseWriteFailed, Server: "discord", Method: "tools/call", ID: 4, Err: errBrokenPipe},
		`tools/call to "discord" not sent: the write failed: write |1: broken pipe`},
	{"notification write failed",
		CallError{Outcome: NotSent, Cause: CauseWriteFailed, Server: "discord", Method: "notifications/progress", Err: errBrokenPipe},
		`notifications/progress to "discord" not sent: the write failed: write |1: broken pipe`},
	{"write failed, no name",
		CallError{Outcome: NotSent, Cause: CauseWriteFailed, Method: "tools/call", ID: 4, Err: errBrokenPipe},
		`tools/call not sent: the write failed: write |1: broken pipe`},

	// No answer: the connection closed while the call waited, or a write
	// broke off part way and closed it.
	{"pending, closed",
		CallError{Outcome: NoResponse, Cause: CauseClosed, Server: "discord", Method: "tools/call", ID: 5},
		`tools/call to "discord": the connection closed before an answer`},
	{"pending, closed, reconnecting",
		CallError{Outcome: NoResponse, Cause: CauseClosed, Server: "discord", Method: "tools/call", ID: 5, Reconnecting: true},
		`tools/call to "discord": the connection closed before an answer`},
	{"written in part",
		CallError{Outcome: NoResponse, Cause: CauseClosed, Server: "discord", Method: "tools/call", ID: 5, Err: errPartial},
		`tools/call to "discord": the connection closed before an answer`},
	{"notification written in part",
		CallError{Outcome: NoResponse, Cause: CauseClosed, Server: "discord", Method: "notifications/progress", Err: errPartial},
		`notifications/progress to "discord": the connection closed while it was written`},
	{"pending, closed, no name",
		CallError{Outcome: NoResponse, Cause: CauseClosed, Method: "tools/call", ID: 5},
		`tools/call: the connection closed before an answer`},

	// No answer: this side closed the connection while the call waited.
	{"pending, closed here",
		CallError{Outcome: NoResponse, Cause: CauseClosedHere, Server: "discord", Method: "tools/call", ID: 6},
		`tools/call to "discord": the connection was closed on this side before an answer`},
	{"pending, closed here, no name",
		CallError{Outcome: NoResponse, Cause: CauseClosedHere, Method: "tools/call", ID: 6},
		`tools/call: the connection was closed on this side before an answer`},

	// No answer: the deadline passed.
	{"deadline 60s",
		CallError{Outcome: NoResponse, Cause: CauseDeadline, Server: "discord", Method: "tools/call", ID: 7, Timeout: 60 * time.Second, Err: context.DeadlineExceeded},
		`tools/call to "discord": no answer within 60s`},
	{"deadline 1m30s",
		CallError{Outcome: NoResponse, Cause: CauseDeadline, Server: "discord", Method: "tools/call", ID: 7, Timeout: 90 * time.Second, Err: context.DeadlineExceeded},
		`tools/call to "discord": no answer within 90s`},
	{"deadline 1500ms",
		CallError{Outcome: NoResponse, Cause: CauseDeadline, Server: "discord", Method: "tools/call", ID: 7, Timeout: 1500 * time.Millisecond, Err: context.DeadlineExceeded},
		`tools/call to "discord": no answer within 1.5s`},
	{"deadline 200ms",
		CallError{Outcome: NoResponse, Cause: CauseDeadline, Server: "discord", Method: "tools/call", ID: 7, Timeout: 200 * time.Millisecond, Err: context.DeadlineExceeded},
		`tools/call to "discord": no answer within 200ms`},
	{"deadline while written in part",
		CallError{Outcome: NoResponse, Cause: CauseDeadline, Server: "discord", Method: "tools/call", ID: 7, Timeout: time.Second, Err: errPartial},
		`tools/call to "discord": no answer within 1s`},
	{"deadline, no name",
		CallError{Outcome: NoResponse, Cause: CauseDeadline, Method: "tools/call", ID: 7, Timeout: 2 * time.Second, Err: context.DeadlineExceeded},
		`tools/call: no answer within 2s`},

	// No answer: the caller gave up.
	{"canceled",
		CallError{Outcome: NoResponse, Cause: CauseCanceled, Server: "discord", Method: "tools/call", ID: 8, Err: context.Canceled},
		`tools/call to "discord": abandoned by its caller before an answer`},
	{"canceled while written in part",
		CallError{Outcome: NoResponse, Cause: CauseCanceled, Server: "discord", Method: "tools/call", ID: 8, Err: errPartial},
		`tools/call to "discord": abandoned by its caller before an answer`},
	{"canceled, no name",
		CallError{Outcome: NoResponse, Cause: CauseCanceled, Method: "tools/call", ID: 8, Err: context.Canceled},
		`tools/call: abandoned by its caller before an answer`},

	// An error answer: the peer's code and words, one line and bounded.
	{"error answer",
		CallError{Outcome: ErrorResponse, Cause: CauseErrorAnswer, Server: "discord", Method: "tools/call", ID: 10,
			Answer: &jsonrpc.Error{Code: -32042, Message: "Rate limited.", Data: json.RawMessage(`{"retryAfter":5}`)}},
		`tools/call to "discord": error -32042: Rate limited.`},
	{"error answer over lines",
		CallError{Outcome: ErrorResponse, Cause: CauseErrorAnswer, Server: "discord", Method: "tools/call", ID: 10,
			Answer: &jsonrpc.Error{Code: -32000, Message: " first\r\nsecond\u2028third\t\x1b[0mfourth\n"}},
		`tools/call to "discord": error -32000: first  second third [0mfourth`},
	{"error answer, long",
		CallError{Outcome: ErrorResponse, Cause: CauseErrorAnswer, Server: "discord", Method: "tools/call", ID: 10,
			Answer: &jsonrpc.Error{Code: -32000, Message: strings.Repeat("x", 600)}},
		`tools/call to "discord": error -32000: ` + strings.Repeat("x", 500) + "…"},
	{"error answer, no words",
		CallError{Outcome: ErrorResponse, Cause: CauseErrorAnswer, Server: "discord", Method: "tools/call", ID: 10,
			Answer: &jsonrpc.Error{Code: -32000}},
		`tools/call to "discord": error -32000`},
	{"error answer, no name",
		CallError{Outcome: ErrorResponse, Cause: CauseErrorAnswer, Method: "initialize", ID: 1,
			Answer: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unsupported protocol version"}},
		`initialize: error -32602: unsupported protocol version`},
	{"error answer, overloaded",
		CallError{Outcome: ErrorResponse, Cause: CauseErrorAnswer, Server: "discord", Method: "tools/call", ID: 10,
			Answer: &jsonrpc.Error{Code: CodeOverloaded, Message: "request refused: too many requests are waiting; try again later"}},
		`tools/call to "discord": error -32000: request refused: too many requests are waiting; try again later`},

	// An answer that could not be decoded into the caller's result.
	{"bad answer",
		CallError{Outcome: BadResponse, Cause: CauseBadAnswer, Server: "discord", Method: "tools/call", ID: 11, Err: errDecode},
		`tools/call to "discord": the answer could not be read: json: cannot unmarshal string into Go value of type int`},
	{"bad answer, no name",
		CallError{Outcome: BadResponse, Cause: CauseBadAnswer, Method: "tools/list", ID: 11, Err: errDecode},
		`tools/list: the answer could not be read: json: cannot unmarshal string into Go value of type int`},
}

// Error gives the operator's one-line account of every kind of failed
// call, verbatim.
func TestCallErrorText(t *testing.T) {
	for _, c := range callErrorKinds {
		t.Run(c.name, func(t *testing.T) {
			ce := c.ce
			if got := ce.Error(); got != c.want {
				t.Errorf("Error():\n got: %q\nwant: %q", got, c.want)
			}
			if got := fmt.Sprint(&ce); got != c.want {
				t.Errorf("printed as %q", got)
			}
		})
	}
	// Not made by the peer, but documented: an error answer without its
	// object, and underlying errors that are missing.
	for _, c := range []struct {
		ce   CallError
		want string
	}{
		{CallError{Outcome: ErrorResponse, Cause: CauseErrorAnswer, Server: "discord", Method: "tools/call"}, `tools/call to "discord": answered with an error`},
		{CallError{Outcome: NotSent, Cause: CauseWriteFailed, Server: "discord", Method: "tools/call"}, `tools/call to "discord" not sent: the write failed: unknown`},
		{CallError{Outcome: BadResponse, Cause: CauseBadAnswer, Server: "discord", Method: "tools/call"}, `tools/call to "discord": the answer could not be read: unknown`},
	} {
		if got := c.ce.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
}

// Every kind above is covered: each outcome with each cause the peer pairs
// it with, so a new pairing must be added to the table.
func TestCallErrorKindsCovered(t *testing.T) {
	type kind struct {
		o Outcome
		c Cause
	}
	seen := map[kind]bool{}
	for _, c := range callErrorKinds {
		seen[kind{c.ce.Outcome, c.ce.Cause}] = true
	}
	want := []kind{
		{NotSent, CauseClosed}, {NotSent, CauseClosedHere}, {NotSent, CauseWriteFailed},
		{NotSent, CauseEncodeFailed}, {NotSent, CauseCanceled}, {NotSent, CauseDeadline},
		{NoResponse, CauseClosed}, {NoResponse, CauseClosedHere}, {NoResponse, CauseDeadline}, {NoResponse, CauseCanceled},
		{ErrorResponse, CauseErrorAnswer}, {BadResponse, CauseBadAnswer},
	}
	for _, k := range want {
		if !seen[k] {
			t.Errorf("no case for %v/%d", k.o, k.c)
		}
		delete(seen, k)
	}
	for k := range seen {
		t.Errorf("a case for %v/%d, which the peer never makes", k.o, k.c)
	}
}

// errors.Is matches ErrConnClosed, ErrNotSent and ErrNoAnswer as each
// kind's outcome and cause say, and nothing else; the underlying error
// stays reachable; an error answer's *jsonrpc.Error, and only it, is
// reached with errors.As. All of it holds through a wrap.
func TestCallErrorMatches(t *testing.T) {
	type want struct{ connClosed, notSent, noAnswer, answer bool }
	byName := map[string]want{
		"not sent, closed":                        {connClosed: true, notSent: true},
		"not sent, closed, reconnecting":          {connClosed: true, notSent: true},
		"not sent, closed, write found it closed": {connClosed: true, notSent: true},
		"notification not sent, closed":           {connClosed: true, notSent: true},
		"not sent, closed, no name":               {connClosed: true, notSent: true},
		"notification not sent, closed, no name":  {connClosed: true, notSent: true},
		"not sent, closed, no method":             {connClosed: true, notSent: true},
		"not sent, closed here":                   {connClosed: true, notSent: true},
		"notification not sent, closed here":      {connClosed: true, notSent: true},
		"not sent, closed here, no name":          {connClosed: true, notSent: true},
		"write failed":                            {notSent: true},
		"not sent, params not encodable":          {notSent: true},
		"not sent, canceled before the write":     {notSent: true},
		"not sent, deadline before the write":     {notSent: true},
		"notification write failed":               {notSent: true},
		"write failed, no name":                   {notSent: true},
		"pending, closed":                         {connClosed: true, noAnswer: true},
		"pending, closed, reconnecting":           {connClosed: true, noAnswer: true},
		"written in part":                         {connClosed: true, noAnswer: true},
		"notification written in part":            {connClosed: true, noAnswer: true},
		"pending, closed, no name":                {connClosed: true, noAnswer: true},
		"pending, closed here":                    {connClosed: true, noAnswer: true},
		"pending, closed here, no name":           {connClosed: true, noAnswer: true},
		"deadline 60s":                            {noAnswer: true},
		"deadline 1m30s":                          {noAnswer: true},
		"deadline 1500ms":                         {noAnswer: true},
		"deadline 200ms":                          {noAnswer: true},
		"deadline while written in part":          {noAnswer: true},
		"deadline, no name":                       {noAnswer: true},
		"canceled":                                {noAnswer: true},
		"canceled while written in part":          {noAnswer: true},
		"canceled, no name":                       {noAnswer: true},
		"error answer":                            {answer: true},
		"error answer over lines":                 {answer: true},
		"error answer, long":                      {answer: true},
		"error answer, no words":                  {answer: true},
		"error answer, no name":                   {answer: true},
		"error answer, overloaded":                {answer: true},
		"bad answer":                              {noAnswer: true},
		"bad answer, no name":                     {noAnswer: true},
	}
	if len(byName) != len(callErrorKinds) {
		t.Fatalf("%d expectations for %d kinds", len(byName), len(callErrorKinds))
	}
	for _, c := range callErrorKinds {
		w, ok := byName[c.name]
		if !ok {
			t.Errorf("no expectation for %q", c.name)
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			ce := c.ce
			for _, err := range []error{&ce, fmt.Errorf("session: %w", &ce)} {
				for _, s := range []struct {
					sentinel error
					want     bool
				}{{ErrConnClosed, w.connClosed}, {ErrNotSent, w.notSent}, {ErrNoAnswer, w.noAnswer}} {
					if got := errors.Is(err, s.sentinel); got != s.want {
						t.Errorf("errors.Is(%v, %q) = %v, want %v", err, s.sentinel, got, s.want)
					}
				}
				if ce.Err != nil && !errors.Is(err, ce.Err) {
					t.Errorf("the underlying error %v is not reachable", ce.Err)
				}
				var pe *jsonrpc.Error
				if got := errors.As(err, &pe); got != w.answer {
					t.Fatalf("errors.As(%v, *jsonrpc.Error) = %v, want %v", err, got, w.answer)
				}
				if w.answer && (pe != ce.Answer || pe.Code != ce.Answer.Code || pe.Message != ce.Answer.Message || string(pe.Data) != string(ce.Answer.Data)) {
					t.Errorf("errors.As reached %+v, want the answer %+v", pe, ce.Answer)
				}
			}
		})
	}

	// The peer's code, message and data, as an error answer carried them.
	err := fmt.Errorf("call: %w", &CallError{Outcome: ErrorResponse, Cause: CauseErrorAnswer, Server: "discord", Method: "tools/call", ID: 2,
		Answer: &jsonrpc.Error{Code: -32042, Message: "Rate limited.", Data: json.RawMessage(`{"retryAfter":5}`)}})
	var pe *jsonrpc.Error
	if !errors.As(err, &pe) || pe.Code != -32042 || pe.Message != "Rate limited." || string(pe.Data) != `{"retryAfter":5}` {
		t.Errorf("errors.As reached %+v", pe)
	}
	// The sentinels are distinct: none matches another.
	for _, a := range []error{ErrConnClosed, ErrNotSent, ErrNoAnswer} {
		for _, b := range []error{ErrConnClosed, ErrNotSent, ErrNoAnswer} {
			if a != b && errors.Is(a, b) {
				t.Errorf("%q matches %q", a, b)
			}
		}
	}
}
