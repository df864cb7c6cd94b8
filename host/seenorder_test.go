package host_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpl-go/mcpl/internal/chanserver"
)

// newLeafRig is newAgentRig with the channel server started with flags
// (-acknowledge, -typing: the leaves it advertises only on request).
func newLeafRig(t *testing.T, cfgText string, files map[string]string, flags ...string) *agentRig {
	t.Helper()
	r := prepareAgentRig(t, cfgText, files)
	bin := chanserver.Binary(t)
	plain := list(bin, "-channels", chatChannels)
	with := list(slices.Concat([]string{bin}, flags, []string{"-channels", chatChannels})...)
	if !strings.Contains(r.cfg, plain) {
		t.Fatalf("the config has no server command %s:\n%s", plain, r.cfg)
	}
	r.cfg = strings.ReplaceAll(r.cfg, plain, with)
	if err := os.WriteFile(filepath.Join(r.dir, "config.yaml"), []byte(r.cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r.start()
	return r
}

// seenConfig is echoConfig with seen-acknowledgments asked for.
const seenConfig = `
servers:
  - id: chat
    command: SERVER
    channels: {sendTools: [send_message], acknowledgeSeen: "👀"}
agents:
  - name: ada
    model: {provider: scripted, echo: true}
    system: You are Ada.
`

// TestSeenBeforeReply: a model that answers at once still has its reply
// reach the server after the seen-acknowledgment of the message it
// answers, and after the server answered it: the server takes 200 ms to
// answer (within the host's 1 s wait, with room for a loaded machine), so
// a reply that didn't wait for the answer would come between the two.
// Run it with -count=20: the order must hold every time.
func TestSeenBeforeReply(t *testing.T) {
	r := newLeafRig(t, seenConfig, nil, "-acknowledge", "-acknowledge-delay", "200ms")
	r.incoming("a", "m1", "hello there", "chat:mention")
	r.tr.turnEnd(t, "ada", 1)
	// The turn ended once its reply was answered: the log has both.
	log := r.serverLog(0)
	ack := slices.Index(log, "acknowledge a m1: seen")
	answered := slices.Index(log, "acknowledged a m1")
	reply := slices.Index(log, "publish a: hello there")
	switch {
	case ack < 0 || answered < 0 || reply < 0:
		t.Fatalf("server log = %q, want the acknowledgment, its answer and the reply", log)
	case ack > reply:
		t.Errorf("server log = %q: the reply came before the seen-acknowledgment", log)
	case answered > reply:
		t.Errorf("server log = %q: the reply came before the seen-acknowledgment was answered", log)
	}
	n := 0
	for _, l := range log {
		if strings.HasPrefix(l, "acknowledge ") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("server log = %q, want one acknowledgment", log)
	}
}
