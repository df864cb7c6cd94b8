package agent

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

// The transcript: every agent's turns as JSON lines, one event a line, for
// a person or a program following what the agents did
// (docs/transcript.md). Each event names its agent and turn; a turn runs
// turn_start, then shown, model, tool, speech and notice events as they
// happen, then turn_end.

// Event kinds.
const (
	EventTurnStart = "turn_start"
	EventShown     = "shown"
	EventModel     = "model"
	EventTool      = "tool"
	EventSpeech    = "speech"
	EventNotice    = "notice"
	EventTyping    = "typing"
	EventStreamed  = "streamed"
	EventTurnEnd   = "turn_end"
	// EventTreated counts what a read of the inbox treated how (wake.go):
	// in a turn, after its turn_start; between turns, when what was read
	// woke nothing.
	EventTreated = "treated"
	// EventModelRetry is a model call's attempt that failed and is made
	// again; EventModelFailed the last attempt of a call that failed for
	// good, with why no other was made (Reason). retry.go.
	EventModelRetry  = "model_retry"
	EventModelFailed = "model_failed"
)

// Event is one line of the transcript. Fields an event kind doesn't use
// are left out.
type Event struct {
	At    time.Time `json:"at"`
	Agent string    `json:"agent"`
	Turn  int64     `json:"turn"`
	Event string    `json:"event"`

	// turn_start: what woke the agent.
	WokenBy []Wake `json:"wokenBy,omitempty"`
	// turn_start: what else it carried.
	Carried *Carried `json:"carried,omitempty"`
	// treated: the counts, by server and treatment.
	Treated []Treated `json:"treated,omitempty"`
	// shown, model, speech, notice, tool: the text.
	Text string `json:"text,omitempty"`
	// model: why it stopped, the tools it asked for, what it used.
	Stop  string     `json:"stop,omitempty"`
	Calls []CallLine `json:"calls,omitempty"`
	Usage *UsageLine `json:"usage,omitempty"`
	Model string     `json:"model,omitempty"`
	// model, model_retry, model_failed: the agent's provider, and the
	// attempt (model: the one that answered).
	Provider string   `json:"provider,omitempty"`
	Attempt  *Attempt `json:"attempt,omitempty"`
	// tool: the call it answers, and how it went.
	CallID string `json:"callId,omitempty"`
	Tool   string `json:"tool,omitempty"`
	// Outcome is a tool's (ok, or the failure's outcome) or speech's
	// (delivered, failed, unconfirmed).
	Outcome string `json:"outcome,omitempty"`
	// speech: where it went.
	Server  string `json:"server,omitempty"`
	Channel string `json:"channel,omitempty"`
	// turn_end: why the turn ended.
	Reason string `json:"reason,omitempty"`
}

// Wake is one thing that woke an agent.
type Wake struct {
	Kind      string `json:"kind"` // "channel" or "push"
	Server    string `json:"server"`
	Channel   string `json:"channel,omitempty"`
	MessageID string `json:"messageId,omitempty"`
}

// CallLine is a tool call the model asked for.
type CallLine struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

// UsageLine is a model call's tokens.
type UsageLine struct {
	In  int `json:"in"`
	Out int `json:"out"`
	// CacheRead and CacheWrite are the input tokens read from and written
	// to the provider's prompt cache, where it says.
	CacheRead  int `json:"cacheRead,omitempty"`
	CacheWrite int `json:"cacheWrite,omitempty"`
}

// Attempt is one attempt of a model call: its number (1 for the first),
// how long it took, and, when it is made again, the wait before that.
type Attempt struct {
	N      int   `json:"n"`
	Ms     int64 `json:"ms"`
	WaitMs int64 `json:"waitMs,omitempty"`
}

// Transcript writes events as JSON lines. Its methods are safe for
// concurrent use; each event is one Write, so lines never mix. A nil
// *Transcript writes nothing.
type Transcript struct {
	mu  sync.Mutex
	w   io.Writer
	tap func(Event)
	now func() time.Time
	err error
}

// NewTranscript writes to w.
func NewTranscript(w io.Writer) *Transcript { return NewTappedTranscript(w, nil) }

// NewTappedTranscript writes to w (nil for nowhere) and hands each event
// to tap (nil for no one) as well, in order, before it is written: for a
// reader that keeps events rather than lines (the status page, metrics).
// tap must return quickly, and keeps getting events after a failed write.
func NewTappedTranscript(w io.Writer, tap func(Event)) *Transcript {
	return &Transcript{w: w, tap: tap, now: time.Now}
}

// Write writes ev, stamped with the time if it has none. After a failed
// write it writes nothing more, and Err says why.
func (t *Transcript) Write(ev Event) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if ev.At.IsZero() {
		ev.At = t.now().UTC()
	}
	if t.tap != nil {
		t.tap(ev)
	}
	if t.err != nil || t.w == nil {
		return
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.err = err
		return
	}
	_, t.err = t.w.Write(append(b, '\n'))
}

// Err is the first write's failure, if one failed.
func (t *Transcript) Err() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}
