// Package channels keeps the host's channel decisions and carries them out
// (SPEC §14, RFC-011, seeds/000): the registrations each server makes, the
// durable decision of every channel (open or closed, and who decided), one
// serial lifecycle queue per channel that sends channels/open and
// channels/close, the put-back of an incidental open that failed, the
// durable inbox of channels/incoming, and the channel tools an agent calls.
//
// It is a pure decision core (core.go: the rules, no I/O) and an executor
// (the Registry): every decision is appended to the store, synced, before
// it is applied in memory, answered, or told to anyone, and the in-memory
// decisions are only ever changed by applying a record, so replaying the
// log at start rebuilds them exactly.
package channels

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

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
	// from the registry's goroutines and must not block.
	OnNotice func(Notice)
	// OnMessages, if set, is called after inbound messages were added to
	// the inbox (the agent layer reads them from there). It must not
	// block.
	OnMessages func()
	// Now is the clock of records; nil means time.Now.
	Now func() time.Time
}

// MaxAttempts bounds how often one lifecycle operation re-reads a decision
// or target that changed while it was out.
const MaxAttempts = 5

// Registry is the host's channels.
type Registry struct {
	opts   Options
	log    *slog.Logger
	limits *lograte.Limiter // typing and streaming failures

	mu      sync.Mutex
	closed  bool
	servers map[string]*serverState
	chans   map[Key]*chanState

	ctx      context.Context // ends at Close: every lifecycle request ends with it
	cancel   context.CancelFunc
	wg       sync.WaitGroup // lanes and background work
	typingWG sync.WaitGroup // typing repeats: Close ends them, not waits for them
}

type serverState struct {
	id   string
	conn Conn
	cfg  ServerConfig
}

// chanState is everything the registry knows of one channel.
type chanState struct {
	key Key
	// decide serializes decisions on the channel: a decision is read,
	// appended and applied under it. It is taken before Registry.mu,
	// never after, and never held while waiting on the lane.
	decide sync.Mutex

	// Under Registry.mu:
	decision *store.Record // the current decision; nil when none
	entry    *entry        // the live registration; nil when not registered
	removals int           // registrations removed so far: queued work from before is cancelled
	target   int           // bumped when the entry's target (type, address) changes
	// confirmed says the last lifecycle request for the current entry's
	// target settled, and open what it settled to.
	confirmed, open bool
	lane            lane
}

// entry is a live registration.
type entry struct {
	desc protocol.ChannelDescriptor
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
	r := &Registry{opts: opts, log: opts.Logger, limits: lograte.New(opts.Logger, ""), servers: map[string]*serverState{}, chans: map[Key]*chanState{}}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	err := opts.Store.Replay(context.Background(), func(rec store.Record) error {
		r.applyLocked(rec)
		return nil
	})
	if err != nil {
		r.cancel()
		r.limits.Close()
		return nil, fmt.Errorf("channels: replaying the decision log: %w", err)
	}
	return r, nil
}

// DrainTimeout bounds how long Close lets lifecycle work in flight finish
// (an open a reply started just before the host stops) before it cancels
// it.
const DrainTimeout = 5 * time.Second

// Close stops new lifecycle work, lets the work in flight finish for up to
// DrainTimeout, cancels what is left, and waits for the registry's
// goroutines. The store is the caller's to close.
func (r *Registry) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	drained := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(drained)
	}()
	t := time.NewTimer(DrainTimeout)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
	}
	r.cancel()
	<-drained
	r.typingWG.Wait()
	r.limits.Close()
}

// chanLocked returns key's state, made if missing.
func (r *Registry) chanLocked(key Key) *chanState {
	c := r.chans[key]
	if c == nil {
		c = &chanState{key: key}
		r.chans[key] = c
	}
	return c
}

func (r *Registry) chanOf(key Key) *chanState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.chanLocked(key)
}

// applyLocked applies one log record to the in-memory state: the only
// way a decision changes, at replay and after each append alike.
func (r *Registry) applyLocked(rec store.Record) {
	if rec.Kind != store.KindDecision {
		return
	}
	c := r.chanLocked(keyOf(rec))
	c.decision = &rec
}

