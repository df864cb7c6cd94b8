package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// Which MCP revision a connection speaks (docs/mcp.md).
//
// With Config.Discover set, a connection opens with server/discover at
// 2026-07-28, the stateless revision. A server that answers it speaks that
// revision: the connection is then stateless (every request carries its
// _meta, no initialize), and MCPL is off, since MCPL's grant and its
// server-sent methods belong to an initialize session. A server that
// answers with UnsupportedProtocolVersion names what it speaks instead.
// Any other error, or no answer within DiscoverTimeout, marks a server of
// the earlier revisions; so does a discover answer that also names one of
// them when the server advertises MCPL (MCPL needs the session, so a
// dual-era MCPL server is met through initialize). Those are opened with
// initialize, offering the newest legacy revision both sides speak
// (2025-11-25 when nothing says otherwise). Once a server has answered
// through initialize the session stops probing it: its reconnects go
// straight to initialize. Once it has answered discover, a discover that
// fails on a later connect fails that connect (it is redialled, with
// reconnect on) rather than falling back to initialize.
//
// A server that answers initialize with a revision this host does not
// speak is refused (the connect fails, naming both sides' revisions, and
// is not retried: a redial would meet the same answer); one that answers
// a revision it speaks but was not offered is served by that revision,
// with a warning.

// DefaultDiscoverTimeout bounds server/discover: a server of an earlier
// revision that ignores the request costs this much once per connect.
const DefaultDiscoverTimeout = 5 * time.Second

// ErrVersion is the connect error when the two sides share no MCP
// revision. Connect's error wraps it, naming what each side speaks; the
// session does not redial after it.
var ErrVersion = errors.New("session: no MCP protocol version in common")

// errDiscoverClosed is a connection that ended during server/discover.
var errDiscoverClosed = errors.New("session: the connection closed during server/discover")

// versionList words a list of revisions for a message.
func versionList(vs []string) string {
	if len(vs) == 0 {
		return "none"
	}
	return strings.Join(vs, ", ")
}

// ours words what this host speaks.
func ours() string { return versionList(protocol.Versions) }

// eraVerdict is what server/discover showed.
type eraVerdict int

const (
	eraLegacy eraVerdict = iota // open with initialize
	eraModern                   // stateless: served as discover said
	eraNone                     // no revision in common: refuse
)

// discover probes the server with server/discover. It returns the verdict
// and, for a legacy server, the revision to offer in initialize (""
// for the default); st is filled for a modern one. err is a failure of
// the connection itself (it closed, or ctx ended).
func (c *conn) discover(ctx context.Context, st *State) (verdict eraVerdict, offer string, err error) {
	s := c.s
	var res protocol.DiscoverResult
	err = c.peer.Call(ctx, protocol.MethodDiscover, c.meta(protocol.Version20260728, struct{}{}), &res,
		wire.WithTimeout(s.cfg.DiscoverTimeout))
	var ce *wire.CallError
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return eraLegacy, "", ctx.Err()
	case c.peer.Err() != nil:
		return eraLegacy, "", fmt.Errorf("%w: %w: %w", errDiscoverClosed, wire.ErrConnClosed, c.peer.Err())
	case errors.As(err, &ce) && ce.Outcome == wire.ErrorResponse && ce.Answer.Code == protocol.CodeUnsupportedProtocolVers:
		var data protocol.UnsupportedVersionData
		_ = json.Unmarshal(ce.Answer.Data, &data)
		st.ServerVersions = data.Supported
		// It refused 2026-07-28: only an earlier revision it names is left.
		if best := protocol.BestCommon(legacyOnly(data.Supported)); best != "" {
			return eraLegacy, best, nil
		}
		return eraNone, "", fmt.Errorf("%w: the server refused %s and speaks %s; this host speaks %s", ErrVersion, protocol.Version20260728, versionList(data.Supported), ours())
	case s.modernSeen.Load():
		// It spoke 2026-07-28 on an earlier connection: a discover that
		// fails now is this connect's failure, not a sign of another era.
		return eraLegacy, "", fmt.Errorf("session: server/discover, to a server that spoke %s before, failed: %w", protocol.Version20260728, err)
	default:
		// A server of an earlier revision: "method not found", some other
		// error, or silence.
		s.log.Debug("server/discover was not answered as 2026-07-28 defines; opening with initialize", "reason", policyErrorReason(err))
		return eraLegacy, "", nil
	}
	st.ServerVersions = res.SupportedVersions
	verdict, offer, err = c.choose(res.SupportedVersions, res.Capabilities.MCPL() != nil)
	if verdict != eraModern {
		return verdict, offer, err
	}
	st.Version, st.Modern = protocol.Version20260728, true
	st.Init = protocol.InitializeResult{
		ProtocolVersion: protocol.Version20260728,
		Capabilities:    res.Capabilities,
		ServerInfo:      res.ServerInfo(),
		Instructions:    res.Instructions,
	}
	return eraModern, "", nil
}

