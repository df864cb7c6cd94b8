// Package inbox is the single owner of writes into the store's durable
// inbox: every inbound message the host accepts (a channels/incoming
// message or a push event) goes through one Inbox, whose one goroutine
// writes them to store.Store.AddMessages in the order Accept was called.
//
// # Order
//
// The queue order is the Accept order, and the owner writes the queue in
// that order, so the inbox's Seq order is the Accept order: Seq is decided
// at receipt, before any concurrency. For that to be the receipt order a
// caller calls Accept where the order is made, on the connection's dispatch
// goroutine as it validates a request, and waits for the Result elsewhere
// (a server that pipelines 16 channels/incoming requests on one connection
// then has its messages stored, and shown to agents, in the order it sent
// them). Accepts from different goroutines are ordered as they take the
// queue's lock. Nothing else should call AddMessages on the store.
//
// # Group commit
//
// While one AddMessages call is in flight, Accepts queue; the next call
// writes everything queued, in one call, then the owner sends each caller
// its Result and calls Options.OnCommit once, the agents' one wake-up for
// the whole commit. A commit takes whole Accepts, never part of one, since
// a Result is all or none: it stops before the Accept that would take it
// past Options.MaxBatch messages or Options.MaxBatchBytes bytes, and the
// next commit goes on from there. An Accept that alone is past either
// bound (one message larger than MaxBatchBytes, say) is a commit of its
// own, whole.
//
// The store deduplicates by server, channel and message id across the
// commit as it does within one call: a message already in the inbox, or
// earlier in the same commit (from the same Accept or an earlier one), is
// reported as not added, exactly as if each Accept had been a call of its
// own in order.
//
// # Failure
//
// AddMessages is all or none, so a commit that fails fails every Accept it
// carries, not only the one whose message caused it, and none of their
// messages is added; each caller gets the store's error (wrapped), answers
// "not accepted, send again later", and the owner goes on with the next
// commit. The failures a store really has (closed, a full disk, a file in
// doubt, a lock held past its timeout) are the commit's, not a message's:
// retrying each Accept alone would fail the same way once for each caller, and
// multiply the wait (a busy timeout a retry) and the syncs against a
// failing disk.
//
// The one exception is an error wrapping store.ErrInvalid, which says the
// store refused a message's content before writing anything: a commit of
// several Accepts that fails so is split in halves, each committed in
// order, and so on down to the Accepts the store refuses, so that one
// server's message the store can't hold fails that server's Accept alone.
// The others keep their order, and OnCommit is still called once. The
// cost is a call for each half tried, each that commits a sync of its own
// (b refused Accepts among k cost at most 2b·⌈log2 k⌉+1 calls), which
// is why callers should refuse at receipt what the store can't hold. (No
// backend returns ErrInvalid from AddMessages today; the split is for one
// that will, such as a database that refuses a NUL in a text column.)
//
// The owner logs the first failed commit after a success, and the first
// success after failures, at Debug, not one line a commit: the store's
// failing is logged where every write is seen (the host's store health:
// a line when it begins, a count a window while it lasts, a line when it
// ends), and the callers log their own refusals, with their server's
// name, rate-limited. A failed commit leaves nothing behind here: the next
// commit is tried as the first was, and succeeds once the store does.
//
// A store closed under the Inbox fails each commit at once with its error
// (wrapping store.ErrClosed, so a caller can tell it from the Inbox's own
// ErrClosed); the owner goes on answering Accepts that way until Close.
//
// # Seq
//
// Accept borrows msgs until its Result is received: the owner reads them
// when it builds a commit and, for each message added, sets msgs[i].Seq
// in the caller's own slice before it sends the Result, as AddMessages
// does for its caller. A message not added keeps the Seq it had. The
// caller must not change msgs, or read their Seqs, before the Result.
//
// # Memory
//
// The Inbox has no bound of its own on what it holds. A queued Accept
// holds its messages, the bytes of the request they came in, which the
// connection keeps counted against its inbound budget until the request is
// answered (wire.Request.Hold; 32 MiB a connection by default); beyond
// that budget the connection refuses the server's further requests with
// CodeOverloaded before they reach the Inbox. So what the queue holds is
// bounded by the sum of the connections' budgets, and a slow disk is
// pushed back on the servers that send the most, each at its own budget.
// A bound here (a MaxQueuedBytes) would add a global one that refuses one
// server's messages because of another's. A caller that answers later
// must therefore keep its request counted until the Result. Beyond the
// messages, the Inbox keeps about 200 bytes a queued Accept, and one
// commit's copy of the message structs (up to MaxBatch of them, not their
// bodies: about 180 KiB at the default), cleared after each commit.
//
// # No context
//
// Accept takes no ctx: it never waits (it queues and returns), and once
// queued a message runs to its commit, so a caller never has to wonder
// whether a message it gave up on was written. A caller that stops caring
// (its connection closed) just never reads the channel, which is buffered,
// so the owner never waits for it.
//
// # Close
//
// Close stops taking messages (a later Accept fails at once with
// ErrClosed), commits everything already queued, waits for the owner
// goroutine, and returns; it does not close the store. It waits as long as
// the store takes to answer the commit in flight and those queued
// (store/sqlite bounds its wait for a lock by its busy timeout; a disk that
// hangs hangs Close too). Close the Inbox before the store.
package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/mcpl-go/mcpl/store"
)

