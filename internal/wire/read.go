package wire

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/mcpl-go/mcpl/internal/jsonrpc"
	"github.com/mcpl-go/mcpl/internal/transport"
)

// Reading the stream: one reader at a time, and on a stream whose read can
// be interrupted (transport.ReadDeadliner: a subprocess's pipe, Pipe), the
// reading role passes between the reader goroutine and calls waiting for
// their answers (leader and followers). The role is a token, in one place
// at a time: held by a reader, free in lead for any call waiting to take,
// or handed to the reader goroutine in bgTurn.
//
// A call that is the only one waiting reads its own answer: the answer to
// the only call in flight then wakes no other goroutine. It takes the role
// when it is free, or asks the reader goroutine for it (setting asked and
// interrupting its read with a deadline in the past), and reads until its
// answer comes, handing on what else it reads as the reader goroutine
// would: answers to the calls waiting beside it to them, requests and
// notifications to the inbox. Then it puts the role back for a call that
// is waiting to take, or, when other calls still wait, hands it to the
// reader goroutine: with many calls in flight one reader hands each answer
// on, and no role passes from call to call.
//
// The reader goroutine reads while no call reads: from the start, when
// handed the role, and once no call has waited for quietAfter (so calls
// made one after another keep the role among themselves), and gives it up
// only when asked. A read interrupted loses nothing, and one interrupted
// by a deadline meant for someone else (an interrupt that came late) is
// read again. Once reading fails for good, whoever got the failure ends
// the connection, and no one reads again.
//
// On other streams (a WebSocket, a server's own stdin) the reader
// goroutine is the only reader, and hands every answer to its caller.

// quietAfter is how long the reader goroutine leaves the reading to calls
// after the last one stopped waiting: a message the other side sends
// unasked in that window waits for it that long at most.
const quietAfter = 2 * time.Millisecond

// ctxPoll is how long a call reading for its own answer looks at its
// context only between reads (see leadFor).
const ctxPoll = time.Millisecond

// read is the reader goroutine. It ends when reading has failed for good.
func (p *Peer) read() {
	defer close(p.readDone)
	if p.rd == nil {
		for {
			msg, err := p.s.Read()
			if err != nil {
				p.readFailed(err)
				return
			}
			p.route(msg)
		}
	}
	for {
		select {
		case <-p.bgTurn:
		case <-p.quiet.C:
			p.takeRole()
		case <-p.ending:
			// Calls are answered: read to the end.
			p.takeRole()
		}
		if !p.readEnded {
			p.readUntilAsked()
		}
		ended := p.readEnded
		p.lead <- struct{}{}
		if ended {
			return
		}
	}
}

// takeRole waits for the role, wherever it is put.
func (p *Peer) takeRole() {
	select {
	case <-p.lead:
	case <-p.bgTurn:
	}
}

