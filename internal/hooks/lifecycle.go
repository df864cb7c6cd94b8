package hooks

import (
	"log/slog"
	"sync"

	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/protocol"
)

// Lifecycle phases (SPEC §10.5).
const (
	PhaseStarted   = "started"
	PhaseCompleted = "completed"
	PhaseAborted   = "aborted"
	PhaseFailed    = "failed"
)

// lifecycleParams is inference/lifecycle's params (SPEC §10.5). It has no
// field that could carry message content, by design.
type lifecycleParams struct {
	InferenceID    string                    `json:"inferenceId"`
	ConversationID string                    `json:"conversationId"`
	TurnIndex      int                       `json:"turnIndex"`
	Phase          string                    `json:"phase"`
	Model          *protocol.ModelInfoResult `json:"model,omitempty"`
	Usage          *usage                    `json:"usage,omitempty"`
}

// usage is a completed inference's token usage.
type usage struct {
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
}

// Inference is one started inference, awaiting its terminal phase: exactly
// one of Completed, Aborted and Failed sends it; the first call wins. A nil
// *Inference's methods do nothing.
type Inference struct {
	r       *Runner
	turn    Turn
	targets []Target // those "started" reached

	mu     sync.Mutex
	ended  string // the terminal phase sent, "" until then
	warned bool   // a later terminal has been logged
}

// Start sends inference/lifecycle phase "started" to every target granted
// inferenceLifecycle now (with the model only to those granted modelInfo),
// and returns the inference, whose terminal goes to the targets "started"
// reached. It never returns nil. Notifications are sent on the calling
// goroutine; one that fails is logged and the rest are still sent.
func (r *Runner) Start(targets []Target, t Turn) *Inference {
	i := &Inference{r: r, turn: t}
	for _, tg := range targets {
		if i.send(tg, PhaseStarted, nil) {
			i.targets = append(i.targets, tg)
		}
	}
	return i
}

// Completed sends phase "completed" with u as its usage, unless a
// terminal was already sent.
func (i *Inference) Completed(u model.Usage) {
	i.end(PhaseCompleted, &usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens})
}

// Aborted sends phase "aborted", unless a terminal was already sent.
func (i *Inference) Aborted() { i.end(PhaseAborted, nil) }

// Failed sends phase "failed", unless a terminal was already sent.
func (i *Inference) Failed() { i.end(PhaseFailed, nil) }

// end sends the terminal phase once; a later call sends nothing and is
// logged, once, as the caller's defect (SPEC §10.5: a second terminal is a
// conformance defect).
func (i *Inference) end(phase string, u *usage) {
	if i == nil {
		return
	}
	i.mu.Lock()
	if first := i.ended; first != "" {
		warn := !i.warned
		i.warned = true
		i.mu.Unlock()
		if warn {
			i.r.log.Error("inference/lifecycle: a second terminal phase for one inference was asked for and not sent (a defect of the caller; later ones are not logged)",
				slog.String("inference_id", i.turn.InferenceID), slog.String("sent", first), slog.String("refused", phase))
		}
		return
	}
	i.ended = phase
	i.mu.Unlock()
	for _, tg := range i.targets {
		i.send(tg, phase, u)
	}
}

// send sends phase to tg if tg is granted inferenceLifecycle now, with the
// model if it is granted modelInfo now, and reports whether it was sent.
func (i *Inference) send(tg Target, phase string, u *usage) bool {
	g := tg.grantNow()
	if !g.Has(PathLifecycle) || tg.Notify == nil {
		return false
	}
	p := lifecycleParams{InferenceID: i.turn.InferenceID, ConversationID: i.turn.ConversationID, TurnIndex: i.turn.TurnIndex, Phase: phase, Usage: u}
	if g.Has(PathModelInfo) {
		p.Model = i.turn.modelInfo()
	}
	if err := tg.Notify(MethodLifecycle, p); err != nil {
		i.r.log.Warn("inference/lifecycle not sent", slog.String("server", tg.Server), slog.String("inference_id", i.turn.InferenceID),
			slog.String("phase", phase), slog.String("error", err.Error()))
		return false
	}
	return true
}
