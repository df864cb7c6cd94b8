package host

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/internal/logtest"
	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/store"
)

// A push event that arrives once the inbox has closed (the host is
// stopping; its sessions close after the inbox) is refused with the
// shutdown text, and the log says so at debug: a refusal at shutdown is no
// failure of the store.
func TestPushEventRefusedAtShutdown(t *testing.T) {
	logs := logtest.New()
	h, err := New(Options{Logger: logs.Logger(), Store: store.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	cfg, err := config.Parse([]byte("agents:\n  - name: ada\n    model: {provider: scripted, echo: true}\n"), "host.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(cfg); err != nil {
		t.Fatal(err)
	}
	h.inbox.Close()
	ev := session.PushEvent{Server: "s", Raw: json.RawMessage(`{}`)}
	ev.Params.EventID = "e1"
	ev.Params.Payload.Content = []json.RawMessage{json.RawMessage(`{"type":"text","text":"hi"}`)}
	res, err := h.acceptPushEvent(context.Background(), ev)
	var perr *protocol.Error
	if res.Accepted || !errors.As(err, &perr) || perr.Message != "this host is shutting down, so the event was not accepted: send it again later" {
		t.Errorf("push/event = %+v, %v; want it refused as the host stops", res, err)
	}
	if hi := logs.AtLeast(slog.LevelWarn); len(hi) != 0 {
		t.Errorf("logged at WARN or above: %+v", hi)
	}
	logs.One(t, "a push event refused: this host is shutting down")
}
