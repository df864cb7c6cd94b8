package host

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/agent"
	"github.com/mcpl-go/mcpl/internal/coalesce"
	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// What the agents ask of the coalescer (coalesce.go) as they read the
// inbox and assemble a request: whether an occurrence is still to be
// shown, and what each shows in the request being assembled, deferred
// batches rendered there (RFC-006 §5).

// Coalesced says what a reader does with server's occurrence occ (a row's
// EventID).
func (c *coalescer) Coalesced(server, occ string) agent.Coalesced {
	binding, id := c.resolve(server, occ)
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.row(binding, id)
	if r == nil {
		return agent.Coalesced{}
	}
	if r.Withdrawn {
		return agent.Coalesced{Withdrawn: true, By: r.By}
	}
	_, _, tracked := c.tab.Occurrence(binding, id)
	return agent.Coalesced{Tracked: tracked || r.Materialized, Since: r.Since}
}

// Assemble decides, for a request about to include server's occurrences
// occs, what each shows: a batch's placeholder is rendered (or falls back)
// now, an occurrence withdrawn since it was read is left out, and every
// one shown is consumed.
func (c *coalescer) Assemble(ctx context.Context, server string, occs []string) []agent.Assembled {
	out := make([]agent.Assembled, len(occs))
	type ref struct{ binding, id string }
	refs := make([]ref, len(occs))
	for i, o := range occs {
		refs[i].binding, refs[i].id = c.resolve(server, o)
	}
	type job struct {
		ref
		ren coalesce.Render
	}
	var jobs []job
	var waits []chan struct{}
	current := c.binding(server)
	c.mu.Lock()
	sess, authorized := c.h.renderSession(server)
	for _, rf := range refs {
		if c.row(rf.binding, rf.id) == nil {
			continue
		}
		key, kind, tracked := c.tab.Occurrence(rf.binding, rf.id)
		switch {
		case !tracked || kind == coalesce.KindOccupant:
		case kind == coalesce.KindRendering:
			if w := c.waits[rf.binding+"\x00"+rf.id]; w != nil {
				waits = append(waits, w)
			}
		case !authorized(key):
			if d, ok := c.tab.Lapse(key); ok {
				c.decided(d, nil)
			}
		case sess == nil || rf.binding != current:
			// Disconnected, or a binding the server no longer is (its
			// endpoint was reconfigured): no render to ask for.
			if d, ok := c.tab.Fallback(key); ok {
				c.decided(d, nil)
			}
		default:
			ren, ok := c.tab.StartRender(key)
			if !ok {
				// Its subject's previous render is still open: this batch
				// falls back rather than wait behind it.
				if d, ok := c.tab.Fallback(key); ok {
					c.decided(d, nil)
				}
				continue
			}
			c.rendering[server]++
			c.waits[rf.binding+"\x00"+rf.id] = make(chan struct{})
			jobs = append(jobs, job{rf, ren})
		}
	}
	c.mu.Unlock()

	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Go(func() { c.render(ctx, sess, server, j.binding, j.id, j.ren) })
	}
	wg.Wait()
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	shown := map[string][]string{}
	for i, rf := range refs {
		if r := c.row(rf.binding, rf.id); r != nil {
			_, kind, tracked := c.tab.Occurrence(rf.binding, rf.id)
			switch {
			case r.Withdrawn, tracked && kind != coalesce.KindOccupant:
				// Gone, or still rendering for another (ctx ended): not
				// shown.
				out[i].Gone = true
				continue
			case r.Materialized && r.Content != nil:
				out[i].Content = r.Content
			}
		}
		shown[rf.binding] = append(shown[rf.binding], rf.id)
	}
	n := 0
	for binding, ids := range shown {
		n += c.tab.Consume(binding, ids...)
	}
	if n > 0 || len(jobs) > 0 {
		if err := c.save(context.WithoutCancel(ctx)); err != nil {
			c.log.Error("the coalescing state could not be stored after an assembly; a restart may show an event's older version again", "server", server, "error", err.Error())
		}
	}
	return out
}

