package logtest

import (
	"log/slog"
	"testing"
)

func TestRecorder(t *testing.T) {
	r := New()
	log := r.Logger().With("server", "chat")
	log.Info("connected", "attempt", 2)
	log.WithGroup("call").Warn("deadline passed", "ms", int64(1000))
	log.Debug("noise")

	got := r.One(t, "connected")
	if got.Level != slog.LevelInfo || got.Attr("server") != "chat" || got.Attrs["attempt"].Int64() != 2 {
		t.Errorf("connected = %+v", got)
	}
	if d := r.One(t, "deadline passed"); d.Attr("call.ms") != "1000" || d.Attr("server") != "chat" {
		t.Errorf("deadline passed = %+v", d)
	}
	if n := len(r.AtLeast(slog.LevelWarn)); n != 1 {
		t.Errorf("%d records at warn or above, want 1", n)
	}
	if got.Attr("absent") != "" || len(r.Find("nothing")) != 0 {
		t.Error("an absent attribute or message was found")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Wait(t, "later", 2)
	}()
	log.Info("later")
	log.Info("later")
	<-done
	if n := len(r.All()); n != 5 {
		t.Errorf("%d records, want 5", n)
	}
}
