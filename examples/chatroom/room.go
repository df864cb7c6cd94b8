package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/server"
)

// Channels are the room's channels, in order; the first is open from the
// start (initiallyOpen).
var Channels = []string{"#general", "#random", "#dev"}

// channelType is the descriptors' type, and the prefix of their ids.
const channelType = "chatroom"

// channelID is the MCPL channel id of a room channel ("chatroom:#general").
func channelID(name string) string { return channelType + ":" + name }

// historyKeep bounds each channel's history, per connection.
const historyKeep = 50

// Room is the simulated chat platform: its channels, the script its people
// follow, and, per connected host, which channels that host has open.
//
// Each connection gets the room from the start of the script. A post goes
// to the host as channels/incoming while its channel is open for that
// host: #general from registration (initiallyOpen), any channel after the
// host's channels/open, until its channels/close. A post that addresses
// the agent goes to the host even while its channel is closed (in any
// channel whose registration the host accepted), as a chat platform
// delivers a mention of you from a channel you have not joined;
// the transcript marks it delivered though the channel is not open. Other
// posts in a closed channel still happen in the room: they are kept in the
// channel's history (the history tool) and written to the transcript
// marked not delivered, but never sent.
type Room struct {
	posts      []Post
	speed      float64
	loop       bool
	transcript *lineWriter
	log        *slog.Logger

	mu     sync.Mutex
	visits map[*server.Conn]*visit
}

// NewRoom returns a room that plays posts at speed (2 is twice as fast),
// from the start again after the last when loop is set. It writes a
// readable transcript of the room (people's posts, the agent's, channels
// opened and closed) to transcript, and operator detail to log.
func NewRoom(posts []Post, speed float64, loop bool, transcript io.Writer, log *slog.Logger) *Room {
	return &Room{posts: posts, speed: speed, loop: loop, transcript: &lineWriter{w: transcript}, log: log,
		visits: map[*server.Conn]*visit{}}
}

// visit is one host's connection to the room.
type visit struct {
	mu         sync.Mutex
	open       map[string]bool // by channel name
	registered map[string]bool // by channel name: the host accepted its registration
	history    map[string][]string
	posted     int // the people's messages so far
	said       int // the agent's messages so far
	// spoke has a value after a message of the agent, for the script's
	// "+agent" posts (Play).
	spoke chan struct{}
}

func (r *Room) visitOf(c *server.Conn) *visit {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.visits[c]
	if v == nil {
		v = &visit{open: map[string]bool{}, registered: map[string]bool{}, history: map[string][]string{}, spoke: make(chan struct{}, 1)}
		r.visits[c] = v
	}
	return v
}

func (v *visit) isOpen(name string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.open[name]
}

// isRegistered reports whether the host accepted the channel's
// registration: a mention there reaches the host even while it is closed.
func (v *visit) isRegistered(name string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.registered[name]
}

func (v *visit) setRegistered(name string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.registered[name] = true
}

func (v *visit) setOpen(name string, open bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.open[name] = open
}

func (v *visit) remember(name, line string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	h := append(v.history[name], line)
	if len(h) > historyKeep {
		h = h[len(h)-historyKeep:]
	}
	v.history[name] = h
}

// The room's feature sets. They are split along what a host may grant
// apart: a host that only takes messages in (register, incoming) gets
// chat.messaging whole, and the receipt honestly reports chat.replies
// unavailable, rather than one set reported disabled while half of it
// runs.
const (
	featureMessaging = "chat.messaging"
	featureReplies   = "chat.replies"
)

// Server returns the room's MCPL server: it advertises channels register,
// lifecycle, publish and incoming, declares the feature sets chat.messaging
// and chat.replies, and has one tool, history.
func (r *Room) Server(version string) *server.Server {
	s := server.New("chatroom", version, &server.Options{
		Instructions: "A simulated chat room with channels #general, #random and #dev. " +
			"People talk on a schedule; messages that address you are tagged chat:mention. " +
			"Open a channel to receive its messages (those that address you arrive from any channel); use history to catch up on one.",
		Capabilities: []string{"channels.register", "channels.lifecycle", "channels.publish", "channels.incoming"},
		FeatureSets: []server.FeatureSet{{
			Name:        featureMessaging,
			Description: "People's messages in the room's channels, delivered as they are posted",
			Uses:        []string{"channels.register", "channels.incoming"},
		}, {
			Name:        featureReplies,
			Description: "The agent opens and closes channels, and posts its own messages",
			Uses:        []string{"channels.lifecycle", "channels.publish"},
		}},
		OnConnect: r.visitRoom,
		Logger:    r.log,
	})
	s.HandleChannelOpen(r.open)
	s.HandleChannelClose(r.close)
	s.HandleChannelPublish(r.publish)
	server.AddTool(s, server.Tool{Name: "history", Description: "The recent messages of a channel, open or not, oldest first."}, r.history)
	return s
}

