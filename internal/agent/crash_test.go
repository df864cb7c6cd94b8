package agent

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/mcpl-go/mcpl/store"
)

// crashed is a store that stops writing once the process "dies".
type crashed struct {
	store.Store
	dead atomic.Bool
}

func (c *crashed) Record(ctx context.Context, e []store.Entry, cur map[string]int64) ([]store.Entry, error) {
	if c.dead.Load() {
		return nil, errors.New("the process died")
	}
	return c.Store.Record(ctx, e, cur)
}

// A fork's message survives a crash before its turn is recorded, though
// the primary passed it at once.
func TestForkMessageSurvivesACrash(t *testing.T) {
	mem := store.NewMemory()
	st := &crashed{Store: mem}
	synctest.Test(t, func(t *testing.T) {
		m := &fakeModel{held: true} // the fork's turn never ends
		opts := Options{Store: st, PerChannel: true, Agents: []Spec{{Name: "ada", Model: m}}}
		h := setup(t, &opts)
		h.env.channel("chat", "general", "open")
		h.start(opts)
		addMessages(t, mem, chanMsg("chat", "general", "g1", "lost?"))
		h.rt.Wake()
		synctest.Wait()
		if len(m.requests()) != 1 {
			t.Fatal("the fork is not thinking")
		}
		st.dead.Store(true) // crash: nothing more is recorded
		h.rt.Close()
	})
	synctest.Test(t, func(t *testing.T) {
		opts := Options{Store: mem, PerChannel: true}
		h := setup(t, &opts)
		h.env.channel("chat", "general", "open")
		h.start(opts)
		defer h.rt.Close()
		synctest.Wait()
		if evs := h.rec.of(forkGeneral, EventShown); len(evs) != 1 {
			t.Errorf("after the restart the fork was shown %+v; want g1 again (cursors %v)", evs, h.cursors())
		}
	})
}
