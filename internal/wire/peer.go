package wire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpl-go/mcpl/internal/jsonrpc"
	"github.com/mcpl-go/mcpl/internal/lograte"
	"github.com/mcpl-go/mcpl/internal/transport"
)

// Options configures a Peer. The zero value is usable: no name, no handler
// (every inbound request is answered "method not found"), no deadline.
type Options struct {
	// Name is the other side's id ("discord"): it names it in every
	// failed call's error, and tags log lines.
	Name string
	// Handler receives inbound requests and notifications, in arrival
	// order. Nil answers every request with CodeMethodNotFound.
	Handler Handler
	// Context is what the handler's contexts derive from: they carry its
	// values, and end when it ends or the connection does. Nil means
	// context.Background().
	Context context.Context
	// Logger receives operator detail. Nil means slog.Default().
	Logger *slog.Logger
	// Timeout is the default deadline of a Call; 0 means none. A call can
	// override it with WithTimeout.
	Timeout time.Duration
	// Reconnecting reports whether this side will reconnect to the peer
	// when the connection drops. It is asked when a call fails on a closed
	// connection, for CallError.Reconnecting. Nil means it will not.
	Reconnecting func() bool
	// MaxQueued bounds the inbound requests and notifications waiting for
	// the handler (0 means DefaultMaxQueued), and MaxQueuedBytes the bytes
	// of the inbound messages this side holds: waiting for the handler,
	// being handled, or kept by it (Request.Hold); 0 means
	// DefaultMaxQueuedBytes. A message is always taken when none is held,
	// whatever its size (MaxMessageSize bounds that). Beyond either bound a
	// request is refused with CodeOverloaded and a notification dropped,
	// and the log says so once per 10 seconds with a count. The reader
	// never blocks and never writes: refusals go out through a writer of
	// their own, bounded, and beyond that are dropped and counted, so
	// answers to this side's calls keep flowing.
	MaxQueued      int
	MaxQueuedBytes int
	// WriteTimeout bounds each write that has no deadline of its own: an
	// answer, a notification, a call without one (0 means
	// DefaultWriteTimeout). A write the other side takes none of before
	// its deadline closes the connection (a peer that stops reading is
	// gone), with an operator log line; the call or notification fails as
	// CauseStalled.
	WriteTimeout time.Duration
	// Observer, if set, is told how each request ended, either way, for
	// metrics; nil tells no one.
	Observer Observer
}

// Defaults of Options' bounds.
const (
	DefaultMaxQueued      = 4096
	DefaultMaxQueuedBytes = 32 << 20
	DefaultWriteTimeout   = 10 * time.Second
)

// Peer is one end of a JSON-RPC connection.
type Peer struct {
	s       transport.Stream
	name    string
	log     *slog.Logger
	timeout time.Duration
	recon   func() bool
	handler Handler
	wtime   time.Duration // WriteTimeout
	limits  *lograte.Limiter

	// replies carries the answers the reader decides on (refusals) to
	// their writer, so the reader never writes.
	replies     chan refusal
	repliesDone chan struct{}

	nextID atomic.Int64

	mu         sync.Mutex
	pending    map[int64]*pendingCall
	abandoned  abandonedSet
	closed     bool
	byHost     bool  // this side ended the connection (Close, or a failure it acted on)
	hostClose  bool  // Close was called: this side's own close
	closeCause error // why the connection ended

	inbox     inbox
	owed      owedAnswers     // deferred answers not yet given
	ctx       context.Context // ends when the connection does; handlers get it
	cancel    context.CancelFunc
	wctx      context.Context // bounds answers' writes; ends when the stream closes
	wcancel   context.CancelFunc
	done      chan struct{} // closed when the reader and dispatcher are done
	readDone  chan struct{}
	noise     noiseLog
	closeNow  chan struct{} // closed by Close: no more waiting for owed answers
	closeOnce sync.Once
	faultOnce sync.Once      // the peer-fault log line
	closers   sync.WaitGroup // end's background stream close
	obs       Observer       // Options.Observer; nil for none
	timers    sync.Pool      // stopped *time.Timer for calls' deadlines
	calls     sync.Pool      // *pendingCall whose answer was taken
	bufs      sync.Pool      // *[]byte for requests once written

	// The reading role (read.go). rd is nil when the stream's read can't
	// be interrupted: the reader goroutine is then the only reader.
	rd        transport.ReadDeadliner
	lead      chan struct{} // holds the role while free for a call to take
	bgTurn    chan struct{} // holds the role handed to the reader goroutine
	waiting   atomic.Int32  // calls written and waiting for their answer
	asked     atomic.Bool   // a call waiting alone asked for the role
	bgHolds   atomic.Bool   // the reader goroutine holds the role
	quiet     *time.Timer   // fires quietAfter after waiting last fell to 0
	ending    chan struct{} // closed when the connection starts to end
	readEnded bool          // reading failed for good; guarded by the role
}

