package channels

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/mcpl-go/mcpl/internal/lograte"
	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/store"
)

// What the host tells a channel's server while an agent works toward
// speech there: that it is typing (channels/typing), and the speech as it
// is generated (channels/outgoing/chunk and complete). Both are advisory
// notifications, sent only to the server that registered the channel and
// only with its grant; a failure is logged, rate-limited, and never
// affects the turn.

// TypingInterval is how often a typing start is repeated while the agent
// works.
const TypingInterval = 7 * time.Second

var (
	logTypingFailed = lograte.Kind{
		Msg:     "channels/typing could not be sent; the turn goes on",
		Summary: "%s more channels/typing notifications%s failed in %s",
		KeyAttr: "server",
	}
	logStreamFailed = lograte.Kind{
		Msg:     "channels/outgoing could not be sent; the speech is still published",
		Summary: "%s more channels/outgoing notifications%s failed in %s",
		KeyAttr: "server",
	}
)

// Typing tells server that an agent is typing in channel: start at once
// and every TypingInterval, then stop when the returned func is called (it
// waits for the stop to be sent). Nothing is sent, and the func does
// nothing, unless the server is granted channels.typing and the channel is
// open (selected open, or confirmed open); ok reports whether typing
// started. Each start checks both again: once the channel closes or the
// grant goes, no start is sent.
//
// A channel that stops being open (a closed decision on it, the server's
// close confirmed, its registration gone) ends every typing session in it
// at once: the stop is sent then, not when the turn ends, checking the
// grant and that the server is still the one typing was started on, but
// not that the channel is open (that it isn't is why the stop goes), and
// only when a start went out. When the host closes the channel itself,
// the stop is written before channels/close is sent (the close waits for
// it, up to a second), since a platform may refuse a typing stop into a
// channel the bot has left. After the stop nothing more is sent, and the
// turn's own stop func does nothing more.
//
// The sends go from a goroutine of their own, and are not cut short by
// stop (a write cut short would end the connection): the connection's
// write deadline bounds them. Typing returns once the first start is
// written, or after a second of a slow server, so that it goes before the
// turn's speech. Registry.Close stops typing at once: it is not lifecycle
// work to wait for.
func (r *Registry) Typing(server, channel string) (stop func(), ok bool) {
	srv := r.server(server)
	k := Key{server, channel}
	if srv == nil || r.isClosing() {
		return func() {}, false
	}
	// Listed before the check, so that a close the check misses finds it
	// (carry publishes the views, then ends the sessions listed).
	tp := &typer{closed: make(chan struct{}), done: make(chan struct{})}
	r.typers.add(k, tp)
	if !r.typable(srv, k) {
		r.typers.remove(k, tp)
		return func() {}, false
	}
	r.typingWG.Add(1)
	ctx, cancel := context.WithCancel(r.ctx)
	started := make(chan struct{})
	send := func(op string) {
		if err := srv.conn.Notify(context.Background(), protocol.MethodChannelsTyping, protocol.ChannelsTypingParams{ChannelID: channel, Op: op}); err != nil {
			r.limits.LogFor(&logTypingFailed, server, "server", server, "channel", channel, "op", op, "error", err.Error())
		}
	}
	var sent bool // a start went out: a stop is owed
	start := func() {
		if r.typable(srv, k) {
			send(protocol.TypingStart)
			sent = true
		}
	}
	go func() {
		defer r.typingWG.Done()
		defer close(tp.done)
		defer r.typers.remove(k, tp)
		start()
		close(started)
		t := time.NewTicker(TypingInterval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				start()
				continue
			case <-tp.closed:
				// The channel stopped being open.
			case <-ctx.Done():
				// Stopped, or the host is closing.
			}
			if sent && r.server(server) == srv && srv.conn.Has("channels.typing") {
				send(protocol.TypingStop)
			}
			return
		}
	}()
	// The first start goes before what the turn says next, unless the
	// server is slow to take it: then the turn goes on after a second.
	wait := time.NewTimer(firstStartWait)
	select {
	case <-started:
	case <-wait.C:
	}
	wait.Stop()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-tp.done
		})
	}, true
}

// firstStartWait bounds how long Typing waits for its first start to be
// written, and a channels/close for the stops of the typing in its
// channel.
const firstStartWait = time.Second

// typer is one typing session: closed is closed when its channel stops
// being open, done when its goroutine has ended.
type typer struct {
	once   sync.Once
	closed chan struct{}
	done   chan struct{}
}

func (tp *typer) end() { tp.once.Do(func() { close(tp.closed) }) }

// typingSessions are the typing sessions under way, by channel.
type typingSessions struct {
	mu sync.Mutex
	by map[Key]map[*typer]struct{}
}

func (s *typingSessions) add(k Key, tp *typer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[Key]map[*typer]struct{}{}
	}
	if s.by[k] == nil {
		s.by[k] = map[*typer]struct{}{}
	}
	s.by[k][tp] = struct{}{}
}

func (s *typingSessions) remove(k Key, tp *typer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.by[k], tp)
	if len(s.by[k]) == 0 {
		delete(s.by, k)
	}
}

