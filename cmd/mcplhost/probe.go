package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// exitReportWait bounds how long probe waits, once a stdio server's
// connection has ended, for its process's exit to be known.
const exitReportWait = time.Second

// version is mcplhost's version in clientInfo.
const version = "0.1.0"

// probeImplements is what the probe serves: MCP's tools, and, as a
// diagnostic, push events (recorded and accepted), channel registrations
// (recorded and accepted) and inbound messages (declined: no agent is
// here), and the channel leaves a host sends (lifecycle, publish,
// acknowledge, typing, streaming), which the probe never sends: granted, so
// that a chat connector's messaging feature set, which uses all seven, is
// enabled, and the server shows what it does against a real host.
var probeImplements = []string{"tools", "pushEvents", "channels.register", "channels.incoming",
	"channels.lifecycle", "channels.publish", "channels.acknowledge", "channels.typing", "channels.streaming"}

// channelsListWait bounds channels/list (--timeout lowers it): the
// channels a server registered are known already, so its listing is not
// worth waiting the request timeout for.
const channelsListWait = 3 * time.Second

// probe is one run of `mcplhost probe`.
type probe struct {
	f      probeFlags
	stdout io.Writer
	log    *slog.Logger
	ev     *eventLog

	gone   chan struct{}               // closed when the connection ends other than by the probe
	listed protocol.ChannelsListResult // what channels/list answered
	refs   *content.Refs               // references its calls' results carried
	found  findings                    // what the findings are made of, counted as messages arrive

	mu     sync.Mutex
	stream transport.Stream // the connection's, for how it ended
	noise  *noiseStream     // a stdio server's, counting its stdout lines that are not messages
}

func runProbe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, err := parseProbeFlags(args)
	if err != nil {
		printer{stderr}.usageError(probeUsage, "mcplhost probe: %v", err)
		return exitUsage
	}
	if f.help {
		printer{stdout}.text(probeUsage)
		return exitOK
	}
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelDebug
	}
	p := &probe{f: f, stdout: stdout, log: slog.New(slog.NewTextHandler(stderr, logOptions(level))), gone: make(chan struct{}), refs: content.NewRefs(0)}
	p.ev = &eventLog{out: stdout, json: f.json}
	return p.run(ctx, stderr)
}

// inbound is told of each privileged message the server sends: it counts
// what makes a finding, and logs the event.
func (p *probe) inbound(in session.Inbound) {
	p.found.observe(in)
	p.ev.add(in)
}

// bound is d lowered to --timeout (which 0 leaves alone).
func (p *probe) bound(d time.Duration) time.Duration {
	if p.f.timeout > 0 && p.f.timeout < d {
		return p.f.timeout
	}
	return d
}

