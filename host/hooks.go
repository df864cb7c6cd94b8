package host

import (
	"context"

	"github.com/mcpl-go/mcpl/internal/agent"
	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/internal/hooks"
	"github.com/mcpl-go/mcpl/internal/inference"
	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// The servers' side of the agents' model calls: context hooks and
// inference/lifecycle around each call (internal/hooks), and the
// inference servers ask for (inference/request, model/info;
// internal/inference).

// provenanceInjection is the stub provenance of a reference a context
// hook injected.
const provenanceInjection = "from a context hook"

// hookTargets are the registered servers, in the order they were
// configured or connected.
func (h *Host) hookTargets() []hooks.Target {
	h.mu.Lock()
	var out []hooks.Target
	for _, id := range h.order {
		srv := h.servers[id]
		if srv == nil || srv.sess == nil {
			continue
		}
		sess := srv.sess
		out = append(out, hooks.Target{
			Server: id,
			Grant:  sess.Grant,
			Call: func(ctx context.Context, method string, params, result any) error {
				return sess.Call(ctx, method, params, result)
			},
			Notify: func(method string, params any) error {
				return sess.Notify(context.Background(), method, params)
			},
		})
	}
	h.mu.Unlock()
	return out
}

// agentHooks is the servers' context hooks, for the agents' model calls.
func (h *Host) agentHooks() agent.Hooks { return hostHooks{h} }

type hostHooks struct{ h *Host }

func turnOf(inf agent.Inference) hooks.Turn {
	return hooks.Turn{InferenceID: inf.ID, ConversationID: inf.Conversation, TurnIndex: inf.TurnIndex, UserMessage: inf.UserMessage, Model: inf.Model}
}

// Before runs context/beforeInference; each injection's content is shown
// as the content layer shows a server's blocks.
func (k hostHooks) Before(ctx context.Context, inf agent.Inference) (system, beforeUser, afterUser []model.Block) {
	targets := k.h.hookTargets()
	if len(targets) == 0 {
		return nil, nil, nil
	}
	for _, in := range k.h.hooks.Before(ctx, targets, turnOf(inf)) {
		lane := content.Lane{Server: in.Server, Provenance: provenanceInjection, Refs: k.h.refs}
		blocks := agent.Parts(lane.View(in.Content))
		switch in.Position {
		case hooks.PositionSystem:
			system = append(system, blocks...)
		case hooks.PositionBeforeUser:
			beforeUser = append(beforeUser, blocks...)
		case hooks.PositionAfterUser:
			afterUser = append(afterUser, blocks...)
		}
	}
	return system, beforeUser, afterUser
}

func (k hostHooks) Start(inf agent.Inference) agent.Lifecycle {
	return k.h.hooks.Start(k.h.hookTargets(), turnOf(inf))
}

// routeInference picks the model serving a server's inference/request:
// the agent the first matching route names.
func (h *Host) routeInference(server, featureSet string) (model.Model, string, bool) {
	set := h.running()
	if set == nil {
		return nil, "", false
	}
	name, ok := set.cfg.InferenceAgent(server, featureSet)
	m := set.models[name]
	return m, name, ok && m != nil
}

// serveInference answers inference/request off the connection's dispatch
// goroutine: the model may take long. Its bytes stay counted against the
// connection's inbound budget until it is answered.
func (h *Host) serveInference(srv *server, req *wire.Request) (any, error) {
	h.mu.Lock()
	sess := srv.sess
	h.mu.Unlock()
	if sess == nil || req.IsNotification() {
		return nil, nil
	}
	// Read as it arrives, on the connection's dispatch goroutine: the
	// grant, and whether a hook to this server is in flight (the hook's
	// answer may overtake the serving goroutine).
	id, g, inHook := srv.cfg.ID, sess.Grant(), h.hooks.InHook(srv.cfg.ID)
	if h.coalescer.renderingFor(id) {
		h.log.Info("an inference/request came while the host waited for the server's push/render, and was refused", "server", id)
		return nil, errInferenceInRender
	}
	release, reply := req.Hold(), req.Defer()
	notify := func(method string, params any) error { return sess.Notify(h.ctx, method, params) }
	if !h.goBackground(func() {
		defer release()
		reply(h.infer.Serve(h.ctx, id, g, inHook, req.ID(), req.Params, notify))
	}) {
		release()
		reply(nil, &protocol.Error{Code: protocol.CodeInternalError, Message: "this host is shutting down, so no model was asked: ask again later"})
	}
	return nil, nil
}

// modelInfo answers model/info with the primary agent's model.
func (h *Host) modelInfo() (any, error) {
	var m model.Model
	if set := h.running(); set != nil {
		if p, ok := set.cfg.Primary(); ok {
			m = set.models[p.Name]
		}
	}
	return inference.ModelInfo(m)
}

// errInferenceInRender refuses an inference/request that comes while a
// push/render to its server is open (RFC-006 §5.2; SPEC §10.7's loop
// prevention).
var errInferenceInRender = protocol.NewError(protocol.CodeInvalidRequest,
	"inference/request refused: a server may not ask for inference while it renders deferred events (RFC-006 §5.2, SPEC §10.7), and a push/render to this server is in flight; ask after answering it", nil)
