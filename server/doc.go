// Package server is the SDK for writing MCPL servers in Go, in the manner of
// net/http: declare what the server is, add tools and handlers, and serve
// connections on stdio or WebSocket.
//
// A Server holds the declarations: its name and version, the MCPL
// capability paths it advertises (SPEC §5.1, built into the nested
// advertisement from dot paths), its feature sets (SPEC §6.1, in the 0.5
// record form), its tools, and its channel handlers. Most capabilities are
// declared in Options.Capabilities; a few are advertised by what the
// server sets: tools by a tool, channels.typing by HandleChannelTyping,
// channels.acknowledge by HandleChannelAcknowledge, channels.streaming by
// HandleOutgoing. Each connection gets a *Conn, which holds the policy the
// host granted and the methods that send to the host.
//
// A connection's life, as the SDK runs it:
//
//  1. The host sends initialize; the SDK answers with the server's info and
//     advertisement.
//  2. The host sends its policy, featureSets/update as a Request (SPEC
//     §5.3). The SDK rejects a malformed one (a path both granted and
//     denied) with -32602, computes the receipt (accepted, or degraded for
//     each declared feature set whose uses the grant does not cover), lets
//     Options.CheckPolicy amend or refuse it, and answers. An accepted
//     policy closes Conn.Ready. A later Request replaces the policy (a
//     reduction applies before the receipt is written, an expansion
//     after); a Notification only narrows, by its disabled list (SPEC
//     §6.7).
//  3. Until a policy is established, and whenever it does not grant what
//     they need, the Conn methods that need a capability return a
//     *GrantError and send nothing: RegisterChannels and ChangeChannels
//     need channels.register, Incoming needs channels.incoming, PushEvent
//     needs pushEvents and its feature set enabled. Likewise the host's
//     channels/open and channels/close need channels.lifecycle,
//     channels/publish needs channels.publish, channels/acknowledge needs
//     channels.acknowledge, channels/typing needs channels.typing, and
//     channels/outgoing/chunk and channels/outgoing/complete need
//     channels.streaming, or they reach no handler: a request is answered
//     -32002, a notification dropped with a log line.
//  4. Tools (AddTool, HandleTool) answer tools/call, each call in its own
//     goroutine, as HandlePushRender's handler answers push/render. The
//     host may cancel such a request while it runs (MCP's
//     notifications/cancelled): the handler's ctx then ends with
//     ErrCancelled as its cause (context.Cause), carrying the host's
//     reason, and nothing is answered for that request. A cancellation
//     for a request that is not running, or that names none, is ignored.
//     Channel handlers (HandleChannelOpen, HandleChannelClose,
//     HandleChannelPublish or HandleChannelPublishTo,
//     HandleChannelAcknowledge, HandleChannelTyping, HandleOutgoing) run
//     in the order the host sent their messages, on the connection's
//     dispatch goroutine: they must not wait on the host, and a
//     cancellation, read after they return, finds them done.
//  5. The connection ends when the host ends it (for stdio, when stdin
//     closes), when the ctx it is served with ends, or at Conn.Close or
//     Server.Close. ServeStdio and ServeConn return after
//     Options.OnConnect and every tool call have.
//
// The usual shape of a connection's own work is Options.OnConnect: wait
// for Ready, register channels, then deliver messages until ctx ends:
//
//	OnConnect: func(ctx context.Context, c *server.Conn) {
//		select {
//		case <-c.Ready():
//		case <-ctx.Done():
//			return
//		}
//		c.RegisterChannels(ctx, general)
//		...
//	}
//
// A request to the host that fails matches ErrNotSent, ErrNoAnswer or
// ErrConnectionClosed with errors.Is, as what is known of its effect says;
// a JSON-RPC error the host answered with is reached with errors.As and a
// *protocol.Error. A handler's ctx carries the values of the ctx its
// connection is served with (ServeStdio's, ServeConn's, or the HTTP
// request's for ServeHTTP).
//
// A server author imports this package and package protocol; the JSON-RPC
// peer and the transports beneath it are internal (docs/api.md).
//
// The SDK logs operator detail to Options.Logger, never to stdout, which
// on stdio carries the protocol.
package server
