package channels

import (
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/store"
)

// The decision core. Every channel's state (its registration, its durable
// decision, its lifecycle lane) lives in one machine, which one goroutine
// owns (the Registry's owner, registry.go); the rules it applies are in
// core.go. The machine does no I/O and starts no goroutines: it is stepped
// by its methods (a registration, a removal, an agent's tool call, a
// delivery's open-on-send, a server's answer, a store write's completion)
// and says what to do in its Ready: records to persist, requests to send,
// views to publish, notices and answers to release. The owner carries
// those out and steps the results back in.
//
// Durable before visible, by construction: a decision changes the
// machine's state only when its write completes (persisted), and every
// continuation that answers a caller, tells an agent, or sends a request
// because of a decision runs from that completion. A channel has at most
// one decision write out at a time; work that would decide on it meanwhile
// waits (whenSettled) and reads the decision the write left.

// machine is the decision core; see above.
type machine struct {
	// has reports whether capability is in server's effective grant now.
	has func(server, capability string) bool
	// describe words a lifecycle failure as an agent reads it.
	describe func(server string, err error) string

	servers map[string]ServerConfig
	chans   map[Key]*chanState
	// live is the registered channels, by server and id.
	live map[string]map[string]*chanState
	// descBytes is, by server, the bytes of its registered channels'
	// descriptors (limits.go).
	descBytes map[string]int
	// lazy is, by server and channel, the Seq of each lazy
	// registration's record (lazy.go): durable, live while its server is
	// connected.
	lazy    map[string]map[string]int64
	closing bool
	ids     int64

	// Persistence: one batch out at a time, so completions come in log
	// order and a compaction never races an append.
	writes     []*write
	batch      *batch
	compacting bool
	appended   int // records appended since the last compaction
	// compactAfter is CompactAfter, but for tests.
	compactAfter int
	lastSeq      int64 // the highest Seq applied
	running      int   // ops with a request out

	out   Ready
	dirty map[Key]bool
}

// chanState is everything the machine keeps of one channel. It lives while
// the channel is registered, decided, or has lifecycle work or a write;
// then it goes (gc).
type chanState struct {
	key Key
	// decision is the current durable decision; nil when none (closed by
	// default, which needs no record).
	decision *store.Record
	// desc is the live registration; registered says there is one.
	desc       protocol.ChannelDescriptor
	registered bool
	size       int  // desc's bytes, as counted in its server's total (limits.go)
	lazy       bool // the registration is the host's own (lazy.go)
	gen        int  // registrations removed so far: ops from before cancel
	target     int  // bumped when the registration's type or address changes
	// confirmed says the last lifecycle request for the current
	// registration's target settled, and open what it settled to.
	confirmed, open bool
	// lifting: the registration's lift (its initial decision) is being
	// recorded; readers wait for it (ListedChannel.Lifting).
	lifting bool

	lane lane
	// writing counts the writes out that decide on the channel; settled
	// is what waits for them to end.
	writing int
	settled []func()
	// failure is the last lifecycle request of the current registration
	// that failed, nil when none did since one settled (failure.go).
	failure *failure
}

// write is records to append, the channels they decide on, and what to do
// once they are durable (ok) or have failed.
type write struct {
	recs  []store.Record
	chans []*chanState
	done  func(recs []store.Record, ok bool)
}

type batch struct {
	id     int64
	writes []*write
}

// Ready is what the machine asks its owner to do, in this order: publish
// the views, log, release the notices (a channel the policy selects is
// announced before its open goes out), send the requests, start the
// append or the compaction, then release the answers.
type Ready struct {
	Views   []viewOut
	Sends   []sendOut
	Persist *persistOut
	Compact *compactOut
	Logs    []logOut
	Notices []Notice
	Replies []func()
	// Registered: channels were registered (what waited on a
	// registration may go).
	Registered bool
}

// viewOut publishes a channel's state for readers; v nil forgets it.
type viewOut struct {
	key Key
	v   *view
}

// view is a channel as readers outside the owner see it: only durable
// decisions, only settled confirmations.
type view struct {
	desc            protocol.ChannelDescriptor
	registered      bool
	lazy            bool
	lifting         bool
	decision        *Decision
	confirmed, open bool
	// failure is the channel's last failed lifecycle request, failedAt
	// when it failed (the registry stamps it), and pending the request
	// out ("open", "close" or ""): failure.go.
	failure  *failure
	failedAt time.Time
	pending  string
}

// sendOut is a lifecycle request to send: op names the op it answers.
type sendOut struct {
	op   int64
	key  Key
	open bool
	desc protocol.ChannelDescriptor
	// history is channel_open's history request.
	history json.RawMessage
}

type persistOut struct {
	id   int64
	recs []store.Record
}

type compactOut struct {
	through int64
	keep    []int64
}

type logOut struct {
	level slog.Level
	msg   string
	attrs []any
}

