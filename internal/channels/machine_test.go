package channels

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/store"
)

// TestMachine drives the decision core alone, as etcd raft's interaction
// tests drive its state machine: each file under testdata/machine is a
// script of events stepped into a machine (registrations, the agent's
// tools, deliveries and replies, the servers' answers, the store's), and
// what the machine asked for in return: the records it wrote, the
// requests it sent, the notices, logs and answers it released. `go test
// -run TestMachine -rewrite` rewrites the expected output; commit the
// diff only when you understand why it changed.
//
// Commands (server "s" unless server= is given):
//
//	register ch=(a,b) [open=(b)] [addr=x] [hold=r1]  a registration; answered at once unless hold names it
//	answered reg=r1                           the held registration's answer went out
//	remove ch=a                               channels/changed removing a
//	update ch=a addr=x                        channels/changed moving a to address x
//	disconnect [remove]                       the server's connection ended (and it is forgotten)
//	server [timeout]                          the server (re)added
//	grant lifecycle=false|true                the server's channels.lifecycle grant
//	policy ch=(a,b)                           the channels the subscription policy admits
//	open ch=a as=o1 [history=5]               channel_open
//	close ch=a as=c1 [source=housekeeping] [override]   channel_close, or a machine close
//	decline ch=a as=d1                        channel_decline's decision
//	deliver ch=a as=p1 [agent=ada]            a delivery's open-on-send
//	reply ch=a [agent=ada] [tool=t]           a send tool's reply into a
//	answer req=q1 (ok|fail|deadline|other=z)  the server answers request q1
//	store (ok|fail|hold|release)              the store's next appends succeed, fail, or wait
//	restart                                   a new machine, replaying the log
//	close-machine                             the registry begins closing
//	state ch=a                                the channel as readers see it
//	log                                       the log's records
//	idle                                      whether nothing is out
//	compact-after n=3                         compact once the log has grown by n records
func TestMachine(t *testing.T) {
	datadriven.Walk(t, "testdata/machine", func(t *testing.T, path string) {
		h := newMachineHarness()
		datadriven.RunTest(t, path, h.handle)
	})
}

type machineHarness struct {
	m       *machine
	grants  map[string]bool
	admit   map[string]bool
	log     []store.Record
	seq     int64
	storeIs string // "ok", "fail", "hold"
	held    []*persistOut
	regs    map[string]*registration
	reqs    map[string]sendOut
	nreq    int
	out     []string
}

func newMachineHarness() *machineHarness {
	h := &machineHarness{grants: map[string]bool{"channels.lifecycle": true}, admit: map[string]bool{}, storeIs: "ok",
		regs: map[string]*registration{}, reqs: map[string]sendOut{}}
	h.boot()
	return h
}

// boot makes a machine on the harness's log, as a restart does.
func (h *machineHarness) boot() {
	h.m = newMachine(func(_, capability string) bool { return h.grants[capability] }, describeForTest)
	for _, r := range h.log {
		h.m.replay(r)
	}
	h.m.booted()
	h.m.addServer("s", ServerConfig{Admits: func(id string) bool { return h.admit[id] }})
	h.m.ready()
}

func (h *machineHarness) printf(format string, args ...any) {
	h.out = append(h.out, fmt.Sprintf(format, args...))
}

