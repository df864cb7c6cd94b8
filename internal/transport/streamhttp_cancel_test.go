package transport_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/transport"
)

// A request this side cancels has its POST ended: the server sees the
// request's context end, the notification is POSTed too, and nothing is
// answered for the cancelled request; the stream goes on.
func TestStreamableHTTPCancelEndsPOST(t *testing.T) {
	t.Parallel()
	ended := make(chan struct{})
	url, calls := scriptedHTTP(t, func(w http.ResponseWriter, r *http.Request, c httpCall) {
		switch c.RPC.Method {
		case "tools/call":
			sseHeaders(w)
			<-r.Context().Done()
			close(ended)
		case "notifications/cancelled":
			w.WriteHeader(http.StatusAccepted)
		default:
			jsonAnswer(w, 200, result(c.RPC.ID, `{"after":true}`))
		}
	})
	s := dialHTTP(t, url, transport.HTTPOptions{ConnectTimeout: 50 * time.Millisecond})
	writeMsg(t, s, `{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"name":"block","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	nextCall(t, calls, http.MethodPost)
	writeMsg(t, s, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"call-1","reason":"no answer within 1s"}}`)
	select {
	case <-ended:
	case <-time.After(testTimeout):
		t.Fatal("the cancelled request's POST stayed open")
	}
	if c := nextCall(t, calls, http.MethodPost); c.RPC.Method != "notifications/cancelled" {
		t.Errorf("then POSTed %q, want the notification", c.RPC.Method)
	}
	writeMsg(t, s, listReq)
	msg, err := readWithin(t, s, testTimeout)
	if err != nil || !strings.Contains(string(msg), `"after":true`) {
		t.Fatalf("the next message read = %s, %v; want the next request's answer, nothing for the cancelled one", msg, err)
	}
}
