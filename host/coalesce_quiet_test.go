package host_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpl-go/mcpl/protocol"
	mcplserver "github.com/mcpl-go/mcpl/server"
)

// TestSubjectQuietThroughSDK: a coalesced subject replaced faster than the
// agent's debounce keeps a quiet of its own (RFC-006 §4.2: coalescing
// neither shortens nor extends an unrelated event's debounce). A server
// replaces a waking subject every 50 ms; a waking question that comes
// meanwhile is answered after its own debounce (300 ms), not at the
// subject's bound (30 s) or once the replacements stop (20 s in). The
// bound on when the question's request comes is 10 s, a wide margin on a
// loaded machine either way.
func TestSubjectQuietThroughSDK(t *testing.T) {
	c, api := sdkHost(t, prometheus.NewRegistry(), `      debounce: 300ms
      maxDelay: 30s
`, func(context.Context, mcplserver.RenderRequest) (mcplserver.RenderResult, error) {
		return mcplserver.RenderResult{}, nil
	})
	push := func(id, text string, co *protocol.Coalesce) error {
		res, err := c.PushEvent(t.Context(), mcplserver.Event{FeatureSet: "doc", EventID: id, Content: mcplserver.TextContent(text), Coalesce: co})
		if err == nil && !res.Accepted {
			err = fmt.Errorf("refused: %+v", res)
		}
		return err
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := range 400 { // 20 s at most
			if err := push(fmt.Sprint("presence-", i), fmt.Sprint("PRESENCE version ", i), &protocol.Coalesce{Key: "presence"}); err != nil {
				done <- err
				return
			}
			select {
			case <-stop:
				done <- nil
				return
			case <-tick.C:
			}
		}
		done <- nil
	}()
	time.Sleep(time.Second) // a run of replacements is under way
	asked := time.Now()
	if err := push("question", "QUESTION for ada", nil); err != nil {
		t.Fatal(err)
	}
	api.Wait(1)
	took := time.Since(asked)
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("a replacement: %v", err)
	}
	if took > 10*time.Second {
		t.Errorf("the question's turn came %v after it, want its own debounce (300 ms), not the subject's bound", took)
	}
	// The subject's version the turn read may be replaced before the
	// request is assembled (then it shows none: never a replaced one).
	text := requestText(api.Requests()[0])
	if !strings.Contains(text, "QUESTION for ada") {
		t.Errorf("the first request has not the question:\n%s", text)
	}
	if n := strings.Count(text, "PRESENCE version"); n > 1 {
		t.Errorf("the first request shows %d versions of the subject, want its current one at most:\n%s", n, text)
	}
}
