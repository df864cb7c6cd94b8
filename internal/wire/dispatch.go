package wire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/mcpl-go/mcpl/internal/jsonrpc"
	"github.com/mcpl-go/mcpl/internal/term"
	"github.com/mcpl-go/mcpl/internal/transport"
)

// Handler answers the other side's requests and takes its notifications.
// The peer calls it from one goroutine, in arrival order; the next message
// waits until it returns, so a handler with long work hands it off (see
// Request.Defer). For a request, the returned result is the answer; an
// *jsonrpc.Error (protocol.Error, to the packages above) is sent as that
// JSON-RPC error; ErrMethodNotFound becomes jsonrpc.CodeMethodNotFound;
// ErrNoReply sends no answer; any other error, or a panic, becomes jsonrpc.CodeInternalError with an
// operator log line. For a notification the result is ignored and an error
// logged. A handler must not call the peer's Close itself; it may start a
// goroutine that does.
type Handler interface {
	Serve(ctx context.Context, req *Request) (result any, err error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req *Request) (any, error)

// Serve implements Handler.
func (f HandlerFunc) Serve(ctx context.Context, req *Request) (any, error) { return f(ctx, req) }

// ErrMethodNotFound answers a request for a method the handler does not know.
var ErrMethodNotFound = errors.New("method not found")

// ErrNoReply, returned by a handler or given to a deferred reply, sends no
// answer at all: for a request the other side cancelled, which MCP says
// is not to be answered. The request counts as answered; an Observer
// hears it as "unanswered".
var ErrNoReply = errors.New("wire: no reply")

// Mux routes requests by method to handlers, and answers the rest with
// CodeMethodNotFound.
type Mux struct {
	mu sync.RWMutex
	m  map[string]Handler
}

// NewMux returns an empty Mux.
func NewMux() *Mux { return &Mux{m: make(map[string]Handler)} }

// Handle registers h for method, replacing any earlier one.
func (x *Mux) Handle(method string, h Handler) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.m[method] = h
}

// HandleFunc registers f for method.
func (x *Mux) HandleFunc(method string, f func(ctx context.Context, req *Request) (any, error)) {
	x.Handle(method, HandlerFunc(f))
}

// Serve implements Handler.
func (x *Mux) Serve(ctx context.Context, req *Request) (any, error) {
	x.mu.RLock()
	h := x.m[req.Method]
	x.mu.RUnlock()
	if h == nil {
		return nil, ErrMethodNotFound
	}
	return h.Serve(ctx, req)
}

// Request is an inbound request or notification.
type Request struct {
	Method string
	Params json.RawMessage

	id       json.RawMessage // nil for a notification
	peer     *Peer
	barrier  chan struct{} // set for Sync's marker, which is closed, not handled
	deferred bool
	owed     bool // counted in the peer's owed answers until answered
	once     sync.Once
	size     int       // the message's bytes, counted against MaxQueuedBytes
	held     bool      // Hold was called: the handler releases the bytes
	release  func()    // Hold's release
	read     time.Time // when it was read, for Options.Observer
}

// Hold keeps the message counted against the connection's inbound budget
// (Options.MaxQueuedBytes) after the handler returns, until release is
// called: for a message the handler keeps, to decide on later. Call it
// from the handler; release may be called from any goroutine, and more
// than once.
func (r *Request) Hold() (release func()) {
	if !r.held {
		r.held = true
		var once sync.Once
		r.release = func() { once.Do(func() { r.peer.inbox.release(r.size) }) }
	}
	return r.release
}

// IsNotification reports whether the message expects no answer.
func (r *Request) IsNotification() bool { return r.id == nil }

// ID returns the request's id as the other side sent it (nil for a
// notification).
func (r *Request) ID() json.RawMessage { return r.id }