// choose decides from the revisions a server said it speaks.
func (c *conn) choose(theirs []string, mcpl bool) (eraVerdict, string, error) {
	best := protocol.BestCommon(theirs)
	switch {
	case best == "":
		return eraNone, "", fmt.Errorf("%w: the server speaks %s; this host speaks %s", ErrVersion, versionList(theirs), ours())
	case !protocol.Modern(best):
		return eraLegacy, best, nil
	}
	if mcpl {
		legacy := protocol.BestCommon(legacyOnly(theirs))
		if legacy != "" {
			c.s.log.Info("the server speaks 2026-07-28 and MCPL; MCPL needs an initialize session, so it is opened with initialize", "version", legacy)
			return eraLegacy, legacy, nil
		}
		c.s.log.Warn("the server advertises MCPL but speaks only 2026-07-28, which has no session for it: tools work, MCPL is off")
	}
	return eraModern, "", nil
}

func legacyOnly(vs []string) []string {
	var out []string
	for _, v := range vs {
		if !protocol.Modern(v) {
			out = append(out, v)
		}
	}
	return out
}

// checkAnswered judges the revision a server answered to initialize,
// having been offered offered.
func (c *conn) checkAnswered(offered, got string) error {
	switch {
	case got == "":
		c.s.log.Debug("the server's initialize answer names no protocol version; served as the revision offered", "offered", offered)
	case !protocol.Speaks(got) || protocol.Modern(got):
		return fmt.Errorf("%w: the server answered initialize with protocol version %q; this host offered %s and speaks %s",
			ErrVersion, got, offered, versionList(protocol.LegacyVersions))
	case got > offered:
		c.s.log.Warn("the server answered a newer protocol version than this host offered; served by the version it answered",
			"offered", offered, "answered", got)
	case got != offered:
		c.s.log.Info("the server chose an earlier protocol version", "offered", offered, "answered", got)
	}
	return nil
}

// initializeRefused reads an initialize error that says which revisions
// the server speaks (-32022, or any error whose data has "supported"):
// it returns the revision to offer again, or "" when there is none to
// try.
func initializeRefused(err error, offered string) (retry string, theirs []string, ok bool) {
	var ce *wire.CallError
	if !errors.As(err, &ce) || ce.Outcome != wire.ErrorResponse || len(ce.Answer.Data) == 0 {
		return "", nil, false
	}
	var data protocol.UnsupportedVersionData
	if json.Unmarshal(ce.Answer.Data, &data) != nil || len(data.Supported) == 0 {
		return "", nil, false
	}
	best := protocol.BestCommon(legacyOnly(data.Supported))
	if best == offered {
		best = ""
	}
	return best, data.Supported, true
}

// unknownInitialize words an initialize that failed with "method not
// found" after discover went unanswered: the server may speak a newer MCP.
func unknownInitialize(err error) error {
	var ce *wire.CallError
	if errors.As(err, &ce) && ce.Outcome == wire.ErrorResponse && ce.Answer.Code == protocol.CodeMethodNotFound {
		return fmt.Errorf("%w (the server does not know initialize: it may speak a newer MCP than %s, but its server/discover was not answered as 2026-07-28 defines)", err, protocol.Version20260728)
	}
	return err
}

// meta returns params with the 2026-07-28 request _meta merged in: the
// revision, this host's identity and its capabilities (none: it serves no
// elicitation, sampling or roots, so a server must not ask for them).
// Keys params already has stay as they are.
func (c *conn) meta(version string, params any) any {
	raw, err := json.Marshal(params)
	if err != nil {
		return params // the call's own encode reports it
	}
	var obj map[string]json.RawMessage
	if string(raw) == "null" || json.Unmarshal(raw, &obj) != nil || obj == nil {
		obj = map[string]json.RawMessage{}
	}
	m := map[string]json.RawMessage{}
	if prior, ok := obj["_meta"]; ok {
		_ = json.Unmarshal(prior, &m)
		if m == nil {
			m = map[string]json.RawMessage{}
		}
	}
	put := func(k string, v any) {
		if _, ok := m[k]; !ok {
			b, _ := json.Marshal(v)
			m[k] = b
		}
	}
	put(protocol.MetaProtocolVersion, version)
	put(protocol.MetaClientInfo, protocol.Implementation{Name: c.s.cfg.ClientName, Version: c.s.cfg.ClientVersion})
	put(protocol.MetaClientCapabilities, struct{}{})
	b, _ := json.Marshal(m)
	obj["_meta"] = b
	return obj
}
