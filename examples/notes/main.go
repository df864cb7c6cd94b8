// Command notes is the MCPL server docs/writing-a-server.md builds: one
// channel, notes:#inbox, and one tool, add_note, which keeps a note and
// posts it in #inbox, where what the agent says is kept too. It serves
// stdio until stdin closes (WebSocket with -listen), and logs to stderr.
//
//	go run ./cmd/mcplhost probe -- go run ./examples/notes
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/server"
)

// inbox is the server's one channel, as the host is told of it.
var inbox = protocol.ChannelDescriptor{
	ID:            "notes:#inbox",
	Type:          "notes",
	Label:         "#inbox",
	Direction:     protocol.DirectionBidirectional,
	InitiallyOpen: true,
}

// uses are the capabilities the server advertises, and its one feature
// set needs them all: a host that grants fewer disables the set.
var uses = []string{"channels.register", "channels.incoming", "channels.lifecycle", "channels.publish"}

const featureSet = "notes.inbox"

func main() {
	listen := flag.String("listen", "", "serve WebSocket on this `address` (host:port) instead of stdio")
	flag.Parse()
	// On stdio, stdout carries the protocol: log to stderr.
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	s := newServer(&notes{log: log})
	var err error
	if *listen == "" {
		err = s.ServeStdio(context.Background())
	} else {
		log.Info("serving WebSocket", "url", "ws://"+*listen+"/")
		err = http.ListenAndServe(*listen, s) // one connection per request
	}
	if err != nil {
		log.Error(err.Error())
		os.Exit(1)
	}
}

// newServer declares the server, its tool and its channel handlers.
func newServer(n *notes) *server.Server {
	s := server.New("notes", "0.1.0", &server.Options{
		Instructions: "Call add_note to keep a note: it is posted in #inbox. What you say in #inbox is kept as a note too.",
		Capabilities: uses,
		FeatureSets: []server.FeatureSet{{
			Name:        featureSet,
			Description: "The #inbox channel: every note is posted there, and what the agent says there is kept",
			Uses:        uses,
		}},
		OnConnect: n.connect,
		Logger:    n.log,
	})
	server.AddTool(s, server.Tool{Name: "add_note", Description: "Keeps a note and posts it in #inbox."}, n.addNote)
	// #inbox has nothing to join or leave: open or closed, the server goes
	// on posting there, and the host decides what its agent is shown.
	s.HandleChannelOpen(func(_ context.Context, req server.OpenRequest) (protocol.ChannelDescriptor, error) {
		if req.ChannelID != inbox.ID {
			return protocol.ChannelDescriptor{}, server.ErrUnknownChannel // answered -32023
		}
		n.log.Info("the host opened #inbox")
		return inbox, nil
	})
	s.HandleChannelClose(func(_ context.Context, id string) error {
		if id != inbox.ID {
			return server.ErrUnknownChannel
		}
		n.log.Info("the host closed #inbox")
		return nil
	})
	s.HandleChannelPublish(n.publish)
	return s
}

// notes are the notes the server keeps, from every connection.
type notes struct {
	log  *slog.Logger
	mu   sync.Mutex
	kept []string
}

// keep stores a note and returns its id, also its message id: a random one,
// as a host drops a message whose id it has seen, even in an earlier run.
func (n *notes) keep(text string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.kept = append(n.kept, text)
	return server.NewID("note-")
}

// connect is one connection's own work: once the host's policy is in,
// register #inbox and greet the agent there.
func (n *notes) connect(ctx context.Context, c *server.Conn) {
	select {
	case <-c.Ready():
	case <-ctx.Done():
		return
	}
	if p, _ := c.Policy(); !p.FeatureSetEnabled(featureSet) {
		n.log.Warn(featureSet + " is not enabled: #inbox is not registered")
		return
	}
	res, err := c.RegisterChannels(ctx, inbox)
	if err != nil || len(res) != 1 || !res[0].Accepted {
		n.log.Warn("#inbox is not registered", "error", err, "results", res)
		return
	}
	_, err = c.Incoming(ctx, server.Message{
		ChannelID: inbox.ID, Author: server.Author{Name: "notes"},
		Content: server.TextContent("Hello! Add a note with add_note; what you say here is kept too."),
		Tags:    []string{"chat:addressed"}, // shown to the agent even if #inbox is closed
	})
	if err != nil {
		n.log.Warn("the greeting was not delivered", "error", err)
	}
}

type addNoteArgs struct {
	Text string `json:"text" jsonschema:"the note"`
}

// addNote keeps a note and, as the platform #inbox is on, posts it there.
func (n *notes) addNote(ctx context.Context, in addNoteArgs) (protocol.CallToolResult, error) {
	if strings.TrimSpace(in.Text) == "" {
		return server.ErrorResult("A note needs some text."), nil
	}
	id := n.keep(in.Text)
	c, _ := server.ConnFromContext(ctx)
	if p, _ := c.Policy(); !p.FeatureSetEnabled(featureSet) {
		return server.TextResult("Kept " + id + ". #inbox is off: the host did not enable " + featureSet + "."), nil
	}
	res, err := c.Incoming(ctx, server.Message{
		ChannelID: inbox.ID, MessageID: id, Author: server.Author{Name: "notes"},
		Content: server.TextContent(in.Text),
		Tags:    []string{"chat:ambient"}, // shown to the agent only while #inbox is open
	})
	switch {
	case err != nil:
		return server.TextResult(fmt.Sprintf("Kept %s, but it was not posted in #inbox: %v", id, err)), nil
	case len(res) == 1 && !res[0].Accepted:
		return server.TextResult(fmt.Sprintf("Kept %s, but the host did not take it into #inbox: %s", id, res[0].Reason)), nil
	}
	return server.TextResult("Kept " + id + " and posted it in #inbox."), nil
}

// publish is the agent speaking in #inbox: the server keeps what it says,
// and the host is told it was delivered, under the id it is kept by.
func (n *notes) publish(_ context.Context, p server.PublishRequest) (string, error) {
	if p.ChannelID != inbox.ID {
		return "", server.ErrUnknownChannel
	}
	text := strings.TrimSpace(p.Text())
	if text == "" {
		return "", errors.New("nothing to keep: the message has no text") // answered delivered: false
	}
	id := n.keep(text)
	n.log.Info("the agent said", "id", id, "text", text)
	return id, nil
}
