package host_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/model/fakeapi"
)

// TestAgentBacklog: through the real host, an agent's backlog counts the
// inbox messages it has not consumed: while its model call is held, the
// message its turn read and the three that came after; none once its
// turns have recorded.
func TestAgentBacklog(t *testing.T) {
	api := fakeapi.NewOpenAI(t)
	api.Hold()
	r := newAgentRig(t, strings.Replace(openaiConfig, "APIURL", api.URL, 1), nil)
	r.serverLog(3)
	backlog := func() int {
		n, _ := r.h.Backlog(t.Context(), "ada")
		return n
	}
	r.incoming("a", "m0", "first")
	api.WaitHeld(1)
	for i := range 3 {
		r.incoming("a", fmt.Sprint("m", i+1), "more")
	}
	if n := backlog(); n != 4 {
		t.Errorf("backlog %d while the turn's call is held, want 4", n)
	}
	api.Release()
	deadline := time.Now().Add(30 * time.Second)
	for backlog() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := backlog(); n != 0 {
		t.Errorf("backlog %d once the turns ended, want 0", n)
	}
}