// Defer hands the answer off: the handler returns at once (its return
// values are then ignored) and whoever holds the returned function calls it
// exactly once, from any goroutine, with the result or the error. Later
// calls do nothing. For a notification, the function does nothing.
//
// Defer may be called again, from whoever the request was handed to after
// its handler returned (a message held until the policy settles is
// deferred as it is held, then decided on another goroutine, whose
// consumer defers it too): a later call changes nothing and returns the
// same reply, so it doesn't race with the dispatcher that read the first.
func (r *Request) Defer() func(result any, err error) {
	if !r.deferred {
		r.deferred = true
		if r.id != nil && !r.owed {
			r.owed = true
			r.peer.owed.add()
		}
	}
	return func(result any, err error) { r.reply(result, err) }
}

// reply sends the answer once.
func (r *Request) reply(result any, err error) {
	if r.id == nil {
		return
	}
	r.once.Do(func() {
		r.peer.respond(r, result, err)
		if r.owed {
			r.peer.owed.done()
		}
	})
}

// respond writes the answer to an inbound request.
func (p *Peer) respond(r *Request, result any, err error) {
	if errors.Is(err, ErrNoReply) {
		if p.obs != nil {
			p.obs.Answered(r.Method, "unanswered", sinceRead(r))
		}
		return
	}
	var body []byte
	var merr error
	if err != nil {
		var e *jsonrpc.Error
		switch {
		case errors.As(err, &e) && e != nil:
		case errors.Is(err, ErrMethodNotFound):
			e = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + Cut(r.Method, 200)}
		default:
			p.limits.Log(&logHandlerFailed, slog.String("method", Cut(r.Method, 100)),
				slog.String("id", Cut(string(r.id), 64)), slog.String("error", err.Error()))
			e = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
		}
		body, merr = json.Marshal(outError{JSONRPC: "2.0", ID: r.id, Error: e})
	} else {
		body, merr = marshalResult(r.id, result)
	}
	if merr != nil {
		p.log.Error("handler's result could not be encoded", slog.String("method", Cut(r.Method, 100)), slog.String("error", merr.Error()))
		body, _ = json.Marshal(outError{JSONRPC: "2.0", ID: r.id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}})
	}
	werr := transport.WriteBy(p.s, p.wctx, body, time.Now().Add(p.wtime))
	if p.obs != nil {
		outcome := "ok"
		if err != nil {
			outcome = "error"
		}
		p.obs.Answered(r.Method, outcome, sinceRead(r))
	}
	if werr != nil && p.wctx.Err() == nil {
		switch {
		case errors.Is(werr, transport.ErrStalled), errors.Is(werr, transport.ErrPartialWrite) && ownDeadline(p.wctx, werr):
			// WriteTimeout passed with none, or part, of it taken.
			p.stalled(p.wtime, "answer", r.Method)
			return
		case errors.Is(werr, transport.ErrClosed):
			p.writeFoundClosed(werr)
			return
		}
		p.limits.Log(&logAnswerNotWritten, slog.String("method", Cut(r.Method, 100)), slog.String("error", werr.Error()))
	}
}

// sinceRead is how long ago r was read, for Options.Observer.
func sinceRead(r *Request) time.Duration {
	if r.read.IsZero() {
		return 0
	}
	return time.Since(r.read)
}

// marshalResult encodes a result answer. A result whose MarshalJSON panics
// is contained as an encoding error, as a handler's panic is.
func marshalResult(id json.RawMessage, result any) (body []byte, err error) {
	defer func() {
		if v := recover(); v != nil {
			body, err = nil, fmt.Errorf("panic encoding the result: %v", v)
		}
	}()
	raw, err := encodeValue(result)
	if err != nil {
		return nil, err
	}
	if raw == nil {
		raw = json.RawMessage("null")
	}
	return appendResult(nil, id, raw), nil
}

// enqueue queues an inbound message for the handler, or refuses it when the
// queue is full (by count or by bytes).
func (p *Peer) enqueue(r *Request) {
	if p.inbox.push(r) {
		return
	}
	if r.IsNotification() {
		p.limits.Log(&logQueueFullNotification, slog.String("method", Cut(r.Method, 100)))
		return
	}
	p.limits.Log(&logQueueFullRequest, slog.String("method", Cut(r.Method, 100)))
	p.refuse(r, &jsonrpc.Error{Code: CodeOverloaded, Message: "request refused: too many requests are waiting; try again later"})
}

