// Package store is the host's durable state: the append-only log of
// channel decisions and lifecycle events, and the inbox of channel messages
// a server delivered and this host acknowledged (DESIGN.md, principle 2:
// durable before visible).
//
// The interface is small on purpose, so that store/sqlite (the embedded
// default) and a PostgreSQL backend for several hosts implement the same
// contract:
//
//   - Append writes its records all or none, synced, before it returns:
//     a record Append returned without error survives a crash of the
//     process, and one it failed is not in the log. A call with a record
//     that fails Record.Validate is refused whole.
//   - Replay yields every record in log order (Seq increasing), so folding
//     it rebuilds the state the appends built.
//   - AddMessages adds inbox messages all or none, synced, deduplicated by
//     server, channel, message id and event id (Message.EventID): a
//     message already there keeps its first copy and is reported as not
//     added.
//   - Compact drops the log's records up to a Seq except those the caller
//     names, all or none, synced: Replay then yields the kept records and
//     the tail after that Seq, with their Seqs, and Append numbers on
//     after the highest Seq ever given. The store knows nothing of what a
//     record means; the caller (the channel layer, the log's one owner)
//     says which records its state still rests on.
//   - Page reads the inbox a page at a time, optionally one server's or
//     one channel's messages only, in Seq order; InboxEnd is the inbox's
//     highest Seq.
//   - DropCursors removes cursors Record set, synced.
//   - SaveState keeps a named body whole, synced, replacing the last;
//     LoadState reads it back.
//   - PruneInbox drops inbox messages every reader has consumed and that
//     are older than a retention, a bounded number a call, synced; the
//     dedupe key of each (server, channel, message id, event id) stays, so a
//     message sent again after it was pruned is still not added twice.
//
// A backend batches concurrent writers into one transaction where it can
// (group commit), so a burst costs a few syncs, not one a write, but each
// call succeeds or fails on its own.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// State is a channel decision's state.
type State string

// Decision states.
const (
	Open   State = "open"
	Closed State = "closed"
)

// Kind says what a log record is.
type Kind string

// Record kinds.
const (
	// KindDecision records a channel decision: State and Source.
	KindDecision Kind = "decision"
	// KindDeclined records that the agent declined an invitation to a
	// channel (channel_decline): MessageID and Acknowledgment. The
	// decision it makes (closed/invitation-declined) is a KindDecision
	// record of its own.
	KindDeclined Kind = "invitation-declined"
	// KindLazy records a lazy registration: the host registered Channel
	// for Server itself, because a push/event named it as its
	// origin.mcplChannelId without the server having registered it
	// (RFC-011 revision 3). KindLazyGone ends one (the server removed the
	// channel).
	KindLazy     Kind = "lazy-registered"
	KindLazyGone Kind = "lazy-gone"
)

// Record is one entry of the channel lifecycle log.
type Record struct {
	// Seq is the record's place in the log, set by Append: it increases
	// with every record appended and is never reused.
	Seq     int64
	Kind    Kind
	Server  string
	Channel string
	// State and Source are a decision's.
	State  State
	Source string
	// MessageID and Acknowledgment are a decline's: the invitation's
	// message, and the acknowledgment sent for it ("" for none).
	MessageID      string
	Acknowledgment string
	// At is when the record was made (the caller's clock); backends keep
	// it to the millisecond at least.
	At time.Time
}

// Message is one inbound channel message in the inbox.
type Message struct {
	// Seq is the message's place in the inbox, set by AddMessages.
	Seq       int64
	Server    string
	Channel   string
	MessageID string
	ThreadID  string
	// EventID is the occurrence's eventId when the message is a
	// coalesced occurrence (RFC-006 §3.1): its MessageID is then the
	// platform message, which an edit shares with its create, and the
	// dedupe key is (server, channel, message id, event id). "" for every
	// other message.
	EventID string
	// Kind is KindChannelMessage or KindPushEvent; FeatureSet is a push
	// event's.
	Kind       string
	FeatureSet string
	// Tags are the message's event tags with SPEC §16.3's core closure
	// applied at receipt; nil for none.
	Tags []string
	// Directed says this host directed its server's channels (the server
	// was granted channels.lifecycle) when it accepted the message: how
	// to judge it if its channel is gone by the time it is read.
	Directed bool
	// Body is the message as the server sent it (one element of
	// channels/incoming's messages).
	Body json.RawMessage
	// At is when this host accepted it.
	At time.Time
}