type pendingCall struct {
	method string
	ch     chan answer
}

// answer is what ends a pending call: an answer from the peer, or the
// connection's end (closed set; hostClose when it was this side's own
// Close).
type answer struct {
	result    json.RawMessage
	err       *jsonrpc.Error
	closed    bool
	hostClose bool
	why       closeWhy // for closed: why this side closed it, if it did
	// recon, for closed: whether this side would reconnect when the
	// connection closed, read then, not when the caller wakes (a
	// callback may have closed the session meanwhile).
	recon bool
}

// NewPeer starts a peer on s and begins reading. The peer owns s: it closes
// it when the connection ends.
func NewPeer(s transport.Stream, opts Options) *Peer {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if opts.Name != "" {
		log = log.With("server", opts.Name)
	}
	h := opts.Handler
	if h == nil {
		h = HandlerFunc(func(context.Context, *Request) (any, error) { return nil, ErrMethodNotFound })
	}
	recon := opts.Reconnecting
	if recon == nil {
		recon = func() bool { return false }
	}
	max := opts.MaxQueued
	if max <= 0 {
		max = DefaultMaxQueued
	}
	maxBytes := opts.MaxQueuedBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxQueuedBytes
	}
	wtime := opts.WriteTimeout
	if wtime <= 0 {
		wtime = DefaultWriteTimeout
	}
	p := &Peer{
		s:           s,
		name:        opts.Name,
		log:         log,
		timeout:     opts.Timeout,
		recon:       recon,
		handler:     h,
		wtime:       wtime,
		limits:      lograte.New(log, opts.Name),
		replies:     make(chan refusal, maxRefusals),
		repliesDone: make(chan struct{}),
		pending:     make(map[int64]*pendingCall),
		done:        make(chan struct{}),
		readDone:    make(chan struct{}),
		closeNow:    make(chan struct{}),
		obs:         opts.Observer,
	}
	if nr, ok := s.(NoiseReporter); ok && nr.ReportsNoise() {
		p.noise.reported = true
	}
	if p.rd = readerOf(s); p.rd != nil {
		p.lead = make(chan struct{}, 1)
		p.bgTurn = make(chan struct{}, 1)
		p.bgTurn <- struct{}{}
		p.quiet = time.NewTimer(time.Hour)
		p.quiet.Stop()
	}
	p.ending = make(chan struct{})
	p.inbox.init(max, maxBytes)
	p.owed.init()
	base := opts.Context
	if base == nil {
		base = context.Background()
	}
	p.ctx, p.cancel = context.WithCancel(base)
	p.wctx, p.wcancel = context.WithCancel(context.Background())
	go p.read()
	go p.dispatch()
	go p.writeRefusals()
	return p
}

// Name returns the peer's name.
func (p *Peer) Name() string { return p.name }

// Done is closed when the connection has ended and the peer's goroutines
// have finished.
func (p *Peer) Done() <-chan struct{} { return p.done }

// Err returns why the connection ended (nil while it is open): ErrClosedHere
// after Close, io.EOF when the peer closed it cleanly, or the transport's
// error.
func (p *Peer) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closeCause
}

// ClosedHere reports whether this side closed the connection (by Close,
// or because the peer sent a message over the size limit, or because a
// write broke off part way).
func (p *Peer) ClosedHere() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed && p.byHost
}