// readUntilAsked reads, holding the role, until a call that waits asks for
// it, or reading fails for good.
func (p *Peer) readUntilAsked() {
	p.bgHolds.Store(true)
	defer p.bgHolds.Store(false)
	p.rd.SetReadDeadline(time.Time{})
	for {
		// Asked after the deadline was cleared: an interrupt after this is
		// seen by the next read, one before it here. A call that asked and
		// is no longer waiting has no use for the role.
		if p.asked.Swap(false) && p.waiting.Load() > 0 && !isClosed(p.ending) {
			return
		}
		msg, err := p.s.Read()
		switch {
		case err == nil:
			p.route(msg)
		case errors.Is(err, os.ErrDeadlineExceeded):
			p.rd.SetReadDeadline(time.Time{})
		default:
			p.readFailed(err)
			p.readEnded = true
			return
		}
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// interrupt cuts short the read under way, if any, or the next one.
func (p *Peer) interrupt() { p.rd.SetReadDeadline(time.Unix(1, 0)) }

// await waits for the answer to the call pc, which has been written:
// reading it itself when it is the only call waiting, until the answer
// comes (true), or until ctx ends or expired fires (false). deadline is
// the call's own (zero for none), the time expired fires.
func (p *Peer) await(ctx context.Context, pc *pendingCall, expired <-chan time.Time, deadline time.Time) (answer, bool) {
	if p.rd == nil {
		select {
		case a := <-pc.ch:
			return a, true
		case <-ctx.Done():
		case <-expired:
		}
		return answer{}, false
	}
	if p.waiting.Add(1) == 1 {
		p.asked.Store(true)
		if p.bgHolds.Load() {
			p.interrupt()
		}
	}
	defer func() {
		if p.waiting.Add(-1) == 0 {
			p.quiet.Reset(quietAfter)
		}
	}()
	select {
	case a := <-pc.ch:
		return a, true
	case <-p.lead:
		p.asked.Store(false) // whoever asked, a call reads now
		return p.leadFor(ctx, pc, deadline)
	case <-ctx.Done():
	case <-expired:
	}
	return answer{}, false
}

// leadFor reads, holding the role, for the call pc: until its answer comes
// (true), or ctx ends or deadline passes (false). It puts the role back.
//
// ctx's end interrupts the read through context.AfterFunc, three
// allocations, so that is armed only for a call not answered within
// ctxPoll: until then the read's deadline comes back that soon to look at
// ctx, and an answer that comes first costs nothing for it.
func (p *Peer) leadFor(ctx context.Context, pc *pendingCall, deadline time.Time) (answer, bool) {
	defer p.releaseRole()
	if p.readEnded {
		// The connection's end has answered every call.
		return <-pc.ch, true
	}
	until := deadline
	if ctx.Done() != nil {
		if t := time.Now().Add(ctxPoll); deadline.IsZero() || t.Before(deadline) {
			until = t
		}
	}
	p.rd.SetReadDeadline(until)
	for {
		select {
		case a := <-pc.ch:
			return a, true
		default:
		}
		if ctx.Err() != nil {
			return answer{}, false
		}
		if !until.IsZero() && !time.Now().Before(until) {
			if until.Equal(deadline) {
				return answer{}, false
			}
			// Past ctxPoll: ctx's end interrupts from now on.
			stop := context.AfterFunc(ctx, p.interrupt)
			defer stop()
			until = deadline
			p.rd.SetReadDeadline(until)
		}
		msg, err := p.s.Read()
		switch {
		case err == nil:
			p.route(msg)
		case errors.Is(err, os.ErrDeadlineExceeded):
			p.rd.SetReadDeadline(until)
		default:
			p.readFailed(err)
			p.readEnded = true
			return <-pc.ch, true
		}
	}
}

// releaseRole puts back the role a call held: for the reader goroutine when
// other calls wait, else free for the next call to take.
func (p *Peer) releaseRole() {
	if p.waiting.Load() > 1 && !p.readEnded {
		p.bgTurn <- struct{}{}
		return
	}
	p.lead <- struct{}{}
}

// route hands on one message read: an answer to the call waiting for it,
// a request or notification to the inbox.
func (p *Peer) route(msg []byte) {
	env, kind := parse(msg)
	switch kind {
	case kindResponse:
		p.answer(env)
	case kindRequest, kindNotification:
		r := &Request{Method: env.Method, Params: env.Params, id: env.ID, peer: p, size: len(msg)}
		if p.obs != nil && r.id != nil {
			r.read = time.Now()
		}
		p.enqueue(r)
	case kindInvalidRequest:
		p.limits.Log(&logInvalidRequest, slog.String("id", Cut(string(env.ID), 64)))
		p.refuse(&Request{id: env.ID, peer: p}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "Invalid Request: method must be a non-empty string"})
	default:
		p.noise.skip(p.log, msg)
	}
}

// readerOf returns s's interruptible read, if it has one that works.
func readerOf(s transport.Stream) transport.ReadDeadliner {
	rd, ok := s.(transport.ReadDeadliner)
	if !ok || rd.SetReadDeadline(time.Time{}) != nil {
		return nil
	}
	return rd
}