// CompactAfter is how many records the log gains beyond the live
// decisions before it is compacted: at least this many, and at least as
// many as there are live decisions, so compaction costs O(1) an append.
const CompactAfter = 4096

func newMachine(has func(server, capability string) bool, describe func(string, error) string) *machine {
	return &machine{has: has, describe: describe, servers: map[string]ServerConfig{}, chans: map[Key]*chanState{},
		live: map[string]map[string]*chanState{}, descBytes: map[string]int{}, lazy: map[string]map[string]int64{}, dirty: map[Key]bool{}, compactAfter: CompactAfter}
}

// ready returns what to do and forgets it: the caller does it.
func (m *machine) ready() Ready {
	if m.batch == nil && !m.compacting {
		// A compaction that is due goes before the next batch: under a
		// steady stream of decisions, writes always wait, and it would
		// never run after them.
		due := m.appended >= max(m.compactAfter, len(m.chans))
		switch {
		case len(m.writes) > 0 && !due:
			m.ids++
			b := &batch{id: m.ids, writes: m.writes}
			m.writes = nil
			var recs []store.Record
			for _, w := range b.writes {
				recs = append(recs, w.recs...)
			}
			m.batch = b
			m.out.Persist = &persistOut{id: b.id, recs: recs}
		case due:
			m.compacting = true
			keep := make([]int64, 0, len(m.chans))
			for _, c := range m.chans {
				if c.decision != nil {
					keep = append(keep, c.decision.Seq)
				}
			}
			keep = append(keep, m.lazyKept()...)
			slices.Sort(keep)
			m.out.Compact = &compactOut{through: m.lastSeq, keep: keep}
		}
	}
	for k := range m.dirty {
		c := m.chans[k]
		var v *view
		if c != nil && (c.registered || c.decision != nil) {
			v = &view{desc: c.desc, registered: c.registered, lazy: c.lazy, lifting: c.lifting, confirmed: c.confirmed, open: c.open}
			if c.decision != nil {
				d := decisionOf(c.decision)
				v.decision = &d
			}
			v.failure, v.pending = c.failure, pendingOf(c)
		}
		m.out.Views = append(m.out.Views, viewOut{k, v})
	}
	clear(m.dirty)
	rd := m.out
	m.out = Ready{}
	return rd
}

// idle reports whether nothing is out: no request, no write, no
// compaction.
func (m *machine) idle() bool {
	return m.running == 0 && m.batch == nil && len(m.writes) == 0 && !m.compacting
}

// reply releases fn after this step's views are published.
func (m *machine) reply(fn func()) { m.out.Replies = append(m.out.Replies, fn) }

func (m *machine) notify(n Notice) { m.out.Notices = append(m.out.Notices, n) }

func (m *machine) logf(level slog.Level, msg string, attrs ...any) {
	m.out.Logs = append(m.out.Logs, logOut{level, msg, attrs})
}

// chan returns key's state, made if missing.
func (m *machine) chanOf(key Key) *chanState {
	c := m.chans[key]
	if c == nil {
		c = &chanState{key: key}
		m.chans[key] = c
	}
	return c
}

// touch marks c's view for publishing, and forgets c if nothing keeps it.
func (m *machine) touch(c *chanState) {
	m.dirty[c.key] = true
	if !c.registered && c.decision == nil && c.lane.idle() && c.writing == 0 && len(c.settled) == 0 {
		delete(m.chans, c.key)
	}
}

// replay applies one record of the log at start; booted follows the
// last.
func (m *machine) replay(rec store.Record) {
	m.lastSeq = max(m.lastSeq, rec.Seq)
	m.appended++
	switch rec.Kind {
	case store.KindLazy, store.KindLazyGone:
		m.replayLazy(rec)
		return
	case store.KindDecision:
	default:
		return
	}
	c := m.chanOf(keyOf(rec))
	if isDefault(&rec) {
		c.decision = nil
	} else {
		c.decision = &rec
	}
}

// booted ends the replay: the channels it left undecided go, the others'
// views are published, and what the log holds beyond the live decisions
// counts toward the next compaction.
func (m *machine) booted() {
	for k, c := range m.chans {
		if c.decision == nil {
			delete(m.chans, k)
			continue
		}
		m.dirty[k] = true
	}
	lazy := 0
	for _, l := range m.lazy {
		lazy += len(l)
	}
	m.appended = max(0, m.appended-len(m.chans)-lazy)
}

// apply makes a durable decision record the channel's decision: the only
// way a decision changes. The default's record leaves none.
func (m *machine) apply(rec store.Record) {
	c := m.chanOf(keyOf(rec))
	if isDefault(&rec) {
		c.decision = nil
	} else {
		c.decision = &rec
	}
	m.touch(c)
}

// persist queues recs for the next batch; chans are the channels they
// decide on, held (whenSettled) until done has run.
func (m *machine) persist(chans []*chanState, recs []store.Record, done func(recs []store.Record, ok bool)) {
	for _, c := range chans {
		c.writing++
	}
	m.writes = append(m.writes, &write{recs: recs, chans: chans, done: done})
}