// Options configures an Inbox.
type Options struct {
	// Store is the durable inbox; required.
	Store store.Store
	// Logger gets the owner's log lines; nil means slog.Default().
	Logger *slog.Logger
	// OnCommit is called on the owner's goroutine after each commit that
	// added at least one message, once the commit's Results are sent,
	// with the highest Seq added. It must not block. It is the one
	// wake-up for the agents; nil for none.
	OnCommit func(through int64)
	// MaxBatch and MaxBatchBytes bound one AddMessages call: 0 means 1024
	// messages and 4 MiB (a message's bytes are those of its strings,
	// tags and body). A commit takes whole Accepts, so an Accept past
	// either bound on its own (a message larger than MaxBatchBytes, say)
	// is a call of its own.
	MaxBatch, MaxBatchBytes int
	// OnDuplicates is called on the owner's goroutine after each commit
	// that found messages already in the inbox (deduplicated: not added,
	// not delivered again), once the commit's Results are sent, with
	// their server and message ids in commit order. It must not block
	// and must not keep dups. nil for none. The host counts and logs
	// them: a server that numbers its messages from 1 on every run is
	// otherwise silently ignored from its second run on (issue 27).
	OnDuplicates func(dups []Duplicate)
}

// Duplicate is a message a commit did not add: one with its server and
// message id was in the inbox already, or earlier in the same commit.
type Duplicate struct {
	Server, MessageID string
}

// Defaults of Options.MaxBatch and Options.MaxBatchBytes.
const (
	DefaultMaxBatch      = 1024
	DefaultMaxBatchBytes = 4 << 20
)

// ErrClosed is the Err of an Accept after Close.
var ErrClosed = errors.New("inbox: closed")

// Result is how an Accept went: Added[i] says whether msgs[i] was added
// (false: already in the inbox, or earlier in the same commit), Err the
// failure (then nothing of that Accept was added, and Added is nil).
type Result struct {
	Added []bool
	Err   error
}

// Inbox queues accepted messages and writes them to the store, in order,
// from one goroutine. Its methods are safe for concurrent use.
type Inbox struct {
	store    store.Store
	log      *slog.Logger
	onCommit func(int64)
	onDups   func([]Duplicate)
	dups     []Duplicate // this commit's, for onDups
	maxN     int
	maxBytes int

	mu     sync.Mutex
	queue  []*accept // waiting for the owner, in Accept order
	closed bool

	wake chan struct{} // tells the owner there is work; buffered 1
	done chan struct{} // closed when the owner has stopped

	// The owner's alone.
	buf     []store.Message // one commit's messages
	failing bool            // the last commit failed
	failed  int             // commits failed since the last success
}

// accept is one Accept waiting for its commit.
type accept struct {
	msgs []store.Message // the caller's
	size int             // bytes of msgs, for maxBytes
	res  chan Result     // buffered 1
}

