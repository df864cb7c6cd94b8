// Package channels keeps the host's channel decisions and carries them out
// (SPEC §14, RFC-011, seeds/000): the registrations each server makes, the
// durable decision of every channel (open or closed, and who decided), one
// serial lifecycle lane per channel that sends channels/open and
// channels/close, the put-back of an incidental open that failed, the
// validation of channels/incoming, and the channel tools an agent calls.
//
// It is a pure decision core (core.go: the rules; machine.go, lane.go,
// open.go, decide.go, register.go: the state machine that applies them,
// stepped by events, doing no I/O) and an executor around it (the
// Registry, here): one owner goroutine holds the machine, steps every
// event into it, and carries out what it returns: appends to the store,
// requests to the servers, views for readers, notices and answers. Every
// decision is appended to the store, synced, before it takes effect, is
// answered, or is told to anyone; the machine's decisions change only when
// a write completes, so replaying the log at start rebuilds them exactly.
// The log is compacted as it grows, to a snapshot of the live decisions
// and the tail since (docs/channels.md).
package channels

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpl-go/mcpl/internal/inbox"
	"github.com/mcpl-go/mcpl/internal/lograte"
	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/store"
)

// Key names a channel: its server and its id.
type Key struct {
	Server, Channel string
}

func keyOf(rec store.Record) Key { return Key{rec.Server, rec.Channel} }

// Conn is one server's connection as the registry uses it.
type Conn interface {
	// Call sends a request and decodes its result; timeout bounds the
	// wait for the answer (a deadline failure, as the host words one), ctx
	// cancels it.
	Call(ctx context.Context, method string, params, result any, timeout time.Duration) error
	// Has reports whether capability is in the server's effective grant
	// now.
	Has(capability string) bool
	// Notify sends a notification (channels/typing,
	// channels/outgoing/*).
	Notify(ctx context.Context, method string, params any) error
}

// ServerConfig is a server's channel settings.
type ServerConfig struct {
	// Admits reports whether the server's channels.subscription admits
	// the channel; nil admits none (manual).
	Admits func(channelID string) bool
	// SendTools names the server's tools that post into a channel: a
	// successful call of one into a closed channel opens it
	// (opened-by-reply). The host passes the server's
	// channels.sendTools (config.DefaultSendTools unless configured).
	SendTools []string
	// Timeout is the deadline of channels/open, channels/close and
	// channels/publish; 0 means DefaultTimeout.
	Timeout time.Duration
	// AcknowledgeSeen is the value of the acknowledgment Seen sends; ""
	// sends none (config channels.acknowledgeSeen).
	AcknowledgeSeen string
	// MaxDescriptorBytes bounds one descriptor's JSON, and
	// MaxTotalDescriptorBytes those of all the server's registered
	// channels together; 0 means MaxDescriptorBytes and
	// MaxTotalDescriptorBytes (limits.go; config
	// channels.maxDescriptorBytes, channels.maxTotalDescriptorBytes).
	MaxDescriptorBytes, MaxTotalDescriptorBytes int
}

// DefaultTimeout bounds a lifecycle request when the server's config gives
// none.
const DefaultTimeout = 60 * time.Second

// Options configure a Registry.
type Options struct {
	// Store holds the decisions and the inbox; required.
	Store store.Store
	// Logger receives operator detail; nil means slog.Default().
	Logger *slog.Logger
	// Describe turns a request to server that failed into the words an
	// agent reads (what happened, whether it took effect); nil uses
	// err.Error().
	Describe func(server string, err error) string
	// OnNotice receives what the agent layer tells agents (channels opened
	// by policy, delivery or reply; a reply's failed open). It is called
	// from the registry's owner goroutine and must not block.
	OnNotice func(Notice)
	// OnRegistered, if set, is called once a step made channels live (a
	// message that waited for its channel's registration may go). It is
	// called from the owner goroutine and must not block.
	OnRegistered func()
	// Inbox takes the accepted channels/incoming messages into the store's
	// inbox (the agent layer reads them from there, woken by the inbox);
	// nil makes one on Store, which Close closes.
	Inbox *inbox.Inbox
	// Coalescer decides channels/incoming messages that carry coalesce
	// (RFC-006); nil serves none, and the member is ignored.
	Coalescer Coalescer
	// Now is the clock of records; nil means time.Now.
	Now func() time.Time
}

// Coalescer decides coalesced channel messages (RFC-006): the host's.
type Coalescer interface {
	// Incoming decides one message that carries coalesce, otherwise valid
	// (its channel registered by its server, its content shown): m is its
	// inbox row, eventID its occurrence, raw its coalesce member. It keeps
	// what it delivers in the inbox, durably, before it returns, and says
	// what to answer for the message; err fails the whole request (the
	// store failed).
	Incoming(ctx context.Context, m store.Message, eventID string, raw json.RawMessage) (protocol.IncomingResult, error)
}

