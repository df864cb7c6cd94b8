package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/server"
)

// Channels are the room's channels, in order; the first is open from the
// start (initiallyOpen).
var Channels = []string{"#general", "#random", "#dev"}

// Threaded are the channels with threads: their descriptors declare
// publish target "exact" (RFC-011), and a script's post may sit in one of
// their threads ("#dev/pr-12"). The others declare "root": they have no
// threads.
var Threaded = []string{"#dev"}

// channelType is the descriptors' type, and the prefix of their ids.
const channelType = "chatroom"

// dmPrefix starts a direct message's channel id after channelType's
// prefix: "chatroom:dm:bob" is bob's DM with the agent, which the room
// calls "@bob".
const dmPrefix = "dm:"

// channelID is the MCPL channel id of a room channel ("chatroom:#general")
// or a DM ("@bob": "chatroom:dm:bob").
func channelID(name string) string {
	if person, ok := strings.CutPrefix(name, "@"); ok {
		return channelType + ":" + dmPrefix + person
	}
	return channelType + ":" + name
}

// dmName is the room's name for person's DM with the agent ("@bob").
func dmName(person string) string { return "@" + person }

// historyKeep bounds each channel's history, per connection.
const historyKeep = 50

// postsKeep bounds the messages, per connection, the host can acknowledge:
// the latest this many.
const postsKeep = 500

// streamsKeep bounds the outgoing streams, per connection, that may be
// open (chunks and no complete yet) at once.
const streamsKeep = 32

// Room is the simulated chat platform: its channels, the script its people
// follow, and, per connected host, which channels that host has open.
//
// Each connection gets the room from the start of the script. A post goes
// to the host as channels/incoming while its channel is open for that
// host: #general from registration (initiallyOpen; unless the host does
// not accept it), any channel after the host's channels/open, until its
// channels/close. A post that addresses the agent goes to the host even
// while its channel is closed (in any channel whose registration the host
// accepted), as a chat platform
// delivers a mention of you from a channel you have not joined;
// the transcript marks it delivered though the channel is not open. Other
// posts in a closed channel still happen in the room: they are kept in the
// channel's history (the history tool) and written to the transcript
// marked not delivered, but never sent. All of this needs the host to
// enable chat.messaging, which needs all seven channel capabilities: under a
// host that grants fewer, the room registers nothing and delivers nothing,
// and the script plays into the transcript and history only.
//
// The room also shows what the host says about its agent's work, as a chat
// platform does, in the transcript only: that the agent is typing in a
// channel (channels/typing), that it saw a message and stays out of its
// channel (channels/acknowledge, a reaction on the message), and the text
// the host streamed to a channel while its agent wrote it
// (channels/outgoing/chunk and complete). None of these is a message: what
// the agent says reaches the room only by channels/publish.
type Room struct {
	posts      []Post
	speed      float64
	loop       bool
	transcript *lineWriter
	log        *slog.Logger
	// run names a connection's run in its message ids (WithRun).
	run func() string

	mu     sync.Mutex
	visits map[*server.Conn]*visit
}

// NewRoom returns a room that plays posts at speed (2 is twice as fast),
// from the start again after the last when loop is set. It writes a
// readable transcript of the room (people's posts, the agent's, channels
// opened and closed) to transcript, and operator detail to log.
func NewRoom(posts []Post, speed float64, loop bool, transcript io.Writer, log *slog.Logger) *Room {
	return &Room{posts: posts, speed: speed, loop: loop, transcript: &lineWriter{w: transcript}, log: log,
		run: newRunID, visits: map[*server.Conn]*visit{}}
}

// WithRun fixes the run part of the people's message ids: every
// connection's are chatroom-RUN-N, or chatroom-N when run is empty. By
// default each connection draws a run of its own (newRunID), as a real
// platform's ids are unique: a host deduplicates its inbox by server and
// message id, across its restarts, so a room that numbered chatroom-1,
// chatroom-2 … on every run would be heard only on its first on a store
// (issue 27). A fixed run is for a store that is new each run and a
// script that names ids in advance (tests, mcplhost demo).
func (r *Room) WithRun(run string) *Room {
	r.run = func() string { return run }
	return r
}