// render sends one push/render and decides its batch.
func (c *coalescer) render(ctx context.Context, sess *session.Session, server, binding, id string, ren coalesce.Render) {
	var res protocol.PushRenderResult
	deadline := time.Now().Add(c.timeout)
	err := sess.Call(ctx, protocol.MethodPushRender, ren.Params, &res, wire.WithTimeout(c.timeout))
	if err != nil && !sess.Connected() {
		// The connection ended under the render. Whether its batch falls
		// back or lapses is the authority the server has when it is back
		// (its grant may have changed with it: an operator's restart),
		// waited for within the render's own deadline.
		c.h.awaitConnected(ctx, server, deadline)
	}
	out := coalesce.Rendered
	switch {
	case err != nil:
		out = coalesce.RenderFailed
		c.log.Info("a render of deferred events failed; the agents are shown its fallback", "server", server, "event_id", ren.Params.EventID, "key", ren.Params.Key, "error", err.Error())
	case len(res.Content) == 0:
		out = coalesce.RenderEmpty
	case !content.Shows(res.Content):
		out = coalesce.RenderFailed
		c.log.Info("a render of deferred events answered content that shows nothing an agent could read; the agents are shown its fallback", "server", server, "event_id", ren.Params.EventID)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, authorized := c.h.renderSession(server); !authorized(ren.Subject) {
		out = coalesce.RenderLapsed
	}
	d := c.tab.Finish(ren.ID, out)
	c.h.metrics.Render(server, renderResult(d))
	if d.Discarded {
		c.log.Info("a render's result came after its batch was withdrawn or shown otherwise, and is discarded", "server", server, "event_id", ren.Params.EventID, "why", d.Cause.String())
	} else {
		c.decided(d, res.Content)
	}
	c.rendering[server]--
	if w := c.waits[binding+"\x00"+id]; w != nil {
		close(w)
		delete(c.waits, binding+"\x00"+id)
	}
}

// renderResult names what a render's decision showed, for the metrics.
func renderResult(d coalesce.Decision) string {
	switch {
	case d.Discarded:
		return "discarded"
	case d.Materialize == coalesce.MaterializeResult:
		return "rendered"
	case d.Materialize == coalesce.MaterializeFallback:
		return "fallback"
	case d.Cause == coalesce.CauseLapsed:
		return "lapsed"
	}
	return "empty"
}

// decided applies a batch's decision to its placeholder row; the caller
// holds mu.
func (c *coalescer) decided(d coalesce.Decision, rendered []json.RawMessage) {
	b := d.Subject.Binding
	r := c.row(b, d.EventID)
	if r == nil {
		r = &coRow{}
		c.setRow(b, d.EventID, r)
	}
	switch d.Materialize {
	case coalesce.MaterializeNothing:
		r.Withdrawn = true
	case coalesce.MaterializeResult:
		r.Materialized, r.Content = true, slices.Clone(rendered)
	case coalesce.MaterializeFallback:
		r.Materialized, r.Content = true, nil
	}
}

// renderSession is server's session to render on (nil when it is not
// connected), and whether a subject's batch is still within its
// authority: pushEvents granted and its feature set enabled.
func (h *Host) renderSession(server string) (*session.Session, func(coalesce.Subject) bool) {
	h.mu.Lock()
	srv := h.servers[server]
	h.mu.Unlock()
	if srv == nil || srv.sess == nil || !srv.sess.Connected() {
		// Disconnected: a batch falls back (§5.3); whether it may still be
		// shown is the authority it was admitted under.
		return nil, func(coalesce.Subject) bool { return true }
	}
	g := srv.sess.Grant()
	return srv.sess, func(key coalesce.Subject) bool {
		if key.Scope == coalesce.ScopeChannel {
			_, registered := h.channels.Registered(server, key.ScopeID)
			return registered && g.Has("channels.incoming")
		}
		if !g.Has("pushEvents") {
			return false
		}
		fs, ok := g.FeatureSet(key.ScopeID)
		return ok && fs.State == grant.StateEnabled
	}
}

// awaitConnected waits until server is connected with its policy
// established, deadline passes, or ctx ends.
func (h *Host) awaitConnected(ctx context.Context, server string, deadline time.Time) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		if st, ok := h.Server(server); ok && st.Connected && len(st.Grant.Effective) > 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-h.ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// renderingFor reports whether a render of server's is open.
func (c *coalescer) renderingFor(server string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rendering[server] > 0
}