// maxRefusals bounds the refusals waiting for their writer; beyond it a
// refusal is dropped (and counted in the log).
const maxRefusals = 64

// maxRefusedID bounds the id a refusal echoes: a request with a longer id
// is dropped rather than answered, so refusals stay small.
const maxRefusedID = 1024

// refusal is an answer the reader decided on.
type refusal struct {
	r   *Request
	err *jsonrpc.Error
}

// refuse hands an error answer for r to the refusals' writer, keeping
// none of r's params; it never blocks: when the writer is behind, the
// refusal is dropped and counted.
func (p *Peer) refuse(r *Request, e *jsonrpc.Error) {
	slim := &Request{Method: Cut(r.Method, 100), id: r.id, peer: p}
	if len(r.id) > maxRefusedID {
		p.limits.Log(&logRefusalDropped, slog.String("method", slim.Method), slog.String("why", "its id is too long to echo"))
		return
	}
	select {
	case p.replies <- refusal{r: slim, err: e}:
	default:
		p.limits.Log(&logRefusalDropped, slog.String("method", slim.Method), slog.String("why", "too many refusals are waiting to be written"))
	}
}

// writeRefusals writes the reader's refusals until the connection's writes
// end.
func (p *Peer) writeRefusals() {
	defer close(p.repliesDone)
	for {
		select {
		case f := <-p.replies:
			f.r.reply(nil, f.err)
		case <-p.wctx.Done():
			return
		}
	}
}

// dispatch runs the handler on queued messages, in order, until the
// connection ends.
func (p *Peer) dispatch() {
	defer p.inbox.finished()
	for {
		r, ok := p.inbox.pop()
		if !ok {
			return
		}
		if r.barrier != nil {
			close(r.barrier)
			continue
		}
		p.handle(r)
	}
}

func (p *Peer) handle(r *Request) {
	var (
		result any
		err    error
	)
	func() {
		defer func() {
			if v := recover(); v != nil {
				p.log.Error("handler panicked", slog.String("method", Cut(r.Method, 100)),
					slog.String("id", Cut(string(r.id), 64)),
					slog.String("panic", fmt.Sprint(v)), slog.String("stack", string(debug.Stack())))
				result, err = nil, fmt.Errorf("panic: %v", v)
				r.deferred = false
				if r.held {
					// Whatever kept it, a panicking handler does not
					// keep its bytes counted.
					r.release()
				}
			}
		}()
		result, err = p.handler.Serve(p.ctx, r)
	}()
	if !r.held {
		p.inbox.release(r.size)
	}
	if r.IsNotification() {
		if err != nil && !errors.Is(err, ErrMethodNotFound) {
			p.limits.Log(&logNotificationFailed, slog.String("method", Cut(r.Method, 100)), slog.String("error", err.Error()))
		}
		return
	}
	if !r.deferred {
		r.reply(result, err)
	}
}

// inbox is an unbounded-looking, bounded queue between the reader and the
// dispatcher: push never blocks.
type inbox struct {
	mu       sync.Mutex
	items    []*Request
	max      int
	maxBytes int
	bytes    int           // of the messages queued, being handled or held
	ready    chan struct{} // signalled when items arrive
	closed   bool
	done     chan struct{} // closed when the dispatcher has finished
}

func (q *inbox) init(max, maxBytes int) {
	q.max, q.maxBytes = max, maxBytes
	q.ready = make(chan struct{}, 1)
	q.done = make(chan struct{})
}

// push queues r unless the queue is full by count or by bytes; a message
// is taken whatever its size when nothing is held.
func (q *inbox) push(r *Request) bool {
	q.mu.Lock()
	full := len(q.items) >= q.max || (q.bytes > 0 && q.bytes+r.size > q.maxBytes)
	if closed := q.closed; closed || full {
		q.mu.Unlock()
		return closed // a closed queue swallows quietly
	}
	q.items = append(q.items, r)
	q.bytes += r.size
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return true
}

