package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// A request to the host that fails matches one of these with errors.Is,
// as what is known of its effect says; a JSON-RPC error the host answered
// with is reached with errors.As and a *protocol.Error instead, for its
// code, message and data. The error's text is an operator's one line,
// such as `channels/register to "host": no answer within 60s`.
var (
	// ErrNotSent: nothing was written, so the host never saw the request.
	ErrNotSent = wire.ErrNotSent
	// ErrNoAnswer: the request was sent (or may have been) and no answer
	// came, or one that could not be read: it may have taken effect.
	ErrNoAnswer = wire.ErrNoAnswer
	// ErrConnectionClosed: the connection closed before the request was
	// sent or answered (with ErrNotSent or ErrNoAnswer beside it).
	ErrConnectionClosed = wire.ErrConnClosed
)

// ErrNoPolicy is what a capability-dependent Conn method returns (wrapped
// in a *GrantError) before the host has established a policy: until then a
// server must treat every capability-dependent behaviour as unavailable
// (SPEC §5.3). Wait on Conn.Ready first.
var ErrNoPolicy = errors.New("server: no policy established yet")

// ErrNotGranted is what a capability-dependent Conn method returns (wrapped
// in a *GrantError) when the policy in force does not grant what it needs,
// or when this server refused the policy.
var ErrNotGranted = errors.New("server: not granted")

// GrantError is a send refused here, before anything was written, because
// the policy does not allow it. It matches ErrNoPolicy or ErrNotGranted,
// and ErrNotSent.
type GrantError struct {
	// Method is the method that was not sent.
	Method string
	// Capability is the capability path it needs, when that is what is
	// missing.
	Capability string
	// FeatureSet is the feature set it names, when that set is not
	// enabled.
	FeatureSet string
	// Err is ErrNoPolicy or ErrNotGranted.
	Err error
}

func (e *GrantError) Error() string {
	switch {
	case errors.Is(e.Err, ErrNoPolicy):
		return fmt.Sprintf("server: %s not sent: the host has not established a policy yet (SPEC §5.3); wait for Conn.Ready", e.Method)
	case e.FeatureSet != "":
		return fmt.Sprintf("server: %s not sent: feature set %q is not enabled by the policy in force", e.Method, e.FeatureSet)
	case e.Capability != "":
		return fmt.Sprintf("server: %s not sent: capability %q is not granted", e.Method, e.Capability)
	}
	return fmt.Sprintf("server: %s not sent: this server refused the host's policy, so MCPL is off", e.Method)
}

// Unwrap returns ErrNoPolicy or ErrNotGranted, and ErrNotSent.
func (e *GrantError) Unwrap() []error { return []error{e.Err, ErrNotSent} }

// allow checks the policy in force for method, which needs capability and,
// when featureSet is not empty, that feature set enabled.
func (c *Conn) allow(method, capability, featureSet string) error {
	c.mu.Lock()
	st, p := c.state, c.policy
	c.mu.Unlock()
	switch {
	case st == statePending:
		return &GrantError{Method: method, Capability: capability, Err: ErrNoPolicy}
	case st == stateRefused || p == nil:
		return &GrantError{Method: method, Err: ErrNotGranted}
	case !p.Has(capability):
		return &GrantError{Method: method, Capability: capability, Err: ErrNotGranted}
	case featureSet != "" && !p.FeatureSetEnabled(featureSet):
		return &GrantError{Method: method, FeatureSet: featureSet, Err: ErrNotGranted}
	}
	return nil
}

// RegisterChannels sends channels/register (SPEC §14.3) and returns the
// host's itemized results, one per descriptor (SPEC §14.5). It needs
// channels.register granted: before the policy, or without it, it returns a
// *GrantError and sends nothing. A failed request is the wire's
// request fails as the package's errors say (ErrNotSent, ErrNoAnswer,
// ErrConnectionClosed, a *protocol.Error). Channels the
// host accepted are remembered (see Channels) and answer the host's
// channels/list.
func (c *Conn) RegisterChannels(ctx context.Context, channels ...protocol.ChannelDescriptor) ([]protocol.ChannelResult, error) {
	const method = protocol.MethodChannelsRegister
	if err := c.allow(method, "channels.register", ""); err != nil {
		return nil, err
	}
	var res protocol.ChannelResults
	if err := c.peer.Call(ctx, method, protocol.ChannelsRegisterParams{Channels: orEmptyDescs(channels)}, &res); err != nil {
		return nil, err
	}
	c.recordChannels(channels, nil, res.Results)
	return res.Results, nil
}