// Entry is one piece of a conversation's history: what the agent layer
// recorded of a turn (a message it was shown, the model's answer, a
// tool's result, a notice), in that layer's own encoding.
type Entry struct {
	// Seq is the entry's place, set by Record: it increases across every
	// conversation and is never reused.
	Seq int64
	// Conversation names the history: an agent, or a fork's
	// "agent@channel".
	Conversation string
	Body         json.RawMessage
	At           time.Time
}

// Message kinds.
const (
	// KindChannelMessage is a channels/incoming message (Kind "").
	KindChannelMessage = ""
	// KindPushEvent is a push/event: MessageID is its eventId,
	// FeatureSet its feature set, Channel "" unless its origin named the
	// channel its message is in (origin.mcplChannelId, RFC-011 rev. 3;
	// ThreadID then its origin.threadId). The dedupe key is the same
	// (server, channel, message id), so such a push shares its channel's
	// key space: one whose eventId is a message id of that channel is the
	// same message.
	KindPushEvent = "push"
)

// Store is durable host state. Its methods are safe for concurrent use.
type Store interface {
	// Append writes recs, in order, all or none, and returns them with
	// Seq set. It returns only once they are durable.
	Append(ctx context.Context, recs ...Record) ([]Record, error)
	// Replay calls fn with every record of the log, in Seq order. An
	// error from fn stops it and is returned.
	Replay(ctx context.Context, fn func(Record) error) error
	// AddMessages adds msgs to the inbox, all or none, and reports for
	// each whether it was added (false: a message with the same server,
	// channel, message id and event id was already there, or came earlier
	// in msgs).
	// Added messages have Seq set in msgs, increasing in msgs' order (the
	// inbox's one writer relies on it: its Seq order is its receipt
	// order). It returns only once they are durable. A message the backend
	// can't hold fails the call with an error wrapping ErrInvalid.
	AddMessages(ctx context.Context, msgs []Message) (added []bool, err error)
	// Messages calls fn with every inbox message whose Seq is above after,
	// in Seq order. An error from fn stops it and is returned.
	Messages(ctx context.Context, after int64, fn func(Message) error) error
	// Record appends entries to their conversations' histories, in order,
	// and sets the named cursors, all or none, and returns the entries
	// with Seq set. It returns only once they are durable. A turn records
	// what it saw and did and the inbox position it consumed up to in one
	// call, so a crash before it replays those messages rather than
	// losing them.
	Record(ctx context.Context, entries []Entry, cursors map[string]int64) ([]Entry, error)
	// History calls fn with every entry of conversation, in Seq order. An
	// error from fn stops it and is returned.
	History(ctx context.Context, conversation string, fn func(Entry) error) error
	// Cursors returns every cursor Record has set, by name (empty when
	// none).
	Cursors(ctx context.Context) (map[string]int64, error)
	// Compact drops every record of the log whose Seq is at most through
	// and is not in keep; records after through, and those in keep, stay
	// as they are, with their Seqs. Seq numbering goes on after the
	// highest Seq ever given (a Seq is never reused, compaction or not).
	// All or none, durable before it returns. dropped is how many records
	// went. A Seq in keep that names no record, or one above through,
	// changes nothing.
	//
	// Compact is ordered with the other writes like an Append: it drops
	// what the log holds when it runs, so a through above the highest
	// Seq the caller has been given may drop the records of an Append
	// that ran just before it. A Replay that started before it reads the
	// whole log as it was.
	Compact(ctx context.Context, through int64, keep []int64) (dropped int, err error)
	// Page returns the inbox messages q selects, in Seq order, at most
	// q.Limit of them. A query with Channel set and Server "" is refused
	// with an error wrapping ErrInvalid.
	Page(ctx context.Context, q InboxQuery) ([]Message, error)
	// InboxEnd returns the highest Seq in the inbox, 0 when it is empty.
	InboxEnd(ctx context.Context) (int64, error)
	// DropCursors removes the named cursors; a name with no cursor is
	// ignored. Durable before it returns.
	DropCursors(ctx context.Context, names ...string) error
	// PruneInbox drops the inbox messages q selects, oldest Seq first, at
	// most q.Limit of them, all or none, durable before it returns, and
	// says how many went. A pruned message's dedupe key (its server,
	// channel, message id and event id) stays: AddMessages reports a message with
	// that key as not added, as if it were still there, until a call
	// whose q.KeysBefore is past the pruned message's At forgets the key.
	// Page, Messages and InboxEnd no longer see a pruned message (so
	// InboxEnd may go down); Seqs are still never reused.
	PruneInbox(ctx context.Context, q PruneQuery) (pruned int, err error)
	// SaveState keeps body under name, replacing what was there, durable
	// before it returns; LoadState reads it back (ok false when nothing
	// was saved under name). It holds a layer's state that is neither a
	// log nor an inbox, whole, as that layer encodes it: the coalescing
	// table of RFC-006 (host/coalesce.go). name is not empty; a body the
	// backend can't hold fails with an error wrapping ErrInvalid.
	SaveState(ctx context.Context, name string, body []byte) error
	LoadState(ctx context.Context, name string) (body []byte, ok bool, err error)
	// Close releases the store; its other methods then fail with
	// ErrClosed.
	Close() error
}