// record appends recs durably and applies them. The caller holds the
// channel's decide lock.
func (r *Registry) record(recs ...store.Record) ([]store.Record, error) {
	for i := range recs {
		if recs[i].At.IsZero() {
			recs[i].At = r.opts.Now().UTC()
		}
	}
	// Not r.ctx: a put-back at shutdown is still recorded.
	done, err := r.opts.Store.Append(context.Background(), recs...)
	if err != nil {
		r.log.Error("a channel decision could not be recorded", "server", recs[0].Server, "channel", recs[0].Channel, "error", err.Error())
		return nil, err
	}
	r.mu.Lock()
	for _, rec := range done {
		r.applyLocked(rec)
	}
	r.mu.Unlock()
	return done, nil
}

// decision is a channel's decision now (nil when none); the caller's own.
func (r *Registry) decisionOf(c *chanState) *store.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.decision == nil {
		return nil
	}
	d := *c.decision
	return &d
}

// decide records (state, source) on the channel under its decide lock,
// per the same-state rule. It returns the record written (nil when the
// rule wrote nothing) and the decision it replaced.
func (r *Registry) decide(c *chanState, state store.State, source string) (written, replaced *store.Record, err error) {
	c.decide.Lock()
	defer c.decide.Unlock()
	return r.decideLocked(c, state, source)
}

func (r *Registry) decideLocked(c *chanState, state store.State, source string) (written, replaced *store.Record, err error) {
	replaced = r.decisionOf(c)
	if !writes(replaced, state, source) {
		return nil, replaced, nil
	}
	done, err := r.record(store.Record{Kind: store.KindDecision, Server: c.key.Server, Channel: c.key.Channel, State: state, Source: source})
	if err != nil {
		return nil, replaced, err
	}
	return &done[0], replaced, nil
}

// Decision is one channel's current decision.
type Decision struct {
	Server, Channel string
	State           store.State
	Source          string
	Seq             int64
	At              time.Time
}

// Decisions returns every channel's current decision, by server and
// channel.
func (r *Registry) Decisions() []Decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Decision
	for _, c := range r.chans {
		if d := c.decision; d != nil {
			out = append(out, decisionOf(d))
		}
	}
	slices.SortFunc(out, func(a, b Decision) int {
		return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Channel, b.Channel))
	})
	return out
}

func decisionOf(d *store.Record) Decision {
	return Decision{Server: d.Server, Channel: d.Channel, State: d.State, Source: d.Source, Seq: d.Seq, At: d.At}
}

// ChannelSnapshot is one channel the registry knows, its registration and
// its decision read at one moment: Listed while its server has it
// registered, Decision when one is kept.
type ChannelSnapshot struct {
	Key
	Listed   *ListedChannel
	Decision *Decision
}

// Snapshot returns every channel registered now or decided on, by server
// and channel.
func (r *Registry) Snapshot() []ChannelSnapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ChannelSnapshot
	for k, c := range r.chans {
		s := ChannelSnapshot{Key: k}
		if c.entry != nil {
			l := c.listed(k.Server)
			s.Listed = &l
		}
		if c.decision != nil {
			d := decisionOf(c.decision)
			s.Decision = &d
		}
		if s.Listed != nil || s.Decision != nil {
			out = append(out, s)
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
	r.mu.Lock()
	defer r.mu.Unlock()
	r.servers[id] = &serverState{id: id, conn: conn, cfg: cfg}
}

// Disconnected drops a server's live registrations (its channels are gone
// until it registers them again) and cancels their queued lifecycle work;
// its decisions stay. With remove set the server itself is forgotten too.
func (r *Registry) Disconnected(id string, remove bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, c := range r.chans {
		if key.Server == id && c.entry != nil {
			r.unregisterLocked(c)
		}
	}
	if remove {
		delete(r.servers, id)
	}
}

func (r *Registry) unregisterLocked(c *chanState) {
	c.entry = nil
	c.confirmed, c.open = false, false
	c.removals++
}

// directsLifecycle reports whether the host sends server's channels/open
// and channels/close: the server is here and channels.lifecycle is
// granted. Without it the server owns its channels.
func (r *Registry) directsLifecycle(server string) bool {
	r.mu.Lock()
	s := r.servers[server]
	r.mu.Unlock()
	return s != nil && s.conn.Has("channels.lifecycle")
}

func (r *Registry) server(id string) *serverState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.servers[id]
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