// ChangeChannels sends channels/changed as a Request, the form a host whose
// policy can reject descriptors requires (SPEC §14.5), and returns its
// itemized results. It needs channels.register, as RegisterChannels does.
// Removed channels are forgotten here whatever the host answers.
func (c *Conn) ChangeChannels(ctx context.Context, change protocol.ChannelsChangedParams) ([]protocol.ChannelResult, error) {
	const method = protocol.MethodChannelsChanged
	if err := c.allow(method, "channels.register", ""); err != nil {
		return nil, err
	}
	var res protocol.ChannelResults
	if err := c.peer.Call(ctx, method, change, &res); err != nil {
		return nil, err
	}
	c.recordChannels(append(slices.Clone(change.Added), change.Updated...), change.Removed, res.Results)
	return res.Results, nil
}

// recordChannels keeps the descriptors the host accepted, replacing one
// with the same id, and drops removed ids.
func (c *Conn) recordChannels(sent []protocol.ChannelDescriptor, removed []string, results []protocol.ChannelResult) {
	accepted := map[string]bool{}
	for _, r := range results {
		if r.Accepted {
			accepted[r.ID] = true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.channels = slices.DeleteFunc(c.channels, func(d protocol.ChannelDescriptor) bool {
		return slices.Contains(removed, d.ID)
	})
	for _, d := range sent {
		if !accepted[d.ID] {
			continue
		}
		if i := slices.IndexFunc(c.channels, func(x protocol.ChannelDescriptor) bool { return x.ID == d.ID }); i >= 0 {
			c.channels[i] = d
		} else {
			c.channels = append(c.channels, d)
		}
	}
}

func orEmptyDescs(d []protocol.ChannelDescriptor) []protocol.ChannelDescriptor {
	if d == nil {
		return []protocol.ChannelDescriptor{}
	}
	return d
}

// Message is one inbound message for channels/incoming (SPEC §14.3).
type Message struct {
	// ChannelID is the registered channel it arrived on. Required.
	ChannelID string
	// MessageID identifies it on its platform; empty means a unique id is
	// made up ("msg_" and random hex).
	MessageID string
	ThreadID  string
	Author    Author
	// Time is when it was posted; zero means now.
	Time time.Time
	// Content is its content blocks (see TextContent).
	Content []json.RawMessage
	// Metadata, if not nil, is sent as its JSON.
	Metadata any
	// Tags are namespaced labels (SPEC §16), such as "chat:mention".
	Tags []string
	// Coalesce, if not nil, makes the message an occurrence of a subject
	// (RFC-006; see HandlePushRender's file): EventID is then required,
	// and MessageID stays the platform message an edit shares with its
	// create. Deferred and ChannelID are for events only.
	Coalesce *protocol.Coalesce
	// EventID identifies the occurrence; sent when set.
	EventID string
}

// Author is who wrote a message. Zero fields are left out.
type Author struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
}

// Incoming sends messages in one channels/incoming request and returns the
// host's per-message results. It needs channels.incoming granted: before
// the policy, or without it, it returns a *GrantError and sends nothing.
// The host validates each message against the channels it accepted, so a
// message on a channel it did not accept comes back not accepted.
func (c *Conn) Incoming(ctx context.Context, msgs ...Message) ([]protocol.IncomingResult, error) {
	const method = protocol.MethodChannelsIncoming
	if err := c.allow(method, "channels.incoming", ""); err != nil {
		return nil, err
	}
	params := protocol.ChannelsIncomingParams{Messages: make([]protocol.IncomingMessage, 0, len(msgs))}
	for i, m := range msgs {
		im, err := m.wire()
		if err != nil {
			return nil, fmt.Errorf("server: %s not sent: message %d: %w", method, i, err)
		}
		params.Messages = append(params.Messages, im)
	}
	if len(params.Messages) == 0 {
		return nil, fmt.Errorf("server: %s not sent: no messages", method)
	}
	var res protocol.ChannelsIncomingResult
	if err := c.peer.Call(ctx, method, params, &res); err != nil {
		return nil, err
	}
	return res.Results, nil
}

func (m Message) wire() (protocol.IncomingMessage, error) {
	if m.ChannelID == "" {
		return protocol.IncomingMessage{}, errors.New("no channel id")
	}
	im := protocol.IncomingMessage{
		ChannelID: m.ChannelID,
		MessageID: m.MessageID,
		ThreadID:  m.ThreadID,
		Timestamp: timestamp(m.Time),
		Content:   orEmptyBlocks(m.Content),
		Tags:      m.Tags,
	}
	if im.MessageID == "" {
		im.MessageID = NewID("msg_")
	}
	if m.Author != (Author{}) {
		im.Author, _ = json.Marshal(m.Author)
	}
	if m.Coalesce != nil {
		if m.EventID == "" {
			return im, errors.New("a coalesced message needs its EventID (RFC-006 §3.1)")
		}
		im.Coalesce = m.Coalesce
	}
	im.EventID = m.EventID
	if m.Metadata != nil {
		b, err := json.Marshal(m.Metadata)
		if err != nil {
			return im, fmt.Errorf("metadata: %w", err)
		}
		im.Metadata = b
	}
	return im, nil
}

// Event is a push event (SPEC §9).
type Event struct {
	// FeatureSet is the declared feature set the event belongs to.
	// Required (SPEC §6.5), and it must be enabled.
	FeatureSet string
	// EventID identifies the event for the host's deduplication (SPEC
	// §9.4). Empty means a unique id is made up ("evt_" and random hex)
	// and reported in PushResult.EventID: to retry an event, send it again
	// with that id.
	EventID string
	// Time is when the event occurred; zero means now.
	Time time.Time
	// Origin, if not nil, is sent as its JSON: provenance, server-defined.
	Origin any
	// Content is the payload's content blocks (see TextContent).
	Content []json.RawMessage
	// Tags are namespaced labels (SPEC §16).
	Tags []string
	// Coalesce, if not nil, makes the event an occurrence of a subject the
	// host may replace while no model has read it (RFC-006): its key, and
	// whether it is deferred, a retraction or the subject's first.
	Coalesce *protocol.Coalesce
}

// PushResult is the host's answer to a push event, with the event's id.
type PushResult struct {
	// EventID is the id the event was sent with (or would have been,
	// when it was not sent): the one to retry with.
	EventID string
	protocol.PushEventResult
}

// PushEvent sends push/event (SPEC §9). It needs pushEvents granted and
// ev.FeatureSet enabled: before the policy, or without them, it returns a
// *GrantError and sends nothing. An event the host declines comes back
// with Accepted false and its Reason; a rejection is an error answer
// (errors.As with a *protocol.Error gives its code). Retry an event that
// was not sent, or not answered, with the same EventID: the host answers a
// retry as it answered the first.
func (c *Conn) PushEvent(ctx context.Context, ev Event) (PushResult, error) {
	const method = protocol.MethodPushEvent
	res := PushResult{EventID: ev.EventID}
	if res.EventID == "" {
		res.EventID = NewID("evt_")
	}
	if ev.FeatureSet == "" {
		return res, fmt.Errorf("server: %s not sent: an event must name its feature set (SPEC §6.5)", method)
	}
	if !slices.ContainsFunc(c.s.opts.FeatureSets, func(fs FeatureSet) bool { return fs.Name == ev.FeatureSet }) {
		return res, fmt.Errorf("server: %s not sent: feature set %q is not declared in Options.FeatureSets", method, ev.FeatureSet)
	}
	if err := c.allow(method, "pushEvents", ev.FeatureSet); err != nil {
		return res, err
	}
	p := protocol.PushEventParams{
		FeatureSet: ev.FeatureSet,
		EventID:    res.EventID,
		Timestamp:  timestamp(ev.Time),
		Tags:       ev.Tags,
	}
	p.Payload.Content = orEmptyBlocks(ev.Content)
	if ev.Coalesce != nil {
		b, err := json.Marshal(ev.Coalesce)
		if err != nil {
			return res, fmt.Errorf("server: %s not sent: coalesce: %w", method, err)
		}
		p.Coalesce = b
	}
	if ev.Origin != nil {
		b, err := json.Marshal(ev.Origin)
		if err != nil {
			return res, fmt.Errorf("server: %s not sent: origin: %w", method, err)
		}
		p.Origin = b
	}
	err := c.peer.Call(ctx, method, p, &res.PushEventResult)
	return res, err
}

// NewID returns prefix followed by 16 random hex digits: unique enough for
// event and message ids.
func NewID(prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func timestamp(t time.Time) string {
	if t.IsZero() {
		t = time.Now()
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func orEmptyBlocks(b []json.RawMessage) []json.RawMessage {
	if b == nil {
		return []json.RawMessage{}
	}
	return b
}

// TextContent returns one text content block per text.
func TextContent(texts ...string) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(texts))
	for _, t := range texts {
		b, _ := json.Marshal(protocol.TextContent{Type: "text", Text: t})
		out = append(out, b)
	}
	return out
}