// drain carries out what the machine asks until nothing is left: appends
// complete at once while the store is ok or failing, and wait while it
// is held.
func (h *machineHarness) drain() {
	for range 100 {
		rd := h.m.ready()
		for _, s := range rd.Sends {
			h.nreq++
			name := fmt.Sprintf("q%d", h.nreq)
			h.reqs[name] = s
			what := "close"
			if s.open {
				what = "open"
			}
			extra := ""
			if s.history != nil {
				extra = " history=" + string(s.history)
			}
			if s.open && len(s.desc.Address) > 0 {
				extra += " address=" + string(s.desc.Address)
			}
			h.printf("send %s: %s %s/%s%s", name, what, s.key.Server, s.key.Channel, extra)
		}
		for _, l := range rd.Logs {
			h.printf("log %s: %s%s", strings.ToLower(l.level.String()), l.msg, attrsText(l.attrs))
		}
		for _, n := range rd.Notices {
			h.printf("notice: %s", noticeText(n))
		}
		for _, fn := range rd.Replies {
			fn()
		}
		if c := rd.Compact; c != nil {
			h.printf("compact: through %d, keep %v", c.through, c.keep)
			kept := slices.DeleteFunc(slices.Clone(h.log), func(r store.Record) bool { return r.Seq <= c.through && !slices.Contains(c.keep, r.Seq) })
			dropped := len(h.log) - len(kept)
			h.log = kept
			h.m.compacted(dropped, nil)
		}
		if p := rd.Persist; p != nil {
			h.held = append(h.held, p)
		}
		if len(h.held) > 0 && h.storeIs != "hold" {
			h.complete()
			continue
		}
		if len(rd.Sends)+len(rd.Logs)+len(rd.Notices)+len(rd.Replies) == 0 && rd.Compact == nil && rd.Persist == nil {
			return
		}
	}
	panic("the machine did not settle")
}

// complete finishes the append held first.
func (h *machineHarness) complete() {
	p := h.held[0]
	h.held = h.held[1:]
	if h.storeIs == "fail" {
		h.printf("write failed: %s", recsText(p.recs))
		h.m.persisted(p.id, nil, errDiskFull)
		return
	}
	recs := slices.Clone(p.recs)
	for i := range recs {
		h.seq++
		recs[i].Seq = h.seq
	}
	h.log = append(h.log, recs...)
	h.printf("write: %s", recsText(recs))
	h.m.persisted(p.id, recs, nil)
}

