package chanserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/mcpl-go/mcpl/protocol"
)

// writtenKey is the context key under which a call asks watchStream to
// tell it its request is written (the value is a chan struct{}, closed
// once the write returns, either way).
type writtenKey struct{}

// burstArgs are incoming_burst's arguments.
type burstArgs struct {
	ChannelID string          `json:"channelId"`
	Count     int             `json:"count"`
	Inflight  int             `json:"inflight"`
	Prefix    string          `json:"prefix"`
	Size      int             `json:"size"`
	Tags      json.RawMessage `json:"tags"`
}

// BurstResult is incoming_burst's answer.
type BurstResult struct {
	Sent     int `json:"sent"`
	Accepted int `json:"accepted"`
	// NotAccepted are the messages the host answered accepted: false
	// for (the first 100, with their reasons); Failed those whose request
	// failed (the first 100, with the error).
	NotAccepted []BurstProblem `json:"notAccepted"`
	Failed      []BurstProblem `json:"failed"`
	// NotAcceptedCount and FailedCount count them all.
	NotAcceptedCount int `json:"notAcceptedCount"`
	FailedCount      int `json:"failedCount"`
}

// BurstProblem is one message of a burst that was not accepted.
type BurstProblem struct {
	MessageID string `json:"messageId"`
	Why       string `json:"why"`
}

// maxProblems bounds the problems a BurstResult lists.
const maxProblems = 100

// BurstMessageID is the id of a burst's i'th message (1-based).
func BurstMessageID(prefix string, i int) string { return fmt.Sprintf("%s-%d", prefix, i) }

// BurstText is the text of a burst's i'th message: its id, then, when size
// is more than that, a space and x's to size bytes.
func BurstText(prefix string, i, size int) string {
	id := BurstMessageID(prefix, i)
	if size <= len(id)+1 {
		return id
	}
	return id + " " + strings.Repeat("x", size-len(id)-1)
}

// burst sends count channels/incoming requests of one message each, in
// order, with up to inflight of them unanswered at once: request i+1 is
// written only once request i is, so the host reads them in the order of
// their ids however many are out.
func (srv *server) burst(ctx context.Context, a burstArgs) BurstResult {
	inflight := max(a.Inflight, 1)
	prefix := a.Prefix
	if prefix == "" {
		prefix = "b"
	}
	var tags json.RawMessage
	if len(a.Tags) > 0 && string(a.Tags) != "null" {
		tags = a.Tags
	}
	var (
		mu  sync.Mutex
		res BurstResult
		wg  sync.WaitGroup
	)
	problem := func(list *[]BurstProblem, n *int, id, why string) {
		mu.Lock()
		defer mu.Unlock()
		*n++
		if len(*list) < maxProblems {
			*list = append(*list, BurstProblem{MessageID: id, Why: why})
		}
	}
	slots := make(chan struct{}, inflight)
	for i := 1; i <= a.Count; i++ {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		id := BurstMessageID(prefix, i)
		msg := map[string]any{"channelId": a.ChannelID, "messageId": id, "author": map[string]string{"id": "u1", "name": "Ada"},
			"content": []map[string]string{{"type": "text", "text": BurstText(prefix, i, a.Size)}}}
		if tags != nil {
			msg["tags"] = tags
		}
		written := make(chan struct{})
		done := make(chan struct{})
		res.Sent++
		wg.Go(func() {
			defer close(done)
			defer func() { <-slots }()
			var r protocol.ChannelsIncomingResult
			err := srv.peer.Call(context.WithValue(ctx, writtenKey{}, written), protocol.MethodChannelsIncoming, map[string]any{"messages": []any{msg}}, &r)
			switch {
			case err != nil:
				problem(&res.Failed, &res.FailedCount, id, err.Error())
			case len(r.Results) != 1:
				problem(&res.Failed, &res.FailedCount, id, fmt.Sprintf("%d results for one message", len(r.Results)))
			case r.Results[0].Accepted:
				mu.Lock()
				res.Accepted++
				mu.Unlock()
			default:
				problem(&res.NotAccepted, &res.NotAcceptedCount, id, r.Results[0].Reason)
			}
		})
		// The next request is written after this one (or after this
		// call failed without writing).
		select {
		case <-written:
		case <-done:
		}
	}
	wg.Wait()
	if res.NotAccepted == nil {
		res.NotAccepted = []BurstProblem{}
	}
	if res.Failed == nil {
		res.Failed = []BurstProblem{}
	}
	return res
}
