package host

import (
	"context"
	"errors"
	"time"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/internal/agent"
	"github.com/mcpl-go/mcpl/store"
)

// Pruning the inbox (docs/limits.md, "The inbox"): the host drops the
// messages every agent of its configuration has consumed once they are
// older than the configuration's inboxRetention, at Start and then every
// PruneEvery, a bounded pass (store.DefaultPruneLimit messages) at a time:
// a pass that drops that many is followed by another a second later,
// until one drops fewer. A pruned message's dedupe key stays for
// DedupeKeyFactor times the retention from the message's receipt, so a
// server that sends it again within that time has it kept once, not
// twice; the store forgets older keys in the same passes.
const (
	PruneEvery      = time.Hour
	DedupeKeyFactor = 4
	// pruneAgain is the wait between passes while each drops a full
	// pass's worth.
	pruneAgain = time.Second
)

// PruneInbox runs one pass of the inbox's pruning now, as Start's
// schedule does, and says how many messages went. It prunes nothing, and
// returns 0, when no agents run (nothing consumes the inbox) or one has
// not consumed anything yet.
func (h *Host) PruneInbox(ctx context.Context) (int, error) {
	set := h.running()
	if set == nil {
		return 0, nil
	}
	retention := set.cfg.InboxRetention
	if retention <= 0 {
		retention = config.DefaultInboxRetention
	}
	names := make([]string, len(set.cfg.Agents))
	for i, a := range set.cfg.Agents {
		names[i] = a.Name
	}
	cursors, err := h.store.Cursors(ctx)
	if err != nil {
		return 0, err
	}
	floor, through, ok := agent.Consumed(cursors, names, set.cfg.Conversations == config.ConversationsPerChannel)
	if !ok {
		return 0, nil
	}
	// What every reader has consumed it reads no more: the coalescer
	// forgets what it kept to tell a reader of those rows.
	h.coalescer.forget(floor, through)
	now := h.now()
	return h.store.PruneInbox(ctx, store.PruneQuery{
		Before:     now.Add(-retention),
		Floor:      floor,
		Through:    through,
		KeysBefore: now.Add(-DedupeKeyFactor * retention),
	})
}

// pruneLoop is Start's schedule of PruneInbox, until the host closes.
func (h *Host) pruneLoop() {
	wait := time.Duration(0)
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-time.After(wait):
		}
		n, err := h.PruneInbox(h.ctx)
		switch {
		case err != nil && h.ctx.Err() == nil && !errors.Is(err, store.ErrClosed):
			// The store's health logs a store failure; this says what it
			// cost.
			h.log.Warn("the inbox was not pruned: its messages stay until the next pass", "error", err.Error(), "next", PruneEvery.String())
			wait = PruneEvery
		case n >= store.DefaultPruneLimit:
			wait = pruneAgain
		default:
			if n > 0 {
				h.log.Info("pruned the inbox of messages every agent had consumed past the retention", "messages", n)
			}
			wait = PruneEvery
		}
	}
}