// MaxAttempts bounds how often one lifecycle operation re-reads a decision
// or target that changed while it was out.
const MaxAttempts = 5

// Registry is the host's channels: the executor that owns the decision
// core.
type Registry struct {
	opts   Options
	log    *slog.Logger
	limits *lograte.Limiter // typing and streaming failures

	// events are stepped into the machine by the owner, in order: a queue
	// under its own lock (many goroutines answer at once; a channel made
	// each of them queue for its lock in turn), wake its signal.
	eventMu sync.Mutex
	events  []func(*machine)
	ended   bool          // the owner took its stop: later events are refused
	wake    chan struct{} // buffered 1
	stopped chan struct{} // closed once the owner has stopped
	m       *machine      // the owner's alone

	// The servers' connections and settings, for the executor's I/O and
	// for the grant the machine reads.
	connMu sync.RWMutex
	conns  map[string]*serverState

	// views is what readers see of each channel, published by the owner
	// after each step.
	viewMu sync.RWMutex
	views  map[Key]*view

	closeOnce sync.Once
	closing   chan struct{} // closed as Close begins: no new background work
	idle      []chan struct{}
	bgMu      sync.Mutex // orders bg.Add before Close's bg.Wait
	bgClosed  bool

	ctx      context.Context // ends at Close's drain: every lifecycle request ends with it
	cancel   context.CancelFunc
	io       sync.WaitGroup // lifecycle requests out
	appendWG sync.WaitGroup // the append or compaction out (a wedged store may hold it past Close)
	bg       sync.WaitGroup // acknowledgments
	waits    sync.WaitGroup // channels/incoming answers waiting for the inbox
	inbox    *inbox.Inbox
	ownInbox bool
	typingWG sync.WaitGroup // typing repeats: Close ends them, not waits for them
	typers   typingSessions // typing under way, by channel: a close ends it
}

type serverState struct {
	id   string
	conn Conn
	cfg  ServerConfig
	// notifiedIncoming: this connection has sent channels/incoming as
	// a notification, and the log has said so.
	notifiedIncoming atomic.Bool
}

// warnIncomingNotification says, once a connection, that the server sends
// channels/incoming as a notification: its messages are kept, but it
// can't learn which. Later ones are said at debug.
func (r *Registry) warnIncomingNotification(server string, n int) {
	r.connMu.Lock()
	st := r.conns[server]
	r.connMu.Unlock()
	if st != nil && st.notifiedIncoming.CompareAndSwap(false, true) {
		r.log.Warn("channels/incoming sent as a notification: its messages are kept as a request's would be, but the server can't learn which were (SPEC §14.3 makes it a request); said once a connection",
			"server", server, "messages", n)
		return
	}
	r.log.Debug("channels/incoming sent as a notification", "server", server, "messages", n)
}