// CloseInfo returns the transport's account of how the connection ended.
func (p *Peer) CloseInfo() transport.CloseInfo { return p.s.CloseInfo() }

// owedGrace is how long a connection the other side ended stays open for
// answers a handler deferred and has not given yet.
const owedGrace = time.Second

// Sync waits until every message received before it has been handed to
// the handler: a barrier in the inbound queue, behind what the reader has
// queued. A handler that defers its answer counts as handed. It returns nil
// at once when the connection has ended, and ctx's error when ctx ends
// first.
func (p *Peer) Sync(ctx context.Context) error {
	reached := make(chan struct{})
	if !p.inbox.pushBarrier(reached) {
		return nil
	}
	select {
	case <-reached:
	case <-p.ctx.Done():
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// ErrClosedHere is Err after this side closed the connection.
var ErrClosedHere = errors.New("wire: connection closed on this side")

// Close closes the connection. Pending calls fail as closed on this side
// (CauseClosedHere), as does every call after it (even when the
// connection had already ended), and inbound messages still queued are
// dropped. It waits for the transport to close (for a subprocess, for it to
// exit) and for the peer's goroutines to finish. It must not be called from a
// Handler.
//
// A close this side makes because the connection failed (a message over the
// size limit, a write that broke off) is not this side's own close: its
// calls read as a closed connection, with whether this side reconnects.
func (p *Peer) Close() error {
	p.mu.Lock()
	if !p.hostClose {
		close(p.closeNow)
	}
	p.hostClose = true
	p.mu.Unlock()
	p.shutdown(ErrClosedHere, true)
	// Whether or not the connection had already ended, stop now.
	p.cancel()
	p.wcancel()
	p.inbox.close(true)
	p.s.Close()
	<-p.done
	return nil
}

// shutdown marks the connection closed and fails every pending call. The
// first caller's cause stands. When this side closes, the stream closes at
// once and queued inbound messages are dropped; when the peer ends the
// connection, the handler still gets what was already received, with its
// context ended, and its answers are written while the stream takes them,
// those it deferred too for up to owedGrace; then the stream closes.
func (p *Peer) shutdown(cause error, byHost bool) { p.end(cause, byHost, false) }

// end is shutdown, with closeStream set when the other side ended the
// connection in a way that leaves nothing to read or write (a write found
// its end closed): the stream is then closed at once, in the background,
// as a close can wait for a process to exit.
func (p *Peer) end(cause error, byHost, closeStream bool) {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.byHost = byHost
		p.closeCause = cause
		hostClose := p.hostClose
		pending := p.pending
		p.pending = nil
		p.mu.Unlock()
		if len(pending) > 0 {
			p.logPendingAtClose(pending, byHost, hostClose, cause)
		}
		why, recon := closeReason(cause, byHost), len(pending) > 0 && p.recon()
		for _, pc := range pending {
			pc.ch <- answer{closed: true, hostClose: hostClose, why: why, recon: recon}
		}
		close(p.ending)
		if p.rd != nil {
			// A call reading for its answer has it now.
			p.interrupt()
		}
		// Handlers' context ends now, either way, so none waits on a
		// connection that is gone.
		p.cancel()
		if byHost {
			p.wcancel()
			p.inbox.close(true)
			p.s.Close()
		} else {
			p.inbox.close(false)
			if closeStream {
				// Counted before the goroutine below can wait for it.
				p.closers.Go(func() { p.s.Close() })
			}
		}
		go func() {
			<-p.readDone
			p.inbox.wait()
			if !byHost {
				// Answers a handler deferred still go out if they come
				// soon: the other side may still read.
				t := time.NewTimer(owedGrace)
				select {
				case <-p.owed.paid():
				case <-t.C:
				case <-p.closeNow:
				}
				t.Stop()
			}
			p.wcancel()
			<-p.repliesDone
			p.s.Close()
			p.limits.Close()
			p.closers.Wait()
			close(p.done)
		}()
	})
}

