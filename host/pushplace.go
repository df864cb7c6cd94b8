package host

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/mcpl-go/mcpl/internal/channels"
	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/internal/lograte"
	"github.com/mcpl-go/mcpl/store"
)

// A push that delivers a message names its channel as
// origin.mcplChannelId and its thread as origin.threadId (RFC-011
// revision 3, §3): it is kept as that channel's message, so that the
// agent reads it with its channel, author and id, and its reply goes
// there. A channel its server never registered gets a lazy registration
// (internal/channels/lazy.go) first. A push naming no channel, or one
// that can't be registered, stays an event without a channel, as before.
// Admission is decided before this is read (the push's feature set and
// the pushEvents grant); the origin is the server's claim, and only says
// where the message is shown and answered, never whether it is admitted.

// pushOrigin is what a push's origin says of where its message is.
type pushOrigin struct {
	ChannelID *string `json:"mcplChannelId"`
	ThreadID  *string `json:"threadId"`
}

// placePush gives m its channel and thread from origin, when origin names
// a channel that is registered, or can be lazily.
func (h *Host) placePush(ctx context.Context, m *store.Message, origin json.RawMessage) {
	var o pushOrigin
	if len(origin) == 0 || json.Unmarshal(origin, &o) != nil || o.ChannelID == nil {
		return
	}
	thread := ""
	if o.ThreadID != nil {
		thread = *o.ThreadID
		if len(thread) > channels.MaxIDBytes || !content.Printable(thread) {
			h.limits.LogFor(&logPushUnplaced, m.Server, "server", m.Server, "event_id", m.MessageID, "reason", "its origin.threadId is longer than 512 bytes or holds an invisible or control character")
			return
		}
	}
	lo := h.channels.EnsureRegistered(ctx, m.Server, *o.ChannelID)
	if !lo.Registered {
		h.limits.LogFor(&logPushUnplaced, m.Server, "server", m.Server, "event_id", m.MessageID, "channel", *o.ChannelID, "reason", lo.Why)
		return
	}
	m.Channel, m.ThreadID, m.Directed = *o.ChannelID, thread, lo.Directed
}

// logPushUnplaced is a push whose origin names a channel it can't be
// shown in.
var logPushUnplaced = lograte.Kind{
	Msg:     "a push event names a channel (origin.mcplChannelId) that it can't be shown in, so the agents read it as an event without a channel, and a reply to it has nowhere to go",
	Summary: "%s more push events named channels they can't be shown in%s in %s",
	Level:   slog.LevelWarn,
	KeyAttr: "server",
}