// pushBarrier queues a Sync marker, whatever the bound; it reports false
// when the queue is closed.
func (q *inbox) pushBarrier(reached chan struct{}) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, &Request{barrier: reached})
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return true
}

func (q *inbox) pop() (*Request, bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			r := q.items[0]
			q.items[0] = nil
			q.items = q.items[1:]
			q.mu.Unlock()
			return r, true
		}
		if q.closed {
			q.mu.Unlock()
			return nil, false
		}
		q.mu.Unlock()
		<-q.ready
	}
}

// close stops the queue taking more; discard drops what it holds, else pop
// returns it first.
func (q *inbox) close(discard bool) {
	q.mu.Lock()
	q.closed = true
	if discard {
		q.items = nil
	}
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// release uncounts n bytes of a message handled or let go.
func (q *inbox) release(n int) {
	q.mu.Lock()
	q.bytes -= n
	q.mu.Unlock()
}

func (q *inbox) finished() { close(q.done) }
func (q *inbox) wait()     { <-q.done }

// noiseLog logs the lines the other side writes that are not JSON-RPC
// messages (a server's banner or debug output on its stdout, garbage),
// once per connection where an operator sees it and boundedly below:
//
//   - the first at WARN, with its size and an escaped preview of at most
//     noisePreview bytes (term.Line: no control, bidirectional or
//     invisible character of it reaches the log raw);
//   - the next ones, up to noiseLogged in all, at DEBUG one by one, the
//     same way, then one DEBUG line saying the rest are only counted;
//   - when the connection ends, if more than one came, one INFO line
//     with how many lines and bytes were skipped in all.
//
// Nothing of a skipped line is kept past its logging: a flood of garbage
// costs a count, not memory (the stream holds one line at a time, at
// most its message size limit). On a stream that is a NoiseReporter
// whose owner reports the lines itself, the first is logged at DEBUG like
// the rest, and the total too.
type noiseLog struct {
	n        int
	bytes    int64
	reported bool
}

// A NoiseReporter is a stream whose owner counts the lines that are not
// JSON-RPC messages and tells the operator of them itself (mcplhost probe
// does, in its report). When ReportsNoise is true the peer logs them at
// debug only.
type NoiseReporter interface {
	ReportsNoise() bool
}

const (
	noiseLogged  = 20
	noisePreview = 80
)

func (l *noiseLog) skip(log *slog.Logger, msg []byte) {
	l.n++
	l.bytes += int64(len(msg))
	switch {
	case l.n == 1 && !l.reported:
		log.Warn("skipped a line that is not a JSON-RPC message",
			slog.String("line", term.Line(Cut(string(msg), noisePreview))), slog.Int("bytes", len(msg)),
			slog.String("then", "later ones on this connection are counted, their total logged at info when it ends"))
	case l.n <= noiseLogged:
		log.Debug("skipped a line that is not a JSON-RPC message", slog.String("line", term.Line(Cut(string(msg), noisePreview))), slog.Int("bytes", len(msg)))
	case l.n == noiseLogged+1:
		log.Debug("skipping further lines that are not JSON-RPC messages without logging each")
	}
}

func (l *noiseLog) flush(log *slog.Logger) {
	level := slog.LevelInfo
	if l.reported {
		level = slog.LevelDebug
	}
	if l.n > 1 {
		log.Log(context.Background(), level, "lines skipped as not JSON-RPC messages", slog.Int("count", l.n), slog.Int64("bytes", l.bytes))
	}
}

// owedAnswers counts the answers handlers deferred and have not yet given,
// so that a connection the other side ended still takes them for a while.
type owedAnswers struct {
	mu   sync.Mutex
	n    int
	none chan struct{} // closed while n is 0
}

func (o *owedAnswers) init() {
	o.none = make(chan struct{})
	close(o.none)
}

func (o *owedAnswers) add() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == 0 {
		o.none = make(chan struct{})
	}
	o.n++
}

func (o *owedAnswers) done() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n--
	if o.n == 0 {
		close(o.none)
	}
}

// paid is closed once no answer is owed.
func (o *owedAnswers) paid() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.none
}