func recsText(recs []store.Record) string {
	var parts []string
	for _, r := range recs {
		seq := ""
		if r.Seq != 0 {
			seq = fmt.Sprintf("#%d ", r.Seq)
		}
		if r.Kind == store.KindDeclined {
			parts = append(parts, fmt.Sprintf("%s%s/%s declined %s", seq, r.Server, r.Channel, r.MessageID))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s%s/%s %s/%s", seq, r.Server, r.Channel, r.State, r.Source))
	}
	return strings.Join(parts, ", ")
}

func attrsText(attrs []any) string {
	var b strings.Builder
	for i := 0; i+1 < len(attrs); i += 2 {
		fmt.Fprintf(&b, " %v=%v", attrs[i], attrs[i+1])
	}
	return b.String()
}

func noticeText(n Notice) string {
	var ids []string
	for _, c := range n.Channels {
		ids = append(ids, c.ID)
	}
	s := fmt.Sprintf("%s cause=%s server=%s agent=%q channels=%v", n.Kind, n.Cause, n.Server, n.Agent, ids)
	if n.Kind == NoticeReplyOpenFailed {
		s += fmt.Sprintf(" tool=%s opening=%v selected=%q reason=%q", n.Tool, n.Opening, n.SelectedForOpening, n.Reason)
	}
	return s
}

func toolText(o toolOutcome) string {
	switch {
	case o.missing != "":
		return "missing: " + o.missing
	case o.refusal == refusalSource:
		return "refused: source"
	case o.refusal == refusalExplicitOpen:
		return "refused: explicit open"
	case o.alreadyOpen:
		return "already open"
	case o.unrecorded && o.already:
		return "already, unrecorded"
	case o.unrecorded:
		return "unrecorded"
	case o.already:
		return "already"
	case o.res.err != nil:
		return "failed: " + o.res.err.Error()
	}
	return fmt.Sprintf("done: open=%v", o.res.open)
}

func openText(o openOutcome) string {
	var parts []string
	if o.noLifecycle {
		parts = append(parts, "no lifecycle")
	}
	if o.opening {
		parts = append(parts, "opening")
	}
	if o.err != nil {
		parts = append(parts, fmt.Sprintf("failed: %s", o.reason))
	}
	if o.selected != "" {
		parts = append(parts, "selected="+o.selected)
	}
	if o.overtaken {
		parts = append(parts, "overtaken")
	}
	if o.prevented {
		parts = append(parts, "prevented")
	}
	if o.err == nil {
		parts = append(parts, "ok")
	}
	return strings.Join(parts, ", ")
}

func (h *machineHarness) key(t *testing.T, td *datadriven.TestData) Key {
	server := "s"
	td.MaybeScanArgs(t, "server", &server)
	var ch string
	td.ScanArgs(t, "ch", &ch)
	return Key{server, ch}
}

func (h *machineHarness) chans(t *testing.T, td *datadriven.TestData, key string) []string {
	arg, ok := td.Arg(key)
	if !ok {
		return nil
	}
	return arg.Vals
}

func (h *machineHarness) handle(t *testing.T, td *datadriven.TestData) string {
	h.out = nil
	m := h.m
	as := ""
	td.MaybeScanArgs(t, "as", &as)
	switch td.Cmd {
	case "register":
		open := h.chans(t, td, "open")
		addr := ""
		td.MaybeScanArgs(t, "addr", &addr)
		var descs []protocol.ChannelDescriptor
		for _, id := range h.chans(t, td, "ch") {
			d := desc(id, slices.Contains(open, id))
			if addr != "" {
				d.Address = json.RawMessage(`{"room":"` + addr + `"}`)
			}
			descs = append(descs, d)
		}
		results, reg := m.register("s", descs, nil, nil)
		h.printResults(results)
		if name := ""; td.MaybeScanArgs(t, "hold", &name) {
			h.regs[name] = reg
		} else {
			m.answered(reg)
		}
	case "answered":
		var name string
		td.ScanArgs(t, "reg", &name)
		m.answered(h.regs[name])
	case "remove":
		results, reg := m.changed("s", changes{removed: h.chans(t, td, "ch")})
		h.printResults(results)
		m.answered(reg)
	case "update":
		k := h.key(t, td)
		var addr string
		td.ScanArgs(t, "addr", &addr)
		d := desc(k.Channel, false)
		d.Address = json.RawMessage(`{"room":"` + addr + `"}`)
		results, reg := m.changed("s", changes{updated: []protocol.ChannelDescriptor{d}})
		h.printResults(results)
		m.answered(reg)
	case "disconnect":
		m.disconnected("s", td.HasArg("remove"))
	case "server":
		m.addServer("s", ServerConfig{Admits: func(id string) bool { return h.admit[id] }})
	case "grant":
		var on bool
		td.ScanArgs(t, "lifecycle", &on)
		h.grants["channels.lifecycle"] = on
	case "policy":
		clear(h.admit)
		for _, id := range h.chans(t, td, "ch") {
			h.admit[id] = true
		}
	case "open":
		k := h.key(t, td)
		var hist json.RawMessage
		if n := 0; td.MaybeScanArgs(t, "history", &n) {
			hist = json.RawMessage(fmt.Sprintf(`{"limit":%d}`, n))
		}
		c, missing := liveChan(m, k)
		if c == nil {
			h.printf("reply %s: missing: %s", as, missing)
			break
		}
		m.openTool(c, hist, func(o toolOutcome) { m.reply(func() { h.printf("reply %s: %s", as, toolText(o)) }) })
	case "close":
		k := h.key(t, td)
		source := SourceAgentTool
		td.MaybeScanArgs(t, "source", &source)
		c := m.chans[k]
		if c == nil {
			h.printf("reply %s: missing", as)
			break
		}
		m.closeTool(c, source, td.HasArg("override"), func(o toolOutcome) { m.reply(func() { h.printf("reply %s: %s", as, toolText(o)) }) })
	case "decline":
		c, missing := liveChan(m, h.key(t, td))
		if c == nil {
			h.printf("reply %s: missing: %s", as, missing)
			break
		}
		m.declineTool(c, func(o toolOutcome) { m.reply(func() { h.printf("reply %s: %s", as, toolText(o)) }) })
	case "deliver", "reply":
		k := h.key(t, td)
		who := caller{label: "#" + k.Channel}
		td.MaybeScanArgs(t, "agent", &who.agent)
		source := SourceOpenedByDelivery
		if td.Cmd == "reply" {
			source = SourceOpenedByReply
			who.tool = "send"
			td.MaybeScanArgs(t, "tool", &who.tool)
		}
		m.ensureOpen(k, source, who, func(o openOutcome) {
			if as != "" {
				m.reply(func() { h.printf("reply %s: %s", as, openText(o)) })
			}
		})
	case "answer":
		var name string
		td.ScanArgs(t, "req", &name)
		s, ok := h.reqs[name]
		if !ok {
			t.Fatalf("%s: no request %s", td.Pos, name)
		}
		delete(h.reqs, name)
		var answer json.RawMessage
		var err error
		switch {
		case td.HasArg("ok") && s.open:
			answer = json.RawMessage(`{"channel":{"id":"` + s.key.Channel + `"}}`)
		case td.HasArg("ok"):
			answer = json.RawMessage(`{"closed":true}`)
		case td.HasArg("fail"):
			err = &wire.CallError{Outcome: wire.ErrorResponse, Cause: wire.CauseErrorAnswer, Server: "s", Answer: &protocol.Error{Code: protocol.CodeChannelOpenFailed, Message: "no room"}}
		case td.HasArg("deadline"):
			err = &wire.CallError{Outcome: wire.NoResponse, Cause: wire.CauseDeadline, Server: "s"}
		default:
			var other string
			td.ScanArgs(t, "other", &other)
			answer = json.RawMessage(`{"channel":{"id":"` + other + `"}}`)
		}
		m.response(s.key, s.op, answer, err)
	case "store":
		for _, mode := range []string{"ok", "fail", "hold"} {
			if td.HasArg(mode) {
				h.storeIs = mode
			}
		}
		if td.HasArg("release") {
			h.storeIs = "ok"
		}
	case "restart":
		h.reqs = map[string]sendOut{}
		h.held = nil
		h.boot()
	case "compact-after":
		td.ScanArgs(t, "n", &m.compactAfter)
	case "close-machine":
		m.close()
	case "state":
		k := h.key(t, td)
		c := m.chans[k]
		if c == nil {
			return "none\n"
		}
		d := "none"
		if c.decision != nil {
			d = fmt.Sprintf("#%d %s/%s", c.decision.Seq, c.decision.State, c.decision.Source)
		}
		return fmt.Sprintf("registered=%v decision=%s confirmed=%v open=%v busy=%v\n", c.registered, d, c.confirmed, c.open, c.busy())
	case "log":
		var lines []string
		for _, r := range h.log {
			lines = append(lines, recsText([]store.Record{r}))
		}
		if len(lines) == 0 {
			return "empty\n"
		}
		return strings.Join(lines, "\n") + "\n"
	case "idle":
		return fmt.Sprintf("idle=%v chans=%d\n", m.idle(), len(m.chans))
	default:
		t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
	}
	h.drain()
	if len(h.out) == 0 {
		return "ok\n"
	}
	return strings.Join(h.out, "\n") + "\n"
}

func (h *machineHarness) printResults(results []protocol.ChannelResult) {
	var parts []string
	for _, r := range results {
		s := r.ID + " accepted"
		if !r.Accepted {
			s = r.ID + " refused: " + r.Reason
		}
		parts = append(parts, s)
	}
	h.printf("results: %s", strings.Join(parts, ", "))
}