// descriptor describes a room channel.
func descriptor(name string) protocol.ChannelDescriptor {
	addr, _ := json.Marshal(map[string]string{"channel": name})
	return protocol.ChannelDescriptor{
		ID: channelID(name), Type: channelType, Label: name, Direction: protocol.DirectionBidirectional,
		Address: addr, InitiallyOpen: name == Channels[0],
	}
}

// visitRoom is one connection's life in the room: once the host has
// granted a policy, register the channels, then play the script until the
// connection ends.
func (r *Room) visitRoom(ctx context.Context, c *server.Conn) {
	v := r.visitOf(c)
	defer func() {
		r.mu.Lock()
		delete(r.visits, c)
		r.mu.Unlock()
	}()
	select {
	case <-c.Ready():
	case <-ctx.Done():
		return
	}
	if p, _ := c.Policy(); !p.FeatureSetEnabled(featureMessaging) {
		// The host did not grant (or chose not to enable) messages in:
		// the room goes on, in the transcript and history only.
		r.log.Warn("chat.messaging is not enabled; no channel is registered and no message delivered")
		Play(ctx, r.posts, r.speed, r.loop, v.spoke, func(p Post) { r.deliver(ctx, c, v, p) })
		<-ctx.Done()
		return
	}
	descs := make([]protocol.ChannelDescriptor, 0, len(Channels))
	for _, name := range Channels {
		descs = append(descs, descriptor(name))
	}
	results, err := c.RegisterChannels(ctx, descs...)
	if err != nil {
		r.log.Warn("channels not registered; nothing will be delivered", "error", err.Error())
	}
	for _, res := range results {
		name, ok := strings.CutPrefix(res.ID, channelType+":")
		switch {
		case !ok:
		case !res.Accepted:
			r.log.Warn("the host refused a channel", "channel", name, "reason", res.Reason)
		default:
			v.setRegistered(name)
			if descriptor(name).InitiallyOpen {
				v.setOpen(name, true)
				r.transcript.printf("[%s] (open from the start)", name)
			}
		}
	}
	Play(ctx, r.posts, r.speed, r.loop, v.spoke, func(p Post) { r.deliver(ctx, c, v, p) })
	<-ctx.Done() // the room stays, and answers the host, until the connection ends
}

// deliver makes one post happen: into the channel's history and the
// transcript, and to the host when the channel is open, or when the post
// addresses the agent and the host accepted the channel's registration.
func (r *Room) deliver(ctx context.Context, c *server.Conn, v *visit, p Post) {
	v.mu.Lock()
	v.posted++
	n := v.posted
	v.mu.Unlock()
	text := p.Text
	if p.Mention {
		text = "@agent " + text
	}
	line := p.Author + ": " + text
	v.remember(p.Channel, line)
	switch {
	case v.isOpen(p.Channel):
		r.transcript.printf("[%s] %s", p.Channel, line)
	case p.Mention && v.isRegistered(p.Channel):
		// A mention reaches the agent from any channel the host knows.
		r.transcript.printf("[%s] %s   (delivered though %s is not open: it addresses the agent)", p.Channel, line, p.Channel)
	default:
		r.transcript.printf("[%s] %s   (not delivered: %s is not open)", p.Channel, line, p.Channel)
		return
	}
	msg := server.Message{
		ChannelID: channelID(p.Channel),
		MessageID: fmt.Sprintf("chatroom-%d", n),
		Author:    server.Author{ID: "u_" + p.Author, Name: p.Author},
		Content:   server.TextContent(text),
		Tags:      []string{"chat:ambient", "chat:from-human"},
	}
	if p.Mention {
		// Core closure makes a mention addressed (SPEC §16.3); producers
		// should say so directly.
		msg.Tags = []string{"chat:mention", "chat:addressed", "chat:from-human"}
		msg.Metadata = map[string]any{"mentions": []string{"agent"}}
	}
	results, err := c.Incoming(ctx, msg)
	var ge *server.GrantError
	switch {
	case errors.As(err, &ge):
		// The host narrowed the policy since registration.
		r.log.Info("message not delivered: not granted", "channel", p.Channel, "script_line", p.Line, "error", err.Error())
	case err != nil && ctx.Err() == nil:
		r.log.Warn("message not delivered", "channel", p.Channel, "script_line", p.Line, "error", err.Error())
	case len(results) == 1 && !results[0].Accepted:
		r.log.Info("the host did not accept a message", "channel", p.Channel, "script_line", p.Line, "reason", results[0].Reason)
	}
}