// in returns the sessions typing in k.
func (s *typingSessions) in(k Key) []*typer {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*typer, 0, len(s.by[k]))
	for tp := range s.by[k] {
		out = append(out, tp)
	}
	return out
}

// endClosedTyping ends the typing in each channel whose new view is not
// open. carry calls it once it has published the views; it only signals.
func (r *Registry) endClosedTyping(views []viewOut) {
	for _, v := range views {
		if v.v != nil && v.v.isOpen() {
			continue
		}
		for _, tp := range r.typers.in(v.key) {
			tp.end()
		}
	}
}

// stopTypingIn ends every typing session in k and waits for their stops
// to be written, up to firstStartWait or the registry's drain: a
// channels/close goes after them.
func (r *Registry) stopTypingIn(k Key) {
	tps := r.typers.in(k)
	if len(tps) == 0 {
		return
	}
	for _, tp := range tps {
		tp.end()
	}
	wait := time.NewTimer(firstStartWait)
	defer wait.Stop()
	for _, tp := range tps {
		select {
		case <-tp.done:
		case <-wait.C:
			return
		case <-r.ctx.Done():
			return
		}
	}
}

// typable reports whether typing may be sent into k now: the server is
// granted channels.typing and the channel is registered and open.
func (r *Registry) typable(srv *serverState, k Key) bool {
	return srv.conn.Has("channels.typing") && r.openOn(srv, k)
}

// openOn reports whether k is registered by srv (still the server's
// connection) and open: selected open, or confirmed open.
func (r *Registry) openOn(srv *serverState, k Key) bool {
	if r.server(k.Server) != srv {
		return false
	}
	r.viewMu.RLock()
	defer r.viewMu.RUnlock()
	v := r.views[k]
	return v != nil && v.isOpen()
}

// isOpen reports whether the view is of a registered channel that is
// open: selected open, or confirmed open.
func (v *view) isOpen() bool {
	return v.registered && ((v.decision != nil && v.decision.State == store.Open) || (v.confirmed && v.open))
}

// Outgoing streams an agent's speech to the server of the channel it will
// be published in (SPEC §14.3): chunks as the model generates, then one
// complete. It is made only for a server granted channels.streaming (it
// declared streaming) and a registered channel: Stream returns nil
// otherwise. The caller numbers the chunks (one counter per inference
// across channels) and sends complete on every exit path of an inference
// that sent chunks.
type Outgoing struct {
	r       *Registry
	srv     *serverState
	server  string
	channel string
	thread  json.RawMessage // threadId as the final publish carries it (nil: none)
}

// Stream returns the stream of speech into server's channel, or nil when
// nothing may be streamed there: the server isn't granted
// channels.streaming, or the delivery path would refuse the speech (the
// server isn't granted channels.publish, the channel isn't registered).
// thread is the place the final publish asks for (nil none, pointing at
// "" the root): every chunk and the completion carry it as threadId, as
// RFC-011 §6 has it.
func (r *Registry) Stream(server, channel string, thread *string) *Outgoing {
	srv := r.server(server)
	if srv == nil || !r.streamable(srv, Key{server, channel}) {
		return nil
	}
	o := &Outgoing{r: r, srv: srv, server: server, channel: channel}
	switch {
	case thread == nil:
	case *thread == "":
		o.thread = json.RawMessage("null")
	default:
		o.thread, _ = json.Marshal(*thread)
	}
	return o
}

// streamable reports whether speech may be streamed into k now.
func (r *Registry) streamable(srv *serverState, k Key) bool {
	if !srv.conn.Has("channels.streaming") || !srv.conn.Has("channels.publish") {
		return false
	}
	if r.server(k.Server) != srv {
		return false
	}
	_, registered := r.registration(k)
	return registered
}

// Chunk sends one delta.
func (o *Outgoing) Chunk(inferenceID, conversationID string, index int, delta string) {
	o.send(protocol.MethodChannelsOutgoingChunk, protocol.ChannelsOutgoingChunkParams{InferenceID: inferenceID, ConversationID: conversationID, ChannelID: o.channel, Index: index, Delta: delta, ThreadID: o.thread})
}

// Complete closes the inference's stream with its full text.
func (o *Outgoing) Complete(inferenceID, conversationID, text string) {
	b, _ := json.Marshal(protocol.TextContent{Type: "text", Text: text})
	o.send(protocol.MethodChannelsOutgoingComplete, protocol.ChannelsOutgoingCompleteParams{InferenceID: inferenceID, ConversationID: conversationID, ChannelID: o.channel, Content: []json.RawMessage{b}, ThreadID: o.thread})
}

// send sends a notification, unless the grant or the channel went; not
// cut short by a context of its own (a write cut short would end the
// connection): the connection's write deadline bounds it.
func (o *Outgoing) send(method string, params any) {
	if !o.r.streamable(o.srv, Key{o.server, o.channel}) {
		return
	}
	if err := o.srv.conn.Notify(context.Background(), method, params); err != nil {
		o.r.limits.LogFor(&logStreamFailed, o.server, "server", o.server, "channel", o.channel, "method", method, "error", err.Error())
	}
}
