package host_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/agent"
	"github.com/mcpl-go/mcpl/internal/hostile"
)

// TestAgentNotHeldBySlowServer: a server that answers initialize and the
// policy but never answers tools/list (and has no request deadline) does
// not hold up another server's agent: a message that addresses the agent
// in the chat server's open channel runs its turn, and its reply is
// published, while that tools/list is still unanswered and the host's
// connects have not settled.
func TestAgentNotHeldBySlowServer(t *testing.T) {
	record := filepath.Join(t.TempDir(), "slow.record")
	slow := list(hostile.Binary(t), "-mcpl", `{"version":"0.5"}`, "-never-answer", "tools/list", "-record", record)
	r := prepareAgentRig(t, `
servers:
  - id: slow
    command: `+slow+`
    requestTimeout: 0
  - id: chat
    command: SERVER
agents:
  - name: ada
    model: {provider: scripted, echo: true}
`, nil)
	r.begin()
	waitLog(t, r.rec, logListed, "chat", 1)
	// The slow server has its tools/list: polled, as a file growing has
	// no event.
	awaitRecorded(t, record, `"method":"tools/list"`)

	r.incoming("a", "m1", "are you there?", "chat:mention")
	r.tr.turnEnd(t, "ada", 1)
	evs := r.tr.turn("ada", 1)
	if sp := find(evs, agent.EventSpeech); len(sp) != 1 || sp[0].Channel != "a" || sp[0].Outcome != "delivered" || sp[0].Text != "are you there?" {
		t.Errorf("speech = %+v", sp)
	}
	if log := r.serverLog(1); !slices.Contains(log, "publish a: are you there?") {
		t.Errorf("the chat server got %q, want the reply published", log)
	}
	// All of that while the slow server's listing is still out.
	select {
	case <-r.h.Settled():
		t.Errorf("the host's connects settled: the slow server's tools/list was answered, or given up")
	default:
	}
	for _, name := range toolNames(r.h) {
		if strings.HasPrefix(name, "slow--") {
			t.Errorf("the slow server has a tool listed: %s", name)
		}
	}
	if b, _ := os.ReadFile(record); !strings.Contains(string(b), `"method":"featureSets/update"`) {
		t.Errorf("the slow server never got the policy; it received:\n%s", b)
	}
}

// awaitRecorded waits (up to 30 s, polling) for a -record file to hold a
// line containing want.
func awaitRecorded(t *testing.T, path, want string) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), want) {
			return
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			b, _ := os.ReadFile(path)
			t.Fatalf("the server recorded no %s within 30 s; it received:\n%s", want, b)
		}
	}
}