// logPendingAtClose logs the requests a close left unanswered, each as
// "method#id", in the order they were made.
func (p *Peer) logPendingAtClose(pending map[int64]*pendingCall, byHost, hostClose bool, cause error) {
	ids := slices.Sorted(maps.Keys(pending))
	reqs := make([]string, 0, len(ids))
	for _, id := range ids {
		reqs = append(reqs, fmt.Sprintf("%s#%d", pending[id].method, id))
	}
	if hostClose {
		p.log.Warn("this side closed the connection with requests pending",
			slog.Bool("closed_here", true), slog.Any("unanswered", reqs))
		return
	}
	attrs := []any{slog.Bool("closed_here", byHost), slog.Any("unanswered", reqs)}
	for _, a := range p.s.CloseInfo().LogAttrs() {
		attrs = append(attrs, a)
	}
	if byHost && cause != nil {
		// What made this side close it; the transport knows nothing of it.
		attrs = append(attrs, slog.String("error", cause.Error()))
	}
	p.log.Warn("connection closed with requests pending", attrs...)
}

func (p *Peer) readFailed(err error) {
	var tl *transport.TooLargeError
	switch {
	case errors.As(err, &tl):
		p.log.Error("message over the size limit; closing the connection",
			slog.Int("limit_bytes", tl.Limit), slog.Int("seen_bytes", tl.Size))
		p.shutdown(err, true)
	case errors.As(err, new(*transport.PeerFaultError)):
		p.peerFault(err)
	case errors.Is(err, transport.ErrClosed):
		// After Close, shutdown has already run; otherwise the stream
		// closed itself.
		p.shutdown(err, true)
	default:
		p.shutdown(err, false)
	}
	p.noise.flush(p.log)
}

// writeFoundClosed ends the connection when a write finds the stream
// closed before the reader has: the other side closed its end (a process
// that exited or closed its stdin), or the stream refused a peer fault.
// The connection is over now, not when the reader gets to it, so no one
// reads it as open meanwhile.
func (p *Peer) writeFoundClosed(err error) {
	p.mu.Lock()
	closed := p.closed || p.hostClose
	p.mu.Unlock()
	switch {
	case closed:
	case errors.As(err, new(*transport.PeerFaultError)):
		p.peerFault(err)
	default:
		// The other side takes nothing more: the stream closes now, so a
		// reader held by something that keeps the other end open (a
		// process's stdout) does not hold the connection's end.
		p.end(err, false, true)
	}
}

// peerFault closes the connection on a peer that broke the transport's
// rules (err wraps a *transport.PeerFaultError), as this side's doing: the
// reader and a write may both find it, and the first closes.
func (p *Peer) peerFault(err error) {
	p.faultOnce.Do(func() {
		p.log.Error("the other side broke the transport's rules; closing the connection",
			slog.Bool("closed_here", true), slog.String("error", err.Error()))
	})
	p.shutdown(err, true)
}

// answer routes a response to the call waiting for it.
func (p *Peer) answer(env envelope) {
	id, ok := ourID(env.ID)
	p.mu.Lock()
	var pc *pendingCall
	if ok {
		pc = p.pending[id]
		delete(p.pending, id)
	}
	late := ok && pc == nil && p.abandoned.has(id)
	p.mu.Unlock()
	if pc == nil {
		if late {
			p.limits.Log(&logLateAnswer, slog.Int64("id", id))
		} else {
			p.limits.Log(&logStrayAnswer, slog.String("id", Cut(string(env.ID), 64)))
		}
		return
	}
	a := answer{result: env.Result}
	if env.Error != nil {
		a.err = errorObject(env.Error)
	}
	pc.ch <- a
}

// CallOption adjusts one call.
type CallOption func(*callOpts)

type callOpts struct {
	timeout time.Duration
}

// WithTimeout sets this call's deadline, overriding the peer's default; 0
// means none.
func WithTimeout(d time.Duration) CallOption {
	return func(o *callOpts) { o.timeout = d }
}