// New returns a registry whose decisions are those the store's log
// replays to.
func New(opts Options) (*Registry, error) {
	if opts.Store == nil {
		return nil, errors.New("channels: no store")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	r := &Registry{opts: opts, log: opts.Logger, limits: lograte.New(opts.Logger, ""),
		wake: make(chan struct{}, 1), stopped: make(chan struct{}), closing: make(chan struct{}),
		conns: map[string]*serverState{}, views: map[Key]*view{}}
	r.m = newMachine(r.has, r.describe)
	r.inbox = opts.Inbox
	if r.inbox == nil {
		var err error
		if r.inbox, err = inbox.New(inbox.Options{Store: opts.Store, Logger: opts.Logger}); err != nil {
			return nil, err
		}
		r.ownInbox = true
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	err := opts.Store.Replay(context.Background(), func(rec store.Record) error {
		r.m.replay(rec)
		return nil
	})
	if err != nil {
		r.cancel()
		r.limits.Close()
		if r.ownInbox {
			r.inbox.Close()
		}
		return nil, fmt.Errorf("channels: replaying the decision log: %w", err)
	}
	r.m.booted()
	r.carry(r.m.ready())
	go r.own()
	return r, nil
}

// own is the owner goroutine: it steps the events queued, in order, then
// carries out what the machine returns, once for the lot.
func (r *Registry) own() {
	defer close(r.stopped)
	for range r.wake {
		r.eventMu.Lock()
		batch := r.events
		r.events = nil
		r.eventMu.Unlock()
		stop := false
		for _, f := range batch {
			if f == nil {
				stop = true
				break
			}
			f(r.m)
		}
		r.carry(r.m.ready())
		if stop {
			return
		}
		if len(r.idle) > 0 && r.m.idle() {
			for _, ch := range r.idle {
				close(ch)
			}
			r.idle = nil
		}
	}
}

// step hands f to the owner; false once the owner has taken its stop (a
// nil f, the last event: Close's).
func (r *Registry) step(f func(*machine)) bool {
	r.eventMu.Lock()
	if r.ended {
		r.eventMu.Unlock()
		return false
	}
	if f == nil {
		r.ended = true
	}
	r.events = append(r.events, f)
	r.eventMu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return true
}

// do runs f on the owner and waits for it, and for what it changed to be
// visible (its views published); false once the owner has stopped.
func (r *Registry) do(f func(*machine)) bool {
	ran := make(chan struct{})
	if !r.step(func(m *machine) {
		f(m)
		m.reply(func() { close(ran) })
	}) {
		return false
	}
	select {
	case <-ran:
		return true
	case <-r.stopped:
		return false
	}
}

// ask runs f on the owner, which answers through its reply, and waits for
// the answer or for ctx; ok is false when the owner stopped or ctx ended
// first.
func ask[T any](ctx context.Context, r *Registry, f func(m *machine, reply func(T))) (v T, err error) {
	ch := make(chan T, 1)
	if !r.step(func(m *machine) {
		f(m, func(v T) { m.reply(func() { ch <- v }) })
	}) {
		return v, errClosing
	}
	select {
	case v := <-ch:
		return v, nil
	case <-ctx.Done():
		return v, ctx.Err()
	case <-r.stopped:
		// The owner may have answered just before it stopped.
		select {
		case v := <-ch:
			return v, nil
		default:
			return v, errClosing
		}
	}
}

// carry carries out what the machine asked for, in Ready's order.
func (r *Registry) carry(rd Ready) {
	if len(rd.Views) > 0 {
		r.viewMu.Lock()
		now := r.opts.Now().UTC()
		for _, v := range rd.Views {
			if v.v != nil {
				stampFailure(r.views[v.key], v.v, now)
			}
			if v.v == nil {
				delete(r.views, v.key)
			} else {
				r.views[v.key] = v.v
			}
		}
		r.viewMu.Unlock()
		r.endClosedTyping(rd.Views)
	}
	for _, l := range rd.Logs {
		r.log.Log(context.Background(), l.level, l.msg, l.attrs...)
	}
	// Notices before the requests they come with: a channel the policy
	// selects is announced as an intent before its open goes out.
	if r.opts.OnNotice != nil {
		for _, n := range rd.Notices {
			r.opts.OnNotice(n)
		}
	}
	for _, s := range rd.Sends {
		r.io.Add(1)
		go r.send(s)
	}
	if p := rd.Persist; p != nil {
		now := r.opts.Now().UTC()
		for i := range p.recs {
			if p.recs[i].At.IsZero() {
				p.recs[i].At = now
			}
		}
		r.appendWG.Add(1)
		go r.append(p)
	}
	if c := rd.Compact; c != nil {
		r.appendWG.Add(1)
		go r.compact(c)
	}
	for _, fn := range rd.Replies {
		fn()
	}
	if rd.Registered && r.opts.OnRegistered != nil {
		r.opts.OnRegistered()
	}
}

// append makes a batch durable and steps its end back in. Not r.ctx: a
// put-back at shutdown is still recorded.
func (r *Registry) append(p *persistOut) {
	defer r.appendWG.Done()
	recs, err := r.opts.Store.Append(context.Background(), p.recs...)
	r.step(func(m *machine) { m.persisted(p.id, recs, err) })
}

// compact compacts the log to c's snapshot and the tail since, and steps
// its end back in.
func (r *Registry) compact(c *compactOut) {
	defer r.appendWG.Done()
	dropped, err := 0, errors.New("this store does not compact")
	if cs, ok := r.opts.Store.(interface {
		Compact(context.Context, int64, []int64) (int, error)
	}); ok {
		dropped, err = cs.Compact(r.ctx, c.through, c.keep)
	}
	r.step(func(m *machine) { m.compacted(dropped, err) })
}

// send sends channels/open or channels/close for s, under the server's
// lifecycle deadline, which holds even when requestTimeout is 0, and steps
// the answer back in.
func (r *Registry) send(s sendOut) {
	defer r.io.Done()
	srv := r.server(s.key.Server)
	var answer []byte
	var err error
	switch {
	case srv == nil:
		err = &lifecycleError{text: textServerNotFound(s.key.Server), kind: kindNoServer}
	case s.open:
		p := openParams{ChannelID: s.desc.ID, Type: s.desc.Type, Address: s.desc.Address, History: s.history}
		var a rawAnswer
		err = srv.conn.Call(r.ctx, protocol.MethodChannelsOpen, p, &a, srv.cfg.Timeout)
		answer = a
	default:
		r.stopTypingIn(s.key) // the stops go before the close
		var a rawAnswer
		err = srv.conn.Call(r.ctx, protocol.MethodChannelsClose, protocol.ChannelsCloseParams{ChannelID: s.desc.ID}, &a, srv.cfg.Timeout)
		answer = a
	}
	r.step(func(m *machine) { m.response(s.key, s.op, answer, err) })
}

// rawAnswer keeps a request's answer as it came.
type rawAnswer []byte

func (a *rawAnswer) UnmarshalJSON(b []byte) error {
	*a = append((*a)[:0], b...)
	return nil
}

// has reports whether capability is in server's grant now (the machine
// reads it through this).
func (r *Registry) has(server, capability string) bool {
	s := r.server(server)
	return s != nil && s.conn.Has(capability)
}

func (r *Registry) server(id string) *serverState {
	r.connMu.RLock()
	defer r.connMu.RUnlock()
	return r.conns[id]
}

// DrainTimeout bounds how long Close lets lifecycle work in flight finish
// (an open a reply started just before the host stops) before it cancels
// it.
const DrainTimeout = 5 * time.Second

// AbandonTimeout bounds how long Close then waits for the cancelled work
// to end: what is still out after it (a write a wedged store holds) is
// abandoned, and the log says what.
const AbandonTimeout = 2 * time.Second

// Close stops new lifecycle work, lets the work in flight finish for up to
// DrainTimeout, cancels what is left and waits for it for up to
// AbandonTimeout; what is still out then is abandoned, with an error log
// saying what. It returns within DrainTimeout + AbandonTimeout whatever
// the store and the servers do (an append or an inbox write a wedged
// store holds is left to end when it does). The store is the caller's to
// close.
func (r *Registry) Close() {
	r.closeOnce.Do(func() {
		close(r.closing)
		r.bgMu.Lock()
		r.bgClosed = true
		r.bgMu.Unlock()
		r.step(func(m *machine) { m.close() })
		drained := r.waitIdle(DrainTimeout)
		r.cancel()
		deadline := time.Now().Add(AbandonTimeout)
		if !drained && !r.waitIdle(AbandonTimeout) {
			var records, requests int
			r.do(func(m *machine) { records, requests = m.abandoned() })
			r.log.Error("channel registry closed with lifecycle work abandoned: the store or a server did not answer in time",
				"decisions_unrecorded", records, "requests_unanswered", requests)
		}
		r.step(nil)
		<-r.stopped
		r.io.Wait()    // requests end with r.ctx
		r.bg.Wait()    // so do acknowledgments
		r.waits.Wait() // and the answers waiting for the inbox
		if r.ownInbox && !within(deadline, r.inbox.Close) {
			r.log.Error("channel registry closed with inbound messages abandoned: the store did not answer in time")
		}
		r.typingWG.Wait()
		r.limits.Close()
	})
}

// within runs f and waits for it until deadline; false when it had not
// returned by then (it goes on, on a goroutine of its own).
func within(deadline time.Time, f func()) bool {
	done := make(chan struct{})
	go func() {
		f()
		close(done)
	}()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// waitIdle waits up to d for the machine to have nothing out.
func (r *Registry) waitIdle(d time.Duration) bool {
	ch := make(chan struct{})
	if !r.step(func(m *machine) {
		if m.idle() {
			close(ch)
			return
		}
		r.idle = append(r.idle, ch)
	}) {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// reserveWait counts a wait for the inbox that Close waits for (the inbox
// answers every message it took, so it ends), unless Close has begun; it
// reports whether it did. The caller calls r.waits.Done when it ends.
func (r *Registry) reserveWait() bool {
	r.bgMu.Lock()
	defer r.bgMu.Unlock()
	if r.bgClosed {
		return false
	}
	r.waits.Add(1)
	return true
}

// isClosing reports whether Close has begun.
func (r *Registry) isClosing() bool {
	select {
	case <-r.closing:
		return true
	default:
		return false
	}
}

// goBackground runs f on a goroutine Close waits for, unless Close has
// begun; it reports whether it did.
func (r *Registry) goBackground(f func()) bool {
	r.bgMu.Lock()
	defer r.bgMu.Unlock()
	if r.bgClosed {
		return false
	}
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		f()
	}()
	return true
}

// Decision is one channel's current decision.
type Decision struct {
	Server, Channel string
	State           store.State
	Source          string
	Seq             int64
	At              time.Time
}

func decisionOf(d *store.Record) Decision {
	return Decision{Server: d.Server, Channel: d.Channel, State: d.State, Source: d.Source, Seq: d.Seq, At: d.At}
}

// defaultDecision is what a registered channel with no decision on record
// reads as, on a server whose lifecycle the host directs: closed, by
// nobody's decision.
func defaultDecision(k Key) Decision {
	return Decision{Server: k.Server, Channel: k.Channel, State: store.Closed, Source: SourceDefaultClosed}
}

// Decisions returns every channel's current durable decision, by server
// and channel. A channel closed by default has none.
func (r *Registry) Decisions() []Decision {
	r.viewMu.RLock()
	var out []Decision
	for _, v := range r.views {
		if v.decision != nil {
			out = append(out, *v.decision)
		}
	}
	r.viewMu.RUnlock()
	slices.SortFunc(out, func(a, b Decision) int {
		return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Channel, b.Channel))
	})
	return out
}

// ChannelSnapshot is one channel the registry knows, its registration and
// its decision read at one moment: Listed while its server has it
// registered, Decision when one is kept (or, for a registered channel of a
// server whose lifecycle the host directs, closed/default-closed: nobody
// decided).
type ChannelSnapshot struct {
	Key
	Listed   *ListedChannel
	Decision *Decision
}

// Snapshot returns every channel registered now or decided on, by server
// and channel.
func (r *Registry) Snapshot() []ChannelSnapshot {
	r.viewMu.RLock()
	var out []ChannelSnapshot
	for k, v := range r.views {
		s := ChannelSnapshot{Key: k, Decision: v.decision}
		if v.registered {
			l := v.listed(k.Server)
			v.serverSide(&l)
			s.Listed = &l
		}
		out = append(out, s)
	}
	r.viewMu.RUnlock()
	for i := range out {
		if s := &out[i]; s.Listed != nil {
			s.Listed.Lifecycle = r.directsLifecycle(s.Server)
		}
		if s := &out[i]; s.Decision == nil && s.Listed != nil && r.has(s.Server, "channels.lifecycle") {
			d := defaultDecision(s.Key)
			s.Decision = &d
			s.Listed.Desired = string(store.Closed)
		}
	}
	slices.SortFunc(out, func(a, b ChannelSnapshot) int {
		return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Channel, b.Channel))
	})
	return out
}