// decisionRec is a decision record for c.
func decisionRec(c *chanState, state store.State, source string) store.Record {
	return store.Record{Kind: store.KindDecision, Server: c.key.Server, Channel: c.key.Channel, State: state, Source: source}
}

// decide records (state, source) on c per the same-state rule, then calls
// then with whether the decision holds (false: it couldn't be recorded).
// The caller runs under whenSettled.
func (m *machine) decide(c *chanState, state store.State, source string, then func(ok bool)) {
	if !writes(c.decision, state, source) {
		then(true)
		return
	}
	m.persist([]*chanState{c}, []store.Record{decisionRec(c, state, source)}, func(_ []store.Record, ok bool) { then(ok) })
}

// persisted steps in the end of batch id: recs with their Seqs, or err.
func (m *machine) persisted(id int64, recs []store.Record, err error) {
	b := m.batch
	if b == nil || b.id != id {
		return
	}
	m.batch = nil
	if err != nil {
		n := 0
		for _, w := range b.writes {
			n += len(w.recs)
		}
		first := b.writes[0].recs[0]
		m.logf(slog.LevelError, "a channel decision could not be recorded", "server", first.Server, "channel", first.Channel, "records", n, "error", err.Error())
	}
	i := 0
	for _, w := range b.writes {
		n := len(w.recs)
		if err == nil {
			w.recs = recs[i : i+n]
			for _, r := range w.recs {
				m.lastSeq = max(m.lastSeq, r.Seq)
				if r.Kind == store.KindDecision {
					m.apply(r)
				}
			}
			m.appended += n
		}
		i += n
	}
	for _, w := range b.writes {
		for _, c := range w.chans {
			c.writing--
		}
		w.done(w.recs, err == nil)
	}
	for _, w := range b.writes {
		for _, c := range w.chans {
			m.settle(c)
		}
	}
}

// compacted steps in the end of a compaction.
func (m *machine) compacted(dropped int, err error) {
	m.compacting = false
	if err != nil {
		m.logf(slog.LevelWarn, "the channel decision log could not be compacted; it is tried again later", "error", err.Error())
		m.appended = 0
		return
	}
	m.appended = 0
	m.logf(slog.LevelDebug, "the channel decision log was compacted", "dropped", dropped)
}

// whenSettled runs fn once no write deciding on c is out: at once, or
// after the last one's continuation.
func (m *machine) whenSettled(c *chanState, fn func()) {
	if c.writing == 0 && len(c.settled) == 0 {
		fn()
		return
	}
	c.settled = append(c.settled, fn)
}

// settle runs what waited for c's writes, in order, while none is out.
func (m *machine) settle(c *chanState) {
	for c.writing == 0 && len(c.settled) > 0 {
		fn := c.settled[0]
		c.settled = c.settled[1:]
		fn()
	}
	m.touch(c)
}

// addServer makes a server's channel settings known; a server added again
// replaces them.
func (m *machine) addServer(id string, cfg ServerConfig) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	m.servers[id] = cfg
	m.liveLazyOf(id)
}

func (m *machine) hasServer(id string) bool {
	_, ok := m.servers[id]
	return ok
}

// directs reports whether the host sends server's channels/open and
// channels/close: the server is here and channels.lifecycle is granted.
func (m *machine) directs(server string) bool {
	return m.hasServer(server) && m.has(server, "channels.lifecycle")
}

func (m *machine) admits(server, channel string) bool {
	cfg, ok := m.servers[server]
	return ok && cfg.Admits != nil && cfg.Admits(channel)
}

// disconnected drops a server's live registrations and cancels their
// queued work; its decisions stay. With remove the server is forgotten.
func (m *machine) disconnected(server string, remove bool) {
	for _, id := range slices.Sorted(maps.Keys(m.live[server])) {
		m.unregister(m.live[server][id])
	}
	if remove {
		delete(m.servers, server)
	}
}

// unregister drops c's live registration: its queued work cancels when it
// would run, its confirmation goes.
func (m *machine) unregister(c *chanState) {
	c.registered, c.lazy = false, false
	c.desc = protocol.ChannelDescriptor{}
	m.setSize(c, 0)
	c.confirmed, c.open = false, false
	c.failure = nil
	c.gen++
	if l := m.live[c.key.Server]; l != nil {
		delete(l, c.key.Channel)
		if len(l) == 0 {
			delete(m.live, c.key.Server)
		}
	}
	m.touch(c)
}

// close stops new lifecycle work: what is queued and out goes on.
func (m *machine) close() { m.closing = true }

// abandoned says what is still out: records not yet durable, requests
// not yet answered.
func (m *machine) abandoned() (records, requests int) {
	for _, w := range m.writes {
		records += len(w.recs)
	}
	if m.batch != nil {
		for _, w := range m.batch.writes {
			records += len(w.recs)
		}
	}
	return records, m.running
}