// Call sends a request and waits for its answer, decoding the result into
// result (unless result is nil). A failure is a *CallError, whose Outcome
// says what is known of the request's effect. When ctx ends, the call ends
// at once, or within a millisecond if it began reading its own answer
// less than a millisecond before (read.go).
//
// A call that gives up on a request it wrote (ctx ended, or its deadline
// passed) tells the other side, on a connection still open, with MCP's
// notifications/cancelled naming the request's id and why, before it
// returns: a write bounded to a second, dropped with a log line beyond
// it. initialize is never cancelled. An answer that comes after is
// dropped, as for any abandoned call.
func (p *Peer) Call(ctx context.Context, method string, params, result any, opts ...CallOption) (err error) {
	if p.obs != nil {
		start := time.Now()
		defer func() { p.obs.Called(method, outcomeOf(err), time.Since(start)) }()
	}
	o := callOpts{timeout: p.timeout}
	for _, f := range opts {
		f(&o)
	}
	raw, err := encodeValue(params)
	if err != nil {
		return &CallError{Outcome: NotSent, Cause: CauseEncodeFailed, Server: p.name, Method: method, Err: err}
	}
	id := p.nextID.Add(1)
	buf := p.getBuf(envelopeRoom + len(method) + len(raw))
	body := appendRequest((*buf)[:0], id, method, raw)
	// The *CallError is made only when the call fails: a call that is
	// answered allocates none.
	ce := func() *CallError { return &CallError{Server: p.name, Method: method, ID: id} }

	pc := p.getCall(method)
	p.mu.Lock()
	if p.closed || p.hostClose {
		hostClose := p.hostClose
		p.mu.Unlock()
		return p.notSentClosed(ce(), hostClose)
	}
	p.pending[id] = pc
	p.mu.Unlock()

	// The call's own deadline is a timer, and the write's a deadline the
	// stream keeps (transport.WriteBy): no context is derived per call.
	var (
		expired  <-chan time.Time
		due      time.Time // the call's own deadline; zero for none
		deadline time.Time // the write's own; zero leaves it to ctx
		bound    time.Duration
	)
	if o.timeout > 0 {
		t := p.getTimer(o.timeout)
		defer p.putTimer(t)
		expired = t.C
		due = time.Now().Add(o.timeout)
		deadline, bound = due, o.timeout
	} else if _, ok := ctx.Deadline(); !ok {
		// The write has a deadline whatever the call's: a peer that stops
		// reading must not hold a call that has none forever.
		deadline, bound = time.Now().Add(p.wtime), p.wtime
	}
	err = transport.WriteBy(p.s, ctx, body, deadline)
	*buf = body // a Stream keeps nothing of what it was given
	p.putBuf(buf)
	if err != nil {
		p.mu.Lock()
		_, stillPending := p.pending[id]
		delete(p.pending, id)
		closed, hostClose := p.closed || p.hostClose || !stillPending, p.hostClose
		p.mu.Unlock()
		// Not pending: the connection closed while the write was under
		// way, and the close has already answered this call.
		return p.writeFailed(ce(), err, ctx, ownDeadline(ctx, err), bound, closed, hostClose)
	}

	if a, ok := p.await(ctx, pc, expired, due); ok {
		p.putCall(pc)
		return p.finish(ce, a, result)
	}
	// Abandoned, unless the answer raced in.
	p.mu.Lock()
	if p.pending[id] == nil {
		p.mu.Unlock()
		a := <-pc.ch
		p.putCall(pc)
		return p.finish(ce, a, result)
	}
	delete(p.pending, id)
	p.abandoned.add(id)
	open := !p.closed && !p.hostClose
	p.mu.Unlock()
	e := ce()
	e.Outcome = NoResponse
	if ctx.Err() == nil {
		e.Err, e.Cause, e.Timeout = context.DeadlineExceeded, CauseDeadline, o.timeout
		p.log.Warn("request deadline passed; abandoned here",
			slog.String("method", method), slog.Int64("id", id), slog.Int64("ms", o.timeout.Milliseconds()))
	} else {
		e.Err, e.Cause = ctx.Err(), CauseCanceled
		p.log.Info("request abandoned by its caller", slog.String("method", method), slog.Int64("id", id))
	}
	if open && method != methodInitialize {
		p.sendCancelled(method, id, cancelReason(e))
	}
	return e
}

