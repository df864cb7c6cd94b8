package chanserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mcpl-go/mcpl/protocol"
)

// registerBigArgs are register_big's arguments.
type registerBigArgs struct {
	Count  int    `json:"count"`
	Size   int    `json:"size"`
	Prefix string `json:"prefix"`
}

// RegisterBigResult is register_big's answer: the itemized result of each
// channel, in order, and the requests that failed (with the error).
type RegisterBigResult struct {
	Sent    int                      `json:"sent"`
	Results []protocol.ChannelResult `json:"results"`
	Failed  []string                 `json:"failed"`
}

// BigDescriptor is register_big's i'th descriptor (1-based): id
// prefix-i, type "big", label "big i", and metadata {"pad": "xxx..."}
// making its JSON exactly size bytes (or the smallest it can be, when
// size is less).
func BigDescriptor(prefix string, i, size int) string {
	head := fmt.Sprintf(`{"id":"%s-%d","type":"big","label":"big %d","metadata":{"pad":"`, prefix, i, i)
	const tail = `"}}`
	return head + strings.Repeat("x", max(size-len(head)-len(tail), 0)) + tail
}

// registerBig sends count channels/register requests of one descriptor
// each (BigDescriptor), one after another, each once the one before it is
// answered, so that what the host holds of them at once is one request.
func (srv *server) registerBig(ctx context.Context, a registerBigArgs) RegisterBigResult {
	prefix := a.Prefix
	if prefix == "" {
		prefix = "big"
	}
	res := RegisterBigResult{Results: []protocol.ChannelResult{}, Failed: []string{}}
	for i := 1; i <= a.Count && ctx.Err() == nil; i++ {
		params := json.RawMessage(`{"channels":[` + BigDescriptor(prefix, i, a.Size) + `]}`)
		res.Sent++
		var r protocol.ChannelResults
		if err := srv.peer.Call(ctx, protocol.MethodChannelsRegister, params, &r); err != nil {
			res.Failed = append(res.Failed, fmt.Sprintf("%s-%d: %v", prefix, i, err))
			continue
		}
		res.Results = append(res.Results, r.Results...)
	}
	return res
}
