package chanserver

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// The channel leaves a test opts into (Config.Acknowledge, Config.Typing):
// channels/acknowledge and channels/typing, recorded in the log as they
// arrive, in order with the lifecycle requests; and the raw params of
// every channels/open, kept for the opens tool whatever the options.
//
// Log entries: "acknowledge c m: intent" for channels/acknowledge (the
// message id and the intent, as sent), answered {acknowledged: true,
// representation: <the value>} (with Config.AcknowledgeDelay,
// -acknowledge-delay, that much later, logged "acknowledged c m" as the
// answer goes); "typing c start" or "typing c stop" for
// channels/typing (the op as sent). Both stay out of the advertisement,
// and out of the log (answered method-not-found, dropped), unless opted
// into, so other tests' logs are as before.

// leafCaps adds the opted-into leaves to the channels advertisement.
func (srv *server) leafCaps(caps map[string]bool) {
	if srv.cfg.Acknowledge {
		caps["acknowledge"] = true
	}
	if srv.cfg.Typing {
		caps["typing"] = true
	}
}

// leaf handles channels/acknowledge and channels/typing; handled is false
// for other methods, and for a leaf not opted into.
func (srv *server) leaf(req *wire.Request) (result any, handled bool, err error) {
	var p struct {
		ChannelID string `json:"channelId"`
		MessageID string `json:"messageId"`
		Intent    string `json:"intent"`
		Value     string `json:"value"`
		Op        string `json:"op"`
	}
	switch {
	case req.Method == protocol.MethodChannelsAcknowledge && srv.cfg.Acknowledge:
		json.Unmarshal(req.Params, &p)
		srv.appendLog(fmt.Sprintf("acknowledge %s %s: %s", p.ChannelID, p.MessageID, p.Intent))
		res := protocol.ChannelsAcknowledgeResult{Acknowledged: true, Representation: p.Value}
		if d := srv.cfg.AcknowledgeDelay; d > 0 && !req.IsNotification() {
			reply := req.Defer()
			srv.work.Go(func() {
				t := time.NewTimer(d)
				defer t.Stop()
				select {
				case <-t.C:
				case <-srv.peer.Done():
				}
				srv.appendLog(fmt.Sprintf("acknowledged %s %s", p.ChannelID, p.MessageID))
				reply(res, nil)
			})
			return nil, true, nil
		}
		return res, true, nil
	case req.Method == protocol.MethodChannelsTyping && srv.cfg.Typing:
		json.Unmarshal(req.Params, &p)
		srv.appendLog("typing " + p.ChannelID + " " + p.Op)
		return nil, true, nil
	}
	return nil, false, nil
}

// appendLog records one entry and wakes the log's waiters.
func (srv *server) appendLog(entry string) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	srv.log = append(srv.log, entry)
	srv.changed.Broadcast()
}

// keepOpen keeps a channels/open's params as they came. The caller holds
// srv.mu.
func (srv *server) keepOpen(req *wire.Request) {
	if req.Method == protocol.MethodChannelsOpen {
		srv.opens = append(srv.opens, append(json.RawMessage(nil), req.Params...))
	}
}

// opensTool answers the opens tool: the raw params of every channels/open
// received, in order, as a JSON array; with count, once at least that
// many are in (up to 30 s).
func (srv *server) opensTool(ctx context.Context, req *wire.Request, count int) (any, error) {
	// Waited for on a goroutine of its own, as log is.
	reply := req.Defer()
	srv.work.Go(func() {
		reply(srv.waitFor(ctx, fmt.Sprintf("fewer than %d channels/open requests", count), func() bool { return len(srv.opens) >= count }, func() any {
			return append([]json.RawMessage{}, srv.opens...)
		}))
	})
	return nil, nil
}