// AddServer makes a server's channels known to the registry: its
// connection and its channel settings. A server added again (a reconnect
// or restart) replaces the old connection.
func (r *Registry) AddServer(id string, conn Conn, cfg ServerConfig) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	r.connMu.Lock()
	r.conns[id] = &serverState{id: id, conn: conn, cfg: cfg}
	r.connMu.Unlock()
	r.do(func(m *machine) { m.addServer(id, cfg) })
}

// Disconnected drops a server's live registrations (its channels are gone
// until it registers them again) and cancels their queued lifecycle work;
// its decisions stay. With remove set the server itself is forgotten too.
func (r *Registry) Disconnected(id string, remove bool) {
	r.do(func(m *machine) { m.disconnected(id, remove) })
	if remove {
		r.connMu.Lock()
		delete(r.conns, id)
		r.connMu.Unlock()
	}
}

// directsLifecycle reports whether the host sends server's channels/open
// and channels/close: the server is here and channels.lifecycle is
// granted. Without it the server owns its channels.
func (r *Registry) directsLifecycle(server string) bool {
	return r.has(server, "channels.lifecycle")
}

// describe is what an agent reads of a lifecycle failure on server's
// channel.
func (r *Registry) describe(server string, err error) string {
	var le *lifecycleError
	switch {
	case errors.As(err, &le):
		return le.text
	case errors.Is(err, errClosing):
		return textClosing
	case err == context.Canceled || err == context.DeadlineExceeded:
		// The caller's own wait ended (a failed request that wraps one
		// is worded by Describe).
		return textStoppedWaiting
	case r.opts.Describe != nil:
		return r.opts.Describe(server, err)
	}
	return err.Error()
}

// lifecycleError is a lifecycle operation's failure that is not a failed
// request: its text is what the agent reads.
type lifecycleError struct {
	text string
	kind lifecycleKind
}

type lifecycleKind int

const (
	kindGone lifecycleKind = iota
	kindNoServer
	kindNoGrant
	kindSubstituted
	kindNotConverged
	kindSuperseded
)

func (e *lifecycleError) Error() string { return e.text }
