package agent

import (
	"errors"
	"sync"

	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/internal/model/schema"
)

// A tool's input schema is a server's, and a provider refuses a whole
// request when one tool's schema breaks its rules: one bad schema would
// fail every turn of every agent on that provider. So when an agent's
// model is a model.SchemaFitter, the tools it is offered are fitted to
// it, each time the list is built: a schema is sent as the fitter
// returns it (unchanged, or repaired without loss), and a tool whose
// schema can't be fitted is left out of that agent's list, and only its.
// The turn goes on with the other tools. The operator is told once per
// agent, tool and rule for the runtime's life (a warning naming the
// agent, the tool's server, the tool and the rule), not at every turn;
// a fork is its agent here.

// maxUnfit bounds the (agent, tool, rule) triples remembered as warned
// of: a server that renames its bad tools without end can't grow the
// set without bound. Past it, further unfit tools are still left out,
// and one more warning says they are no longer named.
const maxUnfit = 1024

// unfitWarnings is the runtime's record of the unfit tools warned of.
type unfitWarnings struct {
	mu     sync.Mutex
	warned map[[3]string]bool
	full   bool // the bound was reached, and said so
}

// fitTools fits tools' schemas to the runner's model, leaving out those
// that can't be.
func (r *runner) fitTools(tools []model.Tool) []model.Tool {
	f, ok := r.spec.Model.(model.SchemaFitter)
	if !ok {
		return tools
	}
	out := tools[:0]
	for _, tl := range tools {
		fitted, err := f.FitSchema(tl.InputSchema)
		if err != nil {
			r.rt.warnUnfit(r.spec.Name, tl.Name, err)
			continue
		}
		tl.InputSchema = fitted
		out = append(out, tl)
	}
	return out
}

// warnUnfit logs, once per agent, tool and rule, that agent is not
// offered tool.
func (rt *Runtime) warnUnfit(agent, tool string, err error) {
	rule := err.Error()
	var se *schema.Error
	if errors.As(err, &se) {
		rule = se.Rule
	}
	w := &rt.unfit
	w.mu.Lock()
	key := [3]string{agent, tool, rule}
	switch {
	case w.warned[key]:
		w.mu.Unlock()
		return
	case len(w.warned) >= maxUnfit:
		said := w.full
		w.full = true
		w.mu.Unlock()
		if !said {
			rt.log.Warn("more tools are left out of agents' tool lists than are named one by one; further ones are left out without a warning", "named", maxUnfit)
		}
		return
	}
	if w.warned == nil {
		w.warned = map[[3]string]bool{}
	}
	w.warned[key] = true
	w.mu.Unlock()
	server := group(tool)
	if server == "" {
		server = "the host"
	}
	rt.log.Warn("a tool is left out of an agent's tool list: the agent's model provider would refuse the tool's input schema, and the schema can't be repaired without changing what it means",
		"agent", agent, "server", server, "tool", tool, "rule", rule, "reason", err.Error())
}
