package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// TestListToolsPagesAndStops: ListTools follows nextCursor, and stops with
// what it has when a server repeats a cursor.
func TestListToolsPagesAndStops(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cursors map[string]string // cursor asked -> nextCursor answered
		want    int               // tools listed
		stopped bool
	}{
		{"three pages", map[string]string{"": "p1", "p1": "p2", "p2": ""}, 3, false},
		{"a repeated cursor", map[string]string{"": "p1", "p1": "p1"}, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hostEnd, srvEnd := transport.Pipe(0)
			srv := wire.NewPeer(srvEnd, wire.Options{Logger: discard, Handler: wire.HandlerFunc(func(_ context.Context, r *wire.Request) (any, error) {
				switch r.Method {
				case protocol.MethodInitialize:
					return protocol.InitializeResult{Capabilities: protocol.ServerCapabilities{Tools: json.RawMessage(`{}`)}}, nil
				case protocol.MethodToolsList:
					var p protocol.ListToolsParams
					json.Unmarshal(r.Params, &p)
					return protocol.ListToolsResult{Tools: []protocol.Tool{{Name: "t" + p.Cursor}}, NextCursor: tc.cursors[p.Cursor]}, nil
				}
				return nil, nil
			})})
			defer srv.Close()
			s := open(t, session.Config{ID: server, Dial: func(context.Context) (transport.Stream, error) { return hostEnd, nil }, Logger: discard})
			tools, err := s.ListTools(context.Background())
			var stopped *session.ListingStoppedError
			if len(tools) != tc.want || errors.As(err, &stopped) != tc.stopped || (!tc.stopped && err != nil) {
				t.Fatalf("ListTools = %d tools, %v; want %d tools, stopped %v", len(tools), err, tc.want, tc.stopped)
			}
		})
	}
}

// TestListToolsBytesBound: a server whose pages never end and are large is
// listed up to MaxToolListBytes, not until MaxToolPages pages of any size.
func TestListToolsBytesBound(t *testing.T) {
	const pad = 4 << 20
	hostEnd, srvEnd := transport.Pipe(0)
	pages := 0
	srv := wire.NewPeer(srvEnd, wire.Options{Logger: discard, Handler: wire.HandlerFunc(func(_ context.Context, r *wire.Request) (any, error) {
		switch r.Method {
		case protocol.MethodInitialize:
			return protocol.InitializeResult{Capabilities: protocol.ServerCapabilities{Tools: json.RawMessage(`{}`)}}, nil
		case protocol.MethodToolsList:
			pages++
			return protocol.ListToolsResult{Tools: []protocol.Tool{{Name: "t", Description: strings.Repeat("d", pad)}}, NextCursor: fmt.Sprint("p", pages)}, nil
		}
		return nil, nil
	})})
	defer srv.Close()
	s := open(t, session.Config{ID: server, Dial: func(context.Context) (transport.Stream, error) { return hostEnd, nil }, Logger: discard})
	tools, err := s.ListTools(context.Background())
	var stopped *session.ListingStoppedError
	if !errors.As(err, &stopped) || stopped.Reason != "tools/list went past 32 MiB; listing stopped" {
		t.Fatalf("ListTools error = %v, want the byte bound", err)
	}
	if want := session.MaxToolListBytes / pad; len(tools) < want-1 || len(tools) > want {
		t.Errorf("listed %d tools of %d bytes, want about %d", len(tools), pad, want)
	}
}