// notSentClosed fails a call that was not sent because the connection is
// closed: hostClose when this side's own Close closed it.
func (p *Peer) notSentClosed(ce *CallError, hostClose bool) error {
	ce.Outcome = NotSent
	if hostClose {
		ce.Cause = CauseClosedHere
		return ce
	}
	p.mu.Lock()
	why := closeReason(p.closeCause, p.byHost)
	p.mu.Unlock()
	ce.Cause, ce.Timeout, ce.Reconnecting = why.cause, why.after, p.recon()
	if why.err != nil {
		ce.Err = why.err
	}
	return ce
}

// closeWhy is why a connection closed, as a call that failed on it reads:
// CauseClosed, or the failure that made this side close it.
type closeWhy struct {
	cause Cause
	after time.Duration // for CauseStalled
	err   error         // the close cause, for CauseTooLarge and CauseStalled
}

// closeReason classifies a connection's close cause.
func closeReason(cause error, byHost bool) closeWhy {
	var tl *transport.TooLargeError
	var st *StallError
	switch {
	case !byHost:
	case errors.As(cause, &tl):
		return closeWhy{cause: CauseTooLarge, err: tl}
	case errors.As(cause, &st):
		return closeWhy{cause: CauseStalled, after: st.After, err: st}
	}
	return closeWhy{cause: CauseClosed}
}

// StallError is Err after this side closed the connection because the
// other side took none of a message for After: it has stopped reading.
type StallError struct{ After time.Duration }

func (e *StallError) Error() string {
	return "the other side took none of a message within " + ShortDuration(e.After)
}

// stalled closes a connection whose other side took none of a write (what,
// for method) before its deadline d: it has stopped reading.
func (p *Peer) stalled(d time.Duration, what, method string) *StallError {
	p.log.Error("the other side took none of a message before its deadline, so it has stopped reading; closing the connection",
		slog.Bool("closed_here", true), slog.String("message", what), slog.String("method", Cut(method, 100)),
		slog.String("waited", ShortDuration(d)))
	st := &StallError{After: d}
	p.shutdown(st, true)
	return st
}

// writeFailed turns a failed write into the call's error, or the
// notification's (ce.ID 0). ctx is the caller's context; ownDeadline says
// the write's own deadline ended it, which is bound: the call's, or
// WriteTimeout. closed says the connection had closed meanwhile, and
// hostClose whether by Close.
func (p *Peer) writeFailed(ce *CallError, err error, ctx context.Context, ownDeadline bool, bound time.Duration, closed, hostClose bool) error {
	what := "request"
	if ce.ID == 0 {
		what = "notification"
	}
	attrs := []any{slog.String("method", Cut(ce.Method, 100))}
	if ce.ID != 0 {
		attrs = append(attrs, slog.Int64("id", ce.ID))
	}
	stall := func(o Outcome) error {
		// The peer took none, or part, of the message before the
		// write's own deadline: it has stopped reading (a message larger
		// than a pipe's buffer; any WebSocket write that times out), so
		// the connection is of no more use.
		ce.Err = p.stalled(bound, what, ce.Method)
		ce.Outcome, ce.Cause, ce.Timeout, ce.Reconnecting = o, CauseStalled, bound, p.recon()
		return ce
	}
	ce.Err = err
	switch {
	case errors.Is(err, transport.ErrPartialWrite) && ownDeadline:
		return stall(NoResponse)
	case errors.Is(err, transport.ErrPartialWrite):
		// Part of it may have reached the peer, and the stream closed
		// itself: the outcome is unknown.
		ce.Outcome = NoResponse
		if ctx.Err() != nil {
			ce.Cause = CauseCanceled
		} else {
			ce.Cause, ce.Reconnecting = CauseClosed, p.recon()
		}
		p.log.Warn(what+" written in part; the connection is closed", append(attrs, slog.String("error", err.Error()))...)
		p.shutdown(err, true)
		return ce
	case closed || errors.Is(err, transport.ErrClosed):
		if !closed {
			p.writeFoundClosed(err)
		}
		return p.notSentClosed(ce, hostClose)
	case errors.Is(err, transport.ErrStalled) && ownDeadline:
		return stall(NotSent)
	case ctx.Err() != nil:
		// The caller gave up before it was written.
		ce.Outcome, ce.Cause = NotSent, CauseCanceled
		p.log.Info(what+" abandoned by its caller before it was written", attrs...)
		return ce
	case ownDeadline:
		// The deadline passed while the write waited its turn.
		ce.Outcome, ce.Cause, ce.Timeout = NotSent, CauseDeadline, bound
		p.log.Warn(what+" deadline passed before it was written", append(attrs, slog.Int64("ms", bound.Milliseconds()))...)
		return ce
	}
	ce.Outcome, ce.Cause = NotSent, CauseWriteFailed
	p.log.Warn(what+" not written: the transport refused it", append(attrs, slog.String("error", err.Error()))...)
	return ce
}

