package agent

import (
	"strings"
	"sync"

	"github.com/mcpl-go/mcpl/internal/channels"
	"github.com/mcpl-go/mcpl/internal/model"
)

// tools are the tools the agent is offered: those it may use, less
// channel_open for a fork (which it can never call), fitted to its model.
func (r *runner) tools() []model.Tool {
	rd := r.reader()
	var out []model.Tool
	for _, tl := range r.rt.opts.Env.Tools() {
		if !rd.allowed(tl.Name) || (r.fork && tl.Name == channels.ToolOpen) {
			continue
		}
		out = append(out, tl)
	}
	return r.fitTools(out) // fit.go
}

// callTools runs one response's tool calls and returns their results, in
// the calls' order. Calls to different servers run at once; calls to one
// server (the host's own tools count as one) run in the order asked, as
// a later one may depend on an earlier one.
func (t *turn) callTools(calls []model.ToolCall) []model.Block {
	answers := make([]ToolAnswer, len(calls))
	groups := map[string][]int{}
	var order []string
	for i, c := range calls {
		g := group(c.Name)
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], i)
	}
	var wg sync.WaitGroup
	for _, g := range order {
		wg.Go(func() {
			for _, i := range groups[g] {
				answers[i] = t.callTool(calls[i])
			}
		})
	}
	wg.Wait()
	results := make([]model.Block, len(calls))
	for i, c := range calls {
		a := answers[i]
		// A result is cut as a message is (budget.go): one result can't
		// fill the window, nor come back whole from history.
		results[i] = model.Block{Type: model.ToolResult, Result: &model.Result{CallID: c.ID, Content: cut(a.Content, t.r.messageBound()), IsError: a.IsError}}
		t.event(Event{Event: EventTool, CallID: c.ID, Tool: c.Name, Outcome: a.Outcome, Text: blocksText(a.Content)})
	}
	return results
}

// group is the server a tool belongs to: its prefix, or "" for the
// host's own.
func group(name string) string {
	if i := strings.Index(name, "--"); i > 0 {
		return name[:i]
	}
	return ""
}

// callTool runs one call as the agent, within what it may do.
func (t *turn) callTool(c model.ToolCall) ToolAnswer {
	r := t.r
	refuse := func(text string) ToolAnswer {
		return ToolAnswer{Content: []model.Block{{Type: model.Text, Text: text}}, IsError: true, Outcome: "refused"}
	}
	if !r.reader().allowed(c.Name) {
		return refuse(textToolNotAllowed(c.Name))
	}
	args := c.Args
	if r.fork {
		server, posts := r.rt.opts.Env.Posts(c.Name)
		refusal, guarded := forkGuard(r.home, c.Name, server, posts, args)
		if refusal != "" {
			return refuse(refusal)
		}
		args = guarded
	}
	t.acted.Store(true)
	return r.rt.opts.Env.CallTool(t.ctx, r.name, c.Name, args)
}