// run probes the server; ctx ending (a signal) stops it wherever it is,
// and the server is closed before it returns.
func (p *probe) run(ctx context.Context, stderr io.Writer) int {
	pol := grant.Policy{Enable: p.f.enable, Disable: p.f.disable}
	var dialErr error
	sess, err := session.Connect(ctx, session.Config{
		ID: p.f.id,
		Dial: func(ctx context.Context) (transport.Stream, error) {
			s, err := p.dial(ctx)
			dialErr = err
			return s, err
		},
		Policy:            pol,
		Implemented:       probeImplements,
		RequestTimeout:    p.f.timeout,
		InitializeTimeout: p.bound(session.DefaultInitializeTimeout),
		PolicyTimeout:     p.bound(session.DefaultPolicyTimeout),
		Discover:          true,
		DiscoverTimeout:   p.bound(session.DefaultDiscoverTimeout),
		Handler:           probeHandler{},
		OnPushEvent:       acceptEvent,
		OnInbound:         p.inbound,
		OnDisconnect:      func(*session.Session, bool) { close(p.gone) },
		Logger:            p.log,
		ClientName:        "mcplhost",
		ClientVersion:     version,
	})
	if err != nil {
		if ctx.Err() != nil {
			return exitFail // stopped: the caller says so
		}
		return p.failed(stderr, err, dialErr)
	}
	defer sess.Close()

	st := sess.State()
	rep := newProbeReport(p.f.id, st, pol.Notes(probeImplements))
	complete := p.alive(sess, &rep, "the policy exchange") &&
		p.listTools(ctx, sess, &rep, pol) && p.listChannels(ctx, sess, &rep, st.Grant)
	if !p.f.json {
		printHeader(p.stdout, rep)
		p.ev.goLive()
	}
	for _, c := range p.f.calls {
		if !complete {
			break
		}
		res := p.call(ctx, sess, c, rep.ToolsDenied)
		rep.Calls = append(rep.Calls, res)
		if !p.f.json {
			printCall(p.stdout, res)
		}
		complete = p.alive(sess, &rep, "call "+c.tool)
	}
	if complete && p.f.wait > 0 {
		// The report is complete: a server that ends during the wait is
		// reported, and probe still succeeds.
		p.waitFor(ctx)
		p.alive(sess, &rep, "the wait")
	}
	p.ev.finish()
	rep.StdoutNoise = p.stdoutNoise()
	rep.Findings = p.found.list()
	if p.f.json {
		// Printed last, the JSON report has every registration and event.
		rep.Events = p.ev.all()
		rep.Channels = mergeListed(p.ev.channels(), p.listed.Channels)
		if !p.printJSON(stderr, rep) {
			return exitFail
		}
	} else {
		printNoise(p.stdout, "", rep.StdoutNoise)
		printFindings(p.stdout, "", rep.Findings)
		if rep.Ended != nil {
			printEnd(p.stdout, "", p.f.id, rep.Ended)
		}
	}
	if !complete || !callsOK(rep.Calls) {
		return exitFail
	}
	return exitOK
}

// callsOK is whether every --call made succeeded: a call that failed, was
// answered with an isError result, or was not made is the job failing,
// so probe exits 1 for it (the report has said which and why).
func callsOK(calls []probeResult) bool {
	for _, c := range calls {
		if !c.OK {
			return false
		}
	}
	return true
}

// failed reports a connect that failed: the dial, the handshake, or a
// refusal asking to close. With --json it is a report too.
func (p *probe) failed(stderr io.Writer, err, dialErr error) int {
	rep := emptyReport(p.f.id)
	rep.Events = p.ev.all()
	rep.StdoutNoise = p.stdoutNoise()
	rep.Findings = p.found.list()
	switch {
	case dialErr != nil:
		rep.Error = fmt.Sprintf("could not %s: %v", map[bool]string{true: "connect", false: "start the server"}[p.f.url != ""], dialErr)
	case errors.Is(err, session.ErrRefusedClose):
		reason := strings.TrimPrefix(err.Error(), session.ErrRefusedClose.Error()+": ")
		rep.Error = "policy: refused (fallback close), so the connection is closed: " + reason
	default:
		step := "the policy exchange"
		var ce *wire.CallError
		if errors.As(err, &ce) && ce.Method == protocol.MethodInitialize {
			step = "initialize"
		}
		if errors.Is(err, wire.ErrConnClosed) {
			rep.Ended = p.ended(nil, step)
			if ce != nil && (ce.Cause == wire.CauseTooLarge || ce.Cause == wire.CauseStalled) {
				rep.Ended.ClosedHere, rep.Ended.Why = true, closedHereWhy(ce.Err, transport.CloseInfo{})
			}
			rep.Error = endLine(p.f.id, rep.Ended)
		} else {
			rep.Error = fmt.Sprintf("%s failed: %v", step, err)
		}
	}
	if p.f.json {
		p.printJSON(stderr, rep)
		return exitFail
	}
	if rep.Ended != nil {
		printEnd(stderr, "mcplhost probe: ", p.f.id, rep.Ended)
	} else {
		printer{stderr}.linef("mcplhost probe: %s", rep.Error)
	}
	printNoise(stderr, "mcplhost probe: ", rep.StdoutNoise)
	printFindings(stderr, "mcplhost probe: ", rep.Findings)
	return exitFail
}

