package hostile

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/coder/websocket"
)

// WSOptions are the WebSocket-only misbehaviours of ServeWS.
type WSOptions struct {
	// NoUpgrade accepts connections, reads the request and never answers.
	NoUpgrade bool
	// Redirect, if set, answers every upgrade request with 302 Location
	// Redirect.
	Redirect string
}

// WSConn is a Conn over a WebSocket connection: one message a text frame.
type WSConn struct {
	c   *websocket.Conn
	ctx context.Context
}

// Read returns the next frame's data, text or binary.
func (w *WSConn) Read() ([]byte, error) {
	_, data, err := w.c.Read(w.ctx)
	return data, err
}

// Write sends msg as one text frame.
func (w *WSConn) Write(msg []byte) error {
	return w.c.Write(w.ctx, websocket.MessageText, msg)
}

// WriteFrame sends data as one text or binary frame.
func (w *WSConn) WriteFrame(binary bool, data []byte) error {
	typ := websocket.MessageText
	if binary {
		typ = websocket.MessageBinary
	}
	return w.c.Write(w.ctx, typ, data)
}

// ServeWS serves the hostile server over WebSocket on ln, each connection
// on its own, until ln fails.
func ServeWS(ln net.Listener, cfg *Config, opts WSOptions) error {
	if opts.NoUpgrade {
		for {
			c, err := ln.Accept()
			if err != nil {
				return err
			}
			go hold(c, cfg.Record)
		}
	}
	return http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if opts.Redirect != "" {
			cfg.Record.Note(map[string]any{"redirect": true, "authorization": r.Header.Get("Authorization") != ""})
			w.Header().Set("Location", opts.Redirect)
			w.WriteHeader(http.StatusFound)
			return
		}
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(-1)
		Serve(&WSConn{c: c, ctx: context.Background()}, cfg)
	}))
}

// hold reads an HTTP request's head off c, records its request line, and
// then reads and discards whatever comes until the peer leaves, never
// answering.
func hold(c net.Conn, rec *Recorder) {
	defer c.Close()
	br := bufio.NewReader(c)
	first := true
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\r\n")
		if first {
			rec.Note(map[string]any{"held": true, "request": line})
			first = false
		}
		if line == "" {
			break
		}
	}
	io.Copy(io.Discard, br)
}