// finish turns an answer into the call's result or error; newCE makes the
// error, only when there is one.
func (p *Peer) finish(newCE func() *CallError, a answer, result any) error {
	var ce *CallError
	if a.closed || a.err != nil {
		ce = newCE()
	}
	switch {
	case a.closed:
		ce.Outcome = NoResponse
		if a.hostClose {
			ce.Cause = CauseClosedHere
		} else {
			ce.Cause, ce.Timeout, ce.Reconnecting = a.why.cause, a.why.after, a.recon
			if a.why.err != nil {
				ce.Err = a.why.err
			}
		}
		return ce
	case a.err != nil:
		ce.Outcome, ce.Cause = ErrorResponse, CauseErrorAnswer
		ce.Answer = a.err
		p.log.Info("answered with an error",
			slog.String("method", ce.Method), slog.Int64("id", ce.ID), slog.Int64("code", a.err.Code),
			slog.String("message", Cut(a.err.Message, 500)))
		return ce
	}
	if result == nil {
		return nil
	}
	if raw, ok := result.(*json.RawMessage); ok {
		*raw = append((*raw)[:0], a.result...)
		return nil
	}
	if err := decodeResult(a.result, result); err != nil {
		ce = newCE()
		ce.Outcome, ce.Cause, ce.Err = BadResponse, CauseBadAnswer, err
		p.log.Warn("the answer could not be decoded",
			slog.String("method", ce.Method), slog.Int64("id", ce.ID), slog.String("error", err.Error()))
		return ce
	}
	return nil
}

// Notify sends a notification. A notification on a closed connection is
// not sent and returns the same *CallError a call would.
func (p *Peer) Notify(ctx context.Context, method string, params any) error {
	raw, err := encodeValue(params)
	if err != nil {
		return &CallError{Outcome: NotSent, Cause: CauseEncodeFailed, Server: p.name, Method: method, Err: err}
	}
	body := appendRequest(make([]byte, 0, envelopeRoom+len(method)+len(raw)), 0, method, raw)
	ce := &CallError{Server: p.name, Method: method}
	p.mu.Lock()
	closed, hostClose := p.closed || p.hostClose, p.hostClose
	p.mu.Unlock()
	if closed {
		return p.notSentClosed(ce, hostClose)
	}
	// The write is bounded by WriteTimeout, or sooner by ctx.
	err = transport.WriteBy(p.s, ctx, body, time.Now().Add(p.wtime))
	if err == nil {
		return nil
	}
	p.mu.Lock()
	closed, hostClose = p.closed || p.hostClose, p.hostClose
	p.mu.Unlock()
	return p.writeFailed(ce, err, ctx, ownDeadline(ctx, err), p.wtime, closed, hostClose)
}

// abandonedSet remembers the ids of recently abandoned calls, so a late
// answer is told apart from a stray one in the log. It is bounded.
type abandonedSet struct {
	ids  map[int64]struct{}
	ring []int64
	next int
}

const abandonedKeep = 4096

func (a *abandonedSet) add(id int64) {
	if a.ids == nil {
		a.ids = make(map[int64]struct{})
		a.ring = make([]int64, 0, abandonedKeep)
	}
	if len(a.ring) < abandonedKeep {
		a.ring = append(a.ring, id)
	} else {
		delete(a.ids, a.ring[a.next])
		a.ring[a.next] = id
		a.next = (a.next + 1) % abandonedKeep
	}
	a.ids[id] = struct{}{}
}

func (a *abandonedSet) has(id int64) bool {
	_, ok := a.ids[id]
	return ok
}