// printJSON prints the report as one indented JSON object, with what the
// event log left out.
func (p *probe) printJSON(stderr io.Writer, rep probeReport) bool {
	rep.EventsOmitted, rep.ChannelsIgnored = p.ev.omitted()
	if err := (printer{p.stdout}).json(rep); err != nil {
		printer{stderr}.linef("mcplhost probe: %v", err)
		return false
	}
	return true
}

// dial opens the server's stream and keeps it, to say how it ended.
func (p *probe) dial(ctx context.Context) (transport.Stream, error) {
	var s transport.Stream
	var err error
	if p.f.url != "" {
		var tok string
		if p.f.tokenEnv != "" {
			var ok bool
			tok, ok = os.LookupEnv(p.f.tokenEnv)
			if !ok || tok == "" {
				return nil, fmt.Errorf("environment variable %s, named by --token-env, is not set", p.f.tokenEnv)
			}
		}
		// ConnectTimeout bounds the dial and the upgrade (for Streamable
		// HTTP: each request until it is sent), and words their end; ctx
		// ends it early only when probe is stopped.
		timeout := p.bound(transport.DefaultConnectTimeout)
		if transport.IsHTTPURL(p.f.url) {
			s, err = transport.DialStreamableHTTP(ctx, p.f.url, transport.HTTPOptions{Logger: p.log, Token: tok, ConnectTimeout: timeout})
		} else {
			s, err = transport.DialWebSocket(ctx, p.f.url, transport.WebSocketOptions{Logger: p.log, Token: tok, TokenParam: p.f.tokenParam, ConnectTimeout: timeout})
		}
	} else {
		s, err = transport.Spawn(transport.Command{Argv: p.f.command, InheritEnv: p.f.inheritEnv},
			transport.StdioOptions{Logger: p.log.With("server", p.f.id)})
	}
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stream = s
	if p.f.url == "" {
		p.noise = &noiseStream{Stream: s}
		return p.noise, nil
	}
	return s, nil
}

// stdoutNoise returns what the server wrote to its stdout that was not a
// JSON-RPC message: nil when nothing was, and over WebSocket.
func (p *probe) stdoutNoise() *probeNoise {
	p.mu.Lock()
	ns := p.noise
	p.mu.Unlock()
	if ns == nil {
		return nil
	}
	return ns.noise()
}

// listTools lists the server's tools, unless host policy denies them; it
// reports whether the server is still there.
func (p *probe) listTools(ctx context.Context, sess *session.Session, rep *probeReport, pol grant.Policy) bool {
	if !grant.Grantable("tools", probeImplements, pol) {
		rep.ToolsDenied = true
		return true
	}
	if sess.State().Init.Capabilities.Tools == nil {
		rep.ToolsNote = "not listed: the server does not advertise tools"
		return true
	}
	tools, err := sess.ListTools(ctx)
	rep.Tools = append(rep.Tools, tools...)
	if err != nil {
		rep.ToolsError = err.Error()
	}
	return p.alive(sess, rep, protocol.MethodToolsList)
}

// listChannels asks the server's channels/list, briefly: the channels the
// server registered are known already, and a server that does not answer
// it is reported as not supporting it, not waited for. It reports whether
// the server is still there.
func (p *probe) listChannels(ctx context.Context, sess *session.Session, rep *probeReport, g grant.Grant) bool {
	rep.Channels = p.ev.channels()
	if !g.Has("channels.register") {
		return true
	}
	rep.ChannelsList = &probeChannelsList{Asked: true}
	wait := p.bound(channelsListWait)
	err := sess.Call(ctx, protocol.MethodChannelsList, struct{}{}, &p.listed, wire.WithTimeout(wait))
	// What the server registered meanwhile counts too.
	rep.Channels = mergeListed(p.ev.channels(), p.listed.Channels)
	var ce *wire.CallError
	switch {
	case err == nil:
		rep.ChannelsList.Supported = true
		rep.ChannelsList.Listed = len(p.listed.Channels)
	case errors.As(err, &ce) && ce.Cause == wire.CauseDeadline:
		rep.ChannelsList.Note = "not supported: no answer within " + wire.ShortDuration(wait)
	case errors.As(err, &ce) && ce.Outcome == wire.ErrorResponse && ce.Answer.Code == protocol.CodeMethodNotFound:
		rep.ChannelsList.Note = "not supported: the server does not know the method"
	default:
		rep.ChannelsList.Note = "failed: " + err.Error()
	}
	return p.alive(sess, rep, protocol.MethodChannelsList)
}