// newRunID is a connection's run: 8 random hex digits, so two runs on
// one store share no message id (a collision is one in 4 billion pairs,
// the chance a run's ids are dropped as seen).
func newRunID() string {
	var b [4]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// visit is one host's connection to the room.
type visit struct {
	mu         sync.Mutex
	open       map[string]bool // by channel name
	registered map[string]bool // by channel name: the host accepted its registration
	history    map[string][]string
	posted     int // the people's messages so far
	// idPrefix starts each of the people's message ids: "chatroom-RUN-"
	// (Room.WithRun), then posted's count.
	idPrefix string
	said     int // the agent's messages so far
	// posts are the people's recent messages by id ("chatroom-RUN-N"), for
	// channels/acknowledge.
	posts map[string]Post
	// typing is the agent's typing state in each channel (by name).
	typing map[string]typingState
	// streams collects the chunks of each outgoing stream until its
	// complete.
	streams map[streamKey][]chunk
	// threads are the threads people have posted in, by channel name: a
	// publish may target these (RFC-011 §3: every threadId the room sent
	// is a publish target).
	threads map[string]map[string]bool
	// dms are the people who have sent the agent a direct message: their
	// DM channels exist ("chatroom:dm:bob"), and the host may open them
	// and publish to them.
	dms map[string]bool
	// spoke has a value after a message of the agent, for the script's
	// "+agent" posts (Play).
	spoke chan struct{}
}

func (r *Room) visitOf(c *server.Conn) *visit {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.visits[c]
	if v == nil {
		v = &visit{open: map[string]bool{}, registered: map[string]bool{}, history: map[string][]string{}, spoke: make(chan struct{}, 1),
			posts: map[string]Post{}, typing: map[string]typingState{}, streams: map[streamKey][]chunk{},
			threads: map[string]map[string]bool{}, dms: map[string]bool{}}
		if run := r.run(); run != "" {
			v.idPrefix = "chatroom-" + run + "-"
		} else {
			v.idPrefix = "chatroom-"
		}
		r.visits[c] = v
	}
	return v
}

// resolve names the room channel or DM a channel id is ("chatroom:#dev"
// is "#dev", "chatroom:dm:bob" "@bob"): a DM only once its person has
// written to the agent in this connection.
func (v *visit) resolve(id string) (string, bool) {
	name, ok := strings.CutPrefix(id, channelType+":")
	if !ok {
		return "", false
	}
	if person, ok := strings.CutPrefix(name, dmPrefix); ok {
		v.mu.Lock()
		defer v.mu.Unlock()
		return dmName(person), v.dms[person]
	}
	return name, slices.Contains(Channels, name)
}

// hasThread reports whether people have posted in thread of channel.
func (v *visit) hasThread(channel, thread string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.threads[channel][thread]
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

// swapOpen sets whether the channel is open, and reports whether it was.
func (v *visit) swapOpen(name string, open bool) (was bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	was = v.open[name]
	v.open[name] = open
	return was
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

// featureMessaging is the room's feature set for its channels: the whole
// chat platform, as real chat connectors declare it, using all seven
// channel leaves. A host that grants fewer gets it disabled (the receipt
// says what it misses), and the room then registers nothing and delivers
// nothing.
const featureMessaging = "chat.messaging"

// featureDirect is the room's feature set for direct messages: a DM
// reaches the host as a push/event naming its DM channel (RFC-011 §3), a
// channel the room never registers, and the host answers it by opening
// that channel and publishing to it. Disabled, the room delivers no DM.
const featureDirect = "chat.direct"

// directUses is what chat.direct uses.
var directUses = []string{"pushEvents", "channels.lifecycle", "channels.publish"}

// channelLeaves are the seven channel capabilities of SPEC §14.1: what the
// room advertises and what chat.messaging uses.
var channelLeaves = []string{
	"channels.register", "channels.lifecycle", "channels.publish", "channels.incoming",
	"channels.streaming", "channels.acknowledge", "channels.typing",
}

// Server returns the room's MCPL server: it advertises the seven channel
// leaves and pushEvents, declares two feature sets, chat.messaging, that
// uses the seven, and chat.direct, for direct messages, serves every host →
// server channel method, and has one tool, history.
func (r *Room) Server(version string) *server.Server {
	s := server.New("chatroom", version, &server.Options{
		Instructions: "A simulated chat room with channels #general, #random and #dev (which has threads). " +
			"People talk on a schedule; messages that address you are tagged chat:mention, and people may write to you directly (chat:dm). " +
			"Open a channel to receive its messages (those that address you arrive from any channel); use history to catch up on one.",
		Capabilities: append(slices.Clone(channelLeaves), "pushEvents"),
		FeatureSets: []server.FeatureSet{{
			Name: featureMessaging,
			Description: "The room's channels: people's messages delivered as they are posted; the agent opens and closes channels, " +
				"posts, reacts to a message it stays out of, and is shown typing and streaming",
			Uses: channelLeaves,
		}, {
			Name:        featureDirect,
			Description: "Direct messages: a person's message to the agent alone, delivered as a push event naming its DM channel, which the agent answers privately",
			Uses:        directUses,
		}},
		OnConnect: r.visitRoom,
		Logger:    r.log,
	})
	s.HandleChannelOpen(r.open)
	s.HandleChannelClose(r.close)
	s.HandleChannelPublishTo(r.publish)
	s.HandleChannelTyping(r.typing)
	s.HandleChannelAcknowledge(r.acknowledge)
	s.HandleOutgoing(r.outgoing)
	server.AddTool(s, server.Tool{Name: "history", Description: "The recent messages of a channel, open or not, oldest first."}, r.history)
	return s
}

// Publish targets a descriptor declares (RFC-011 §3).
var (
	targetExact = json.RawMessage(`{"publish":{"target":"exact"}}`)
	targetRoot  = json.RawMessage(`{"publish":{"target":"root"}}`)
)

// descriptor describes a room channel ("#dev") or a DM ("@bob").
func descriptor(name string) protocol.ChannelDescriptor {
	if person, ok := strings.CutPrefix(name, "@"); ok {
		addr, _ := json.Marshal(map[string]string{"dm": person})
		return protocol.ChannelDescriptor{
			ID: channelID(name), Type: channelType, Label: name, Direction: protocol.DirectionBidirectional,
			Address: addr, Tags: []string{"chat:dm"}, Capabilities: targetRoot,
		}
	}
	addr, _ := json.Marshal(map[string]string{"channel": name})
	caps := targetRoot
	if slices.Contains(Threaded, name) {
		caps = targetExact
	}
	return protocol.ChannelDescriptor{
		ID: channelID(name), Type: channelType, Label: name, Direction: protocol.DirectionBidirectional,
		Address: addr, InitiallyOpen: name == Channels[0], Capabilities: caps,
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
	if p, _ := c.Policy(); !p.FeatureSetEnabled(featureDirect) {
		r.log.Warn("chat.direct is not enabled; no direct message will be delivered", "missing", missingOf(p, directUses))
	}
	if p, _ := c.Policy(); !p.FeatureSetEnabled(featureMessaging) {
		// The host did not grant all seven channel leaves (or chose not
		// to enable the set): as a real connector does, the room runs no
		// part of it, and goes on in the transcript and history only.
		r.log.Warn("chat.messaging is not enabled; no channel is registered and no message delivered", "missing", missingOf(p, channelLeaves))
		r.play(ctx, c, v)
		<-ctx.Done()
		return
	}
	descs := make([]protocol.ChannelDescriptor, 0, len(Channels))
	for _, name := range Channels {
		d := descriptor(name)
		descs = append(descs, d)
		if d.InitiallyOpen {
			// Open before the host hears of it, as the descriptor says:
			// the host may carry out its own decision (close it, say) as
			// soon as it has answered, before this goroutine reads the
			// answer, and that decision must stand.
			v.swapOpen(name, true)
			r.transcript.printf("[%s] (open from the start)", name)
		}
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
		}
	}
	for _, d := range descs {
		if d.InitiallyOpen && !v.isRegistered(d.Label) && v.swapOpen(d.Label, false) {
			r.transcript.printf("[%s] (not open after all: the host did not accept the channel)", d.Label)
		}
	}
	r.play(ctx, c, v)
	<-ctx.Done() // the room stays, and answers the host, until the connection ends
}

// missingOf is what of uses p does not grant.
func missingOf(p server.Policy, uses []string) []string {
	var missing []string
	for _, leaf := range uses {
		if !p.Has(leaf) {
			missing = append(missing, leaf)
		}
	}
	return missing
}

// ScriptOver is the transcript's line once the script has played out
// (with -loop, only for a script that takes no time, which plays once):
// from then on nobody posts, though the room still answers the host. A
// program that follows the transcript can tell the story is told (mcplhost
// demo waits for it).
const ScriptOver = "(the script has played out: nobody posts from here on)"

// play plays the script for one connection, then says so in the
// transcript, unless the connection ended first.
func (r *Room) play(ctx context.Context, c *server.Conn, v *visit) {
	Play(ctx, r.posts, r.speed, r.loop, v.spoke, func(p Post) { r.deliver(ctx, c, v, p) })
	if ctx.Err() == nil {
		r.transcript.printf("%s", ScriptOver)
	}
}

// deliver makes one post happen: into the channel's history and the
// transcript, and to the host when the channel is open, or when the post
// addresses the agent and the host accepted the channel's registration.
func (r *Room) deliver(ctx context.Context, c *server.Conn, v *visit, p Post) {
	v.mu.Lock()
	v.posted++
	n := v.posted
	id := v.idPrefix + strconv.Itoa(n)
	v.posts[id] = p
	delete(v.posts, v.idPrefix+strconv.Itoa(n-postsKeep))
	if p.Thread != "" {
		if v.threads[p.Channel] == nil {
			v.threads[p.Channel] = map[string]bool{}
		}
		v.threads[p.Channel][p.Thread] = true
	}
	if p.DM {
		v.dms[p.Author] = true
	}
	v.mu.Unlock()
	if p.DM {
		r.deliverDM(ctx, c, v, p, id)
		return
	}
	text := p.Text
	if p.Mention {
		text = "@agent " + text
	}
	line := p.Author + ": " + text
	if p.Thread != "" {
		line = p.Author + " (in thread " + p.Thread + "): " + text
	}
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
		MessageID: id,
		ThreadID:  p.Thread,
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

// deliverDM sends the host a direct message, as a chat connector does: a
// push/event naming its DM channel (origin.mcplChannelId), a channel the
// room never registered, with its author and message id, tagged chat:dm.
// A DM reaches the agent whatever is open, as on a chat platform; it
// needs chat.direct enabled.
func (r *Room) deliverDM(ctx context.Context, c *server.Conn, v *visit, p Post, id string) {
	line := p.Author + " (to the agent, privately): " + p.Text
	v.remember(p.Channel, line)
	if pol, _ := c.Policy(); !pol.FeatureSetEnabled(featureDirect) {
		r.transcript.printf("[%s] %s   (not delivered: the host has not enabled %s, direct messages)", p.Channel, line, featureDirect)
		return
	}
	r.transcript.printf("[%s] %s", p.Channel, line)
	res, err := c.PushEvent(ctx, server.Event{
		FeatureSet: featureDirect,
		EventID:    "evt-" + id,
		Origin: map[string]any{
			"mcplChannelId": channelID(p.Channel), "messageId": id, "isDM": true,
			"authorId": "u_" + p.Author, "authorName": p.Author,
		},
		Content: server.TextContent(p.Text),
		Tags:    []string{"chat:dm", "chat:from-human"},
	})
	var ge *server.GrantError
	switch {
	case errors.As(err, &ge):
		r.log.Info("direct message not delivered: not granted", "channel", p.Channel, "script_line", p.Line, "error", err.Error())
	case err != nil && ctx.Err() == nil:
		r.log.Warn("direct message not delivered", "channel", p.Channel, "script_line", p.Line, "error", err.Error())
	case err == nil && !res.Accepted:
		r.log.Info("the host did not accept a direct message", "channel", p.Channel, "script_line", p.Line, "reason", res.Reason)
	}
}

// channelName resolves an open request to a room channel or a DM: by id
// ("chatroom:#dev", "chatroom:dm:bob"), or, for a channel, by type
// "chatroom" and address {"channel": "#dev"}. A DM exists once its person
// has written to the agent.
func (v *visit) channelName(req server.OpenRequest) (string, bool) {
	if req.ChannelID != "" {
		return v.resolve(req.ChannelID)
	}
	var addr struct {
		Channel string `json:"channel"`
	}
	if req.Type != channelType || json.Unmarshal(req.Address, &addr) != nil {
		return "", false
	}
	return addr.Channel, slices.Contains(Channels, addr.Channel)
}

// open opens a channel for the host. The transcript has a line only when
// that changes what is open: a host carries out its decisions when the
// channels are registered, opening one that is open from the start and
// closing ones never opened, which changes nothing in the room. close
// likewise.
func (r *Room) open(ctx context.Context, req server.OpenRequest) (protocol.ChannelDescriptor, error) {
	c, _ := server.ConnFromContext(ctx)
	v := r.visitOf(c)
	name, ok := v.channelName(req)
	if !ok {
		return protocol.ChannelDescriptor{}, server.ErrUnknownChannel
	}
	if !v.swapOpen(name, true) {
		r.transcript.printf("[%s] (the agent opened the channel)", name)
	}
	return descriptor(name), nil
}

func (r *Room) close(ctx context.Context, id string) error {
	c, _ := server.ConnFromContext(ctx)
	v := r.visitOf(c)
	name, ok := v.resolve(id)
	if !ok {
		return server.ErrUnknownChannel
	}
	if v.swapOpen(name, false) {
		r.transcript.printf("[%s] (the agent closed the channel)", name)
	}
	return nil
}

// publish posts the agent's message to a room channel or a DM, open or
// not: a chat platform lets anyone post where they can see. The transcript
// shows it as "AGENT", with where it landed: "AGENT (in thread pr-12)",
// "AGENT (to bob, privately)".
//
// It honours RFC-011 targets: a publish naming a thread of a threaded
// channel (#dev) posts in it, one naming null posts at the channel's root,
// and the answer echoes where; a thread nobody has posted in, or a thread
// on a channel or DM without threads, is refused with nothing posted. A
// publish naming no place posts at the root, and echoes nothing, as
// before targets.
func (r *Room) publish(ctx context.Context, p server.PublishRequest) (server.Posted, error) {
	c, _ := server.ConnFromContext(ctx)
	v := r.visitOf(c)
	name, ok := v.resolve(p.ChannelID)
	if !ok {
		return server.Posted{}, server.ErrUnknownChannel
	}
	text := strings.TrimSpace(p.Text())
	if text == "" {
		return server.Posted{}, errors.New("nothing to post: the message has no text")
	}
	thread := ""
	if p.Target != nil {
		thread = *p.Target
	}
	switch {
	case thread == "":
	case !slices.Contains(Threaded, name):
		err := fmt.Errorf("not posted: %s has no threads, so it has no thread %s", name, thread)
		r.transcript.printf("[%s] (the agent's message was refused: %s)", name, strings.TrimPrefix(err.Error(), "not posted: "))
		return server.Posted{}, err
	case !v.hasThread(name, thread):
		err := fmt.Errorf("not posted: there is no thread %s in %s", thread, name)
		r.transcript.printf("[%s] (the agent's message was refused: %s)", name, strings.TrimPrefix(err.Error(), "not posted: "))
		return server.Posted{}, err
	}
	v.mu.Lock()
	v.said++
	id := fmt.Sprintf("chatroom-agent-%d", v.said)
	if v.typing[name] == typingOn {
		v.typing[name] = typingPosted // the message ends the indicator
	}
	v.mu.Unlock()
	who := "AGENT"
	switch {
	case thread != "":
		who = "AGENT (in thread " + thread + ")"
	case strings.HasPrefix(name, "@"):
		who = "AGENT (to " + strings.TrimPrefix(name, "@") + ", privately)"
	}
	v.remember(name, strings.Replace(who, "AGENT", "agent", 1)+": "+text)
	r.transcript.printf("[%s] %s: %s", name, who, text)
	select {
	case v.spoke <- struct{}{}:
	default:
	}
	return server.Posted{MessageID: id, Thread: p.Target}, nil
}

// typingState is the agent's typing indicator in a channel.
type typingState int

const (
	typingOff    typingState = iota
	typingOn                 // shown: a start came, and no stop since
	typingPosted             // a start came, then the agent's message, which ended the indicator
)

// typing shows the agent typing: one transcript line at the first start
// of a run of starts (the host repeats start every few seconds while its
// agent works), and one at the stop if the agent said nothing in the
// channel meanwhile; a message of the agent's ends the indicator, as on a
// chat platform, so its stop needs no line.
func (r *Room) typing(ctx context.Context, req server.TypingRequest) {
	c, _ := server.ConnFromContext(ctx)
	v := r.visitOf(c)
	name, ok := v.resolve(req.ChannelID)
	if !ok {
		r.log.Info("typing in an unknown channel ignored", "channel", req.ChannelID)
		return
	}
	v.mu.Lock()
	was := v.typing[name]
	if req.Op == server.TypingStart {
		if was == typingOff {
			v.typing[name] = typingOn
		}
	} else {
		delete(v.typing, name)
	}
	v.mu.Unlock()
	switch {
	case req.Op == server.TypingStart && was == typingOff:
		r.transcript.printf("[%s] (the agent is typing…)", name)
	case req.Op == server.TypingStop && was == typingOn:
		r.transcript.printf("[%s] (the agent stopped typing)", name)
	}
}

// acknowledge reacts to a person's message with the value the host sent
// (an emoji): seen-not-opening, the agent saw it and stays out of the
// channel. The message is one of the room's ("chatroom-RUN-N", among the
// connection's latest), in the channel named; any other is answered
// acknowledged false, with the reason.
func (r *Room) acknowledge(ctx context.Context, req server.AcknowledgeRequest) (server.AcknowledgeResult, error) {
	c, _ := server.ConnFromContext(ctx)
	v := r.visitOf(c)
	name, ok := v.resolve(req.ChannelID)
	if !ok {
		return server.AcknowledgeResult{}, server.ErrUnknownChannel
	}
	v.mu.Lock()
	p, known := v.posts[req.MessageID]
	v.mu.Unlock()
	switch {
	case !known:
		return server.AcknowledgeResult{Reason: fmt.Sprintf("there is no message %s in %s", req.MessageID, name)}, nil
	case p.Channel != name:
		return server.AcknowledgeResult{Reason: fmt.Sprintf("message %s is in %s, not %s", req.MessageID, p.Channel, name)}, nil
	case req.Value == "":
		return server.AcknowledgeResult{Reason: "nothing to react with: the acknowledgment has no value"}, nil
	}
	if req.Intent == server.AckSeenNotOpening {
		r.transcript.printf("[%s] (the agent saw %s's message and stays out: %s)", name, p.Author, req.Value)
	} else {
		r.transcript.printf("[%s] (the agent reacted to %s's message: %s)", name, p.Author, req.Value)
	}
	return server.AcknowledgeResult{Acknowledged: true, Representation: req.Value}, nil
}

// streamKey names one outgoing stream: an inference's text for a channel.
type streamKey struct{ inference, channel string }

// chunk is one channels/outgoing/chunk of a stream.
type chunk struct {
	index int
	delta string
}

// outgoing collects each stream's chunks, and at its complete writes one
// transcript line with the streamed text: the complete's, or, when it has
// none, the chunks' in index order. The stream is advisory: it is not a
// message, and stays out of the history.
func (r *Room) outgoing(ctx context.Context, ev server.OutgoingEvent) {
	c, _ := server.ConnFromContext(ctx)
	v := r.visitOf(c)
	name, ok := v.resolve(ev.ChannelID)
	if !ok {
		r.log.Info("outgoing stream to an unknown channel ignored", "channel", ev.ChannelID)
		return
	}
	k := streamKey{ev.InferenceID, name}
	v.mu.Lock()
	chunks, open := v.streams[k]
	if !ev.Complete {
		if !open && len(v.streams) >= streamsKeep {
			v.mu.Unlock()
			r.log.Warn("outgoing stream dropped: too many streams without a complete", "channel", name, "inference", ev.InferenceID)
			return
		}
		v.streams[k] = append(chunks, chunk{ev.Index, ev.Delta})
		v.mu.Unlock()
		return
	}
	delete(v.streams, k)
	v.mu.Unlock()
	text := ev.Text()
	if strings.TrimSpace(text) == "" {
		slices.SortStableFunc(chunks, func(a, b chunk) int { return a.index - b.index })
		var b strings.Builder
		for _, ch := range chunks {
			b.WriteString(ch.delta)
		}
		text = b.String()
	}
	text = strings.TrimSpace(text)
	switch {
	case text == "":
		r.log.Info("an outgoing stream completed with no text", "channel", name, "inference", ev.InferenceID)
	case len(chunks) == 0:
		r.transcript.printf("[%s] (streamed to the room: %s)", name, text)
	case len(chunks) == 1:
		r.transcript.printf("[%s] (streamed to the room in 1 chunk: %s)", name, text)
	default:
		r.transcript.printf("[%s] (streamed to the room in %d chunks: %s)", name, len(chunks), text)
	}
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