// New starts an Inbox writing into opts.Store. Close stops it.
func New(opts Options) (*Inbox, error) {
	switch {
	case opts.Store == nil:
		return nil, errors.New("inbox: no store")
	case opts.MaxBatch < 0 || opts.MaxBatchBytes < 0:
		return nil, fmt.Errorf("inbox: negative bound: MaxBatch %d, MaxBatchBytes %d", opts.MaxBatch, opts.MaxBatchBytes)
	}
	in := &Inbox{
		store:    opts.Store,
		log:      opts.Logger,
		onCommit: opts.OnCommit,
		onDups:   opts.OnDuplicates,
		maxN:     opts.MaxBatch,
		maxBytes: opts.MaxBatchBytes,
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
	if in.log == nil {
		in.log = slog.Default()
	}
	if in.maxN == 0 {
		in.maxN = DefaultMaxBatch
	}
	if in.maxBytes == 0 {
		in.maxBytes = DefaultMaxBatchBytes
	}
	go in.run()
	return in, nil
}

// Accept queues msgs, in order, after everything earlier Accepts queued,
// and returns a channel (buffered, one value) that gets the outcome once
// the messages are durable or have failed. It never waits for the store.
// msgs is the Inbox's until the Result (see the package doc, "Seq"). An
// Accept of no messages gets its Result at once. After Close it returns a
// channel with Err ErrClosed at once.
func (in *Inbox) Accept(msgs []store.Message) <-chan Result {
	res := make(chan Result, 1)
	a := &accept{msgs: msgs, res: res}
	for i := range msgs {
		a.size += size(&msgs[i])
	}
	in.mu.Lock()
	switch {
	case in.closed:
		in.mu.Unlock()
		res <- Result{Err: ErrClosed}
		return res
	case len(msgs) == 0:
		in.mu.Unlock()
		res <- Result{Added: []bool{}}
		return res
	}
	in.queue = append(in.queue, a)
	in.mu.Unlock()
	select {
	case in.wake <- struct{}{}:
	default:
	}
	return res
}

// Close stops taking messages, commits everything already queued, waits
// for the owner goroutine, and returns. It does not close the store.
// Calling it again waits the same way and does nothing more.
func (in *Inbox) Close() {
	in.mu.Lock()
	in.closed = true
	in.mu.Unlock()
	select {
	case in.wake <- struct{}{}:
	default:
	}
	<-in.done
}

// size is a message's bytes, as Options.MaxBatchBytes counts them.
func size(m *store.Message) int {
	n := len(m.Server) + len(m.Channel) + len(m.MessageID) + len(m.ThreadID) + len(m.Kind) + len(m.FeatureSet) + len(m.EventID) + len(m.Body)
	for _, t := range m.Tags {
		n += len(t)
	}
	return n
}

// run is the owner goroutine: it commits batch after batch until the
// Inbox is closed and its queue empty.
func (in *Inbox) run() {
	defer close(in.done)
	var batch []*accept
	for {
		var ok bool
		if batch, ok = in.next(batch); !ok {
			return
		}
		in.commit(batch)
	}
}

// next waits for queued Accepts and takes the next batch of them, within
// the bounds; false once the Inbox is closed and nothing is left. last is
// the batch the owner has finished with, whose array the queue may reuse.
func (in *Inbox) next(last []*accept) ([]*accept, bool) {
	clear(last)
	for {
		in.mu.Lock()
		if len(in.queue) > 0 {
			n, msgs, bytes := 0, 0, 0
			for _, a := range in.queue {
				if n > 0 && (msgs+len(a.msgs) > in.maxN || bytes+a.size > in.maxBytes) {
					break
				}
				n, msgs, bytes = n+1, msgs+len(a.msgs), bytes+a.size
			}
			batch := in.queue[:n:n]
			// The rest goes to another array (last's, which the owner is
			// done with), so that Accepts appending to the queue never
			// write into batch.
			in.queue = append(last[:0], in.queue[n:]...)
			in.mu.Unlock()
			return batch, true
		}
		if in.closed {
			in.mu.Unlock()
			return nil, false
		}
		in.mu.Unlock()
		<-in.wake
	}
}

// commit writes batch, answers each of its Accepts, then calls OnCommit
// and OnDuplicates.
func (in *Inbox) commit(batch []*accept) {
	through, err := in.write(batch)
	switch {
	case err != nil && !in.failing:
		in.failing = true
		in.log.Debug("inbound messages could not be stored: their callers were told none was accepted; later failures are not logged until a commit succeeds",
			"accepts", len(batch), "error", err.Error())
	case err == nil && in.failing:
		in.failing = false
		in.log.Debug("inbound messages are stored again", "failed_commits", in.failed)
		in.failed = 0
	}
	if err != nil {
		in.failed++
	}
	if through > 0 && in.onCommit != nil {
		in.onCommit(through)
	}
	if len(in.dups) > 0 {
		in.onDups(in.dups)
		clear(in.dups)
		in.dups = in.dups[:0]
	}
}

// write makes batch durable in one AddMessages call and sends each Accept
// its Result. A commit of several Accepts that the store refuses with
// store.ErrInvalid is split in halves, each written on its own, in order.
// It returns the highest Seq added (0 for none) and the error of the
// commit, if it failed for every Accept of it.
func (in *Inbox) write(batch []*accept) (through int64, err error) {
	buf := in.buf[:0]
	for _, a := range batch {
		buf = append(buf, a.msgs...)
	}
	// Taken runs to its commit: no caller can call it off (package doc).
	added, err := in.store.AddMessages(context.Background(), buf)
	if err == nil && len(added) != len(buf) {
		err = fmt.Errorf("the store reported on %d messages of %d", len(added), len(buf))
	}
	if err != nil {
		clear(buf)
		in.buf = buf
		if len(batch) > 1 && errors.Is(err, store.ErrInvalid) {
			h := len(batch) / 2
			t1, err1 := in.write(batch[:h])
			t2, err2 := in.write(batch[h:])
			if err1 == nil || err2 == nil {
				err = nil
			}
			return max(t1, t2), err
		}
		err = fmt.Errorf("inbox: add %s (a commit of %s): %w", plural(len(buf), "message"), plural(len(batch), "accept"), err)
		for _, a := range batch {
			a.res <- Result{Err: err}
		}
		return 0, err
	}
	off := 0
	for _, a := range batch {
		n := len(a.msgs)
		mine := added[off : off+n : off+n]
		for i, ok := range mine {
			if ok {
				a.msgs[i].Seq = buf[off+i].Seq
				through = max(through, a.msgs[i].Seq)
			} else if in.onDups != nil {
				in.dups = append(in.dups, Duplicate{Server: a.msgs[i].Server, MessageID: a.msgs[i].MessageID})
			}
		}
		a.res <- Result{Added: mine}
		off += n
	}
	clear(buf) // drop the bodies until the next commit
	in.buf = buf
	return through, nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