// InboxQuery selects inbox messages for Store.Page.
type InboxQuery struct {
	// After and Through bound the Seqs: above After, and at most Through
	// when Through is above 0.
	After, Through int64
	// Server, when not "", selects that server's messages only.
	Server string
	// Channel, when not nil, selects the messages of that channel of
	// Server only ("" selects Server's push events); it needs Server.
	Channel *string
	// Limit bounds the messages returned; 0 or less means
	// DefaultPageLimit.
	Limit int
}

// PruneQuery selects the inbox messages Store.PruneInbox drops: those
// accepted before Before, and whose Seq is at most their server's
// consumed position (Through[server], or Floor for a server not in
// Through). The caller (the host, which knows its readers and their
// cursors) says what every reader has consumed; the store knows nothing
// of readers.
type PruneQuery struct {
	// Before bounds the messages' At: only those accepted before it go.
	// A message with a zero At goes whatever Before is; a zero Before
	// drops nothing.
	Before time.Time
	// Floor is the Seq through which every reader has consumed every
	// server's messages; Through overrides it for the servers it names
	// (up or down).
	Floor   int64
	Through map[string]int64
	// Limit bounds the messages one call drops; 0 or less means
	// DefaultPruneLimit.
	Limit int
	// KeysBefore, when not zero, forgets the dedupe keys of pruned
	// messages accepted before it (any pruned before this call, or by
	// it): a message with such a key is then added again.
	KeysBefore time.Time
}

// DefaultPruneLimit is the most messages Store.PruneInbox drops in a call
// that sets no Limit.
const DefaultPruneLimit = 10000

// DefaultPageLimit is the most messages Store.Page returns for a query
// that sets no Limit.
const DefaultPageLimit = 256

// Validate reports whether q is a query Store.Page takes: a Channel needs
// its Server. The error wraps ErrInvalid.
func (q InboxQuery) Validate() error {
	if q.Channel != nil && q.Server == "" {
		return fmt.Errorf("%w: a query for channel %q names no server", ErrInvalid, *q.Channel)
	}
	return nil
}

// ErrClosed is returned by a closed store's methods.
var ErrClosed = errors.New("store: closed")

// ErrInvalid is wrapped by the error of an Append refused because a record
// is not one the log can hold (see Record.Validate), of a Record refused
// for an entry or a cursor, and of a Page refused for its query (see
// InboxQuery.Validate); nothing of a refused call is written.
var ErrInvalid = errors.New("invalid record")

// Validate reports whether r is a record the log can hold: its Kind is
// KindDecision or KindDeclined, and its State is Open, Closed or empty.
// Every backend refuses, all or none, an Append with a record that fails
// it; the error wraps ErrInvalid. A backend may refuse more (store/sqlite
// refuses an At it cannot keep to the nanosecond), also wrapping
// ErrInvalid.
func (r Record) Validate() error {
	switch r.Kind {
	case KindDecision, KindDeclined, KindLazy, KindLazyGone:
	default:
		return fmt.Errorf("%w: unknown kind %q", ErrInvalid, r.Kind)
	}
	switch r.State {
	case Open, Closed, "":
	default:
		return fmt.Errorf("%w: unknown state %q", ErrInvalid, r.State)
	}
	return nil
}