// channelName resolves an open request to a room channel: by id
// ("chatroom:#dev"), or by type "chatroom" and address {"channel": "#dev"}.
func channelName(req server.OpenRequest) (string, bool) {
	if req.ChannelID != "" {
		name, ok := strings.CutPrefix(req.ChannelID, channelType+":")
		return name, ok && slices.Contains(Channels, name)
	}
	var addr struct {
		Channel string `json:"channel"`
	}
	if req.Type != channelType || json.Unmarshal(req.Address, &addr) != nil {
		return "", false
	}
	return addr.Channel, slices.Contains(Channels, addr.Channel)
}

func (r *Room) open(ctx context.Context, req server.OpenRequest) (protocol.ChannelDescriptor, error) {
	name, ok := channelName(req)
	if !ok {
		return protocol.ChannelDescriptor{}, server.ErrUnknownChannel
	}
	c, _ := server.ConnFromContext(ctx)
	r.visitOf(c).setOpen(name, true)
	r.transcript.printf("[%s] (the agent opened the channel)", name)
	return descriptor(name), nil
}

func (r *Room) close(ctx context.Context, id string) error {
	name, ok := channelName(server.OpenRequest{ChannelID: id})
	if !ok {
		return server.ErrUnknownChannel
	}
	c, _ := server.ConnFromContext(ctx)
	r.visitOf(c).setOpen(name, false)
	r.transcript.printf("[%s] (the agent closed the channel)", name)
	return nil
}

// publish posts the agent's message to a room channel, open or not: a
// chat platform lets anyone post where they can see. The transcript shows
// it as "AGENT".
func (r *Room) publish(ctx context.Context, p server.PublishRequest) (string, error) {
	name, ok := channelName(server.OpenRequest{ChannelID: p.ChannelID})
	if !ok {
		return "", server.ErrUnknownChannel
	}
	text := strings.TrimSpace(p.Text())
	if text == "" {
		return "", errors.New("nothing to post: the message has no text")
	}
	c, _ := server.ConnFromContext(ctx)
	v := r.visitOf(c)
	v.mu.Lock()
	v.said++
	id := fmt.Sprintf("chatroom-agent-%d", v.said)
	v.mu.Unlock()
	v.remember(name, "agent: "+text)
	r.transcript.printf("[%s] AGENT: %s", name, text)
	select {
	case v.spoke <- struct{}{}:
	default:
	}
	return id, nil
}

type historyArgs struct {
	Channel string `json:"channel" jsonschema:"the channel: #general, #random or #dev"`
}

func (r *Room) history(ctx context.Context, in historyArgs) (protocol.CallToolResult, error) {
	name := in.Channel
	if !strings.HasPrefix(name, "#") {
		name = "#" + strings.TrimPrefix(name, channelType+":#")
	}
	if !slices.Contains(Channels, name) {
		return server.ErrorResult(fmt.Sprintf("There is no channel %q; the channels are %s.", in.Channel, strings.Join(Channels, ", "))), nil
	}
	c, _ := server.ConnFromContext(ctx)
	v := r.visitOf(c)
	v.mu.Lock()
	lines := slices.Clone(v.history[name])
	v.mu.Unlock()
	if len(lines) == 0 {
		return server.TextResult("Nothing has been said in " + name + " yet."), nil
	}
	return server.TextResult(strings.Join(lines, "\n")), nil
}

// lineWriter writes whole lines to w, one at a time.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format+"\n", args...)
}