// call makes one --call, unless host policy denies tools.
func (p *probe) call(ctx context.Context, sess *session.Session, c probeCall, denied bool) probeResult {
	if denied {
		return probeResult{Name: c.tool, Text: "not made: host policy denies tools"}
	}
	var res protocol.CallToolResult
	err := sess.Call(ctx, protocol.MethodToolsCall, protocol.CallToolParams{Name: c.tool, Arguments: c.args}, &res)
	if err != nil {
		return probeResult{Name: c.tool, Text: err.Error()}
	}
	if res.IsError {
		return probeResult{Name: c.tool, ErrorResult: true, Text: strings.TrimSpace(res.Text())}
	}
	// As a host shows a result to a reader of text.
	lane := content.Lane{Server: p.f.id, Provenance: content.ProvenanceToolResult, Refs: p.refs}
	return probeResult{Name: c.tool, OK: true, Text: content.PlainText(lane.View(res.Content))}
}

// waitFor listens for --wait, or until the connection ends or ctx does.
func (p *probe) waitFor(ctx context.Context) {
	t := time.NewTimer(p.f.wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.gone:
	case <-ctx.Done():
	}
}

// alive reports whether the connection is still open; when it is not, it
// records how it ended and at which step.
func (p *probe) alive(sess *session.Session, rep *probeReport, step string) bool {
	if rep.Ended != nil {
		return false
	}
	if sess.State().Connected {
		return true
	}
	rep.Ended = p.ended(sess, step)
	return false
}

// ended says how the connection, which has ended, ended: the process's
// exit status and the last lines of its stderr, or the WebSocket's close.
func (p *probe) ended(sess *session.Session, step string) *probeEnd {
	p.mu.Lock()
	s := p.stream
	p.mu.Unlock()
	end := &probeEnd{Step: step, Stderr: []string{}}
	if s == nil {
		return end
	}
	if pr, ok := s.(*transport.Process); ok {
		// A write into a process that has just exited can end the
		// connection before the exit is reaped: give the exit a moment,
		// so that the report says the server exited, and how.
		t := time.NewTimer(exitReportWait)
		select {
		case <-pr.Exited():
		case <-t.C:
		}
		t.Stop()
	}
	info := s.CloseInfo()
	if info.Exited {
		code := info.ExitCode
		end.ExitCode, end.Signal = &code, info.Signal
	}
	end.WSCode, end.WSReason, end.Error = info.WSCode, info.WSReason, info.Err
	if tail := strings.TrimRight(info.StderrTail, "\n"); tail != "" {
		end.Stderr = strings.Split(tail, "\n")
	}
	if sess != nil {
		if here, cause := sess.LastEnd(); here && cause != nil {
			end.ClosedHere, end.Why = true, closedHereWhy(cause, info)
		}
	}
	return end
}

// closedHereWhy says why this host closed a server's connection, from the
// connection's close cause.
func closedHereWhy(cause error, info transport.CloseInfo) string {
	var tl *transport.TooLargeError
	var st *wire.StallError
	switch {
	case errors.As(cause, &tl):
		return fmt.Sprintf("the server sent a message over the size limit of %d bytes", tl.Limit)
	case errors.As(cause, &st):
		return "the server stopped reading what this host sent (it took nothing for " + wire.ShortDuration(st.After) + ")"
	case info.Err != "":
		return info.Err
	}
	return strings.TrimPrefix(cause.Error(), "transport: ")
}
