package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/host"
	"github.com/mcpl-go/mcpl/internal/agent"
	"github.com/mcpl-go/mcpl/internal/model/fakeapi"
	"github.com/mcpl-go/mcpl/store"
	"github.com/mcpl-go/mcpl/store/sqlite"
)

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// corpusWait bounds every wait of the adapter: far past anything the host
// takes, even loaded under -race.
const corpusWait = 30 * time.Second

// step runs one action and returns its observation: what a check of the
// step reads by path.
func (s *scenario) step(st corpusStep) map[string]any {
	t := s.t
	t.Helper()
	o := map[string]any{}
	switch st.Op {
	case "send":
		o["reply"] = s.server(st.Server).call(t, st.Method, st.Params)
	case "register":
		o["reply"] = s.server(st.Server).register(t, st.Channel)
	case "restartWithoutHistory":
		s.stop()
		if err := func() error {
			st, err := sqlite.Open(filepath.Join(s.dir, "host.db"), nil)
			if err != nil {
				return err
			}
			defer st.Close()
			return host.ForgetCoalescing(st)
		}(); err != nil {
			t.Fatal(err)
		}
		s.start()
	case "assemble":
		s.n++
		s.control(s.n)
		s.waitRequest(s.n)
	case "startTurn":
		s.n++
		s.turnN = s.n
		s.control(s.n)
	case "joinTurn":
		s.waitRequest(s.turnN)
	case "turn":
		s.settle()
	case "render":
		s.peer.setPlan(*st.Plan)
	case "waitRender":
		s.peer.waitRenders(t, st.Count)
	case "releaseRender":
		s.peer.release(t, st.Text)
	case "wait":
		time.Sleep(time.Duration(st.Ms) * time.Millisecond)
	case "observe":
	case "restart":
		s.stop()
		s.start()
	case "kill":
		// The instant of the kill: nothing after it is durable. Then the
		// host's remains go, and a new one starts on the same file.
		s.st.Close()
		s.stop()
		s.start()
	case "disconnect":
		s.peer.disconnect()
	case "reconnect":
		s.peer.reconnect()
		s.peer.waitReady(t)
		s.waitConnected()
	case "failNextModel":
		s.api.Add(fakeapi.Reply{Status: 400, Text: "the corpus fails this model call, as planned"})
	case "channelTool":
		// The corpus server runs its own channels (no channels.lifecycle):
		// the host records the decision and says no request was sent,
		// which the call reports as an error; the decision is what counts.
		res, err := s.h.CallTool(context.Background(), st.Name, json.RawMessage(`{"channelId":"chat"}`))
		o["result"] = anyOf(res)
		if err != nil {
			o["error"] = err.Error()
		}
		if ch := s.channel("chat"); ch == nil {
			t.Fatalf("%s: the host knows no channel chat", st.Name)
		}
	case "grant":
		// The operator narrows the server's channel authority to leaves
		// (the corpus narrows channels.incoming away) and restarts its
		// connection: this host changes a grant no other way.
		cfg := s.serverConfig("editor")
		for _, p := range []string{"channels.register", "channels.incoming"} {
			if !slices.Contains(st.Leaves, p) {
				cfg.Capabilities.Disable = append(cfg.Capabilities.Disable, p)
			}
		}
		if err := s.h.Restart(context.Background(), "editor", &cfg); err != nil {
			t.Fatal(err)
		}
		s.peer.waitReady(t)
		s.waitConnected()
	case "reassign":
		// The operator points the label editor at another endpoint: a
		// server of its own, and so another binding.
		next := newCorpusPeer(t, corpusAdvertisement())
		cfg := s.serverConfig("editor")
		cfg.URL = next.url()
		if err := s.h.Restart(context.Background(), "editor", &cfg); err != nil {
			t.Fatal(err)
		}
		s.peer = next
		s.peer.waitReady(t)
		s.waitConnected()
	case "fillCapacity":
		// corpusSubjects subjects, each with an occurrence no request has
		// read: none is idle, so the bound holds.
		for i := range corpusSubjects {
			params := fmt.Sprintf(`{"featureSet":"doc","eventId":"fill-%d","timestamp":"2026-01-01T00:00:00Z","coalesce":{"key":"fill-%d","initial":true},"payload":{"content":[{"type":"text","text":"FILL_%d"}]}}`, i, i, i)
			if r := s.peer.call(t, "push/event", json.RawMessage(params)); r["result"] == nil {
				t.Fatalf("filling subject %d: %v", i, r)
			}
		}
	case "disableFeature":
		// The operator disables the feature set and restarts the
		// server's connection: its grant has doc disabled from then on.
		cfg := s.serverConfig("editor")
		cfg.FeatureSets.Disable = []string{"doc"}
		if err := s.h.Restart(context.Background(), "editor", &cfg); err != nil {
			t.Fatal(err)
		}
		s.peer.waitReady(t)
		s.waitConnected()
	case "continuousReplacements":
		s.continuousReplacements(st, o)
	default:
		t.Fatalf("step %s: op %s is not constructed by this adapter", st.ID, st.Op)
	}
	s.observe(o)
	return o
}

// channel is the host's state of the corpus server's channel id.
func (s *scenario) channel(id string) *host.ChannelState {
	for _, c := range s.h.Channels() {
		if c.Server == "editor" && c.ID == id {
			return &c
		}
	}
	return nil
}

// server is the corpus server a step names ("" for editor).
func (s *scenario) server(name string) *corpusPeer {
	if name == "" || name == "editor" {
		return s.peer
	}
	p := s.others[name]
	if p == nil {
		s.t.Fatalf("no corpus server %q", name)
	}
	return p
}

// control sends the push event that drives an inference: it wakes the
// agent (its rules), and its text marks the request that shows it.
func (s *scenario) control(n int) {
	params := fmt.Sprintf(`{"featureSet":"doc","eventId":"probe-assemble-%d","timestamp":"2026-01-01T00:00:00Z","tags":["probe:assemble"],"payload":{"content":[{"type":"text","text":"probe assemble %d"}]}}`, n, n)
	if r := s.probe.call(s.t, "push/event", json.RawMessage(params)); r["result"] == nil {
		s.t.Fatalf("the control event was refused: %v", r)
	}
}

func marker(n int) string { return fmt.Sprintf("probe assemble %d", n) }

// waitRequest waits for the model request that shows control n.
func (s *scenario) waitRequest(n int) {
	s.t.Helper()
	deadline := time.Now().Add(corpusWait)
	for time.Now().Before(deadline) {
		for _, r := range s.api.Requests() {
			if strings.Contains(requestText(r), marker(n)) {
				s.settle() // its turn ends before the next step
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.t.Fatalf("no model request showed %q within %s", marker(n), corpusWait)
}

// settle waits for the wakes already there to run: a quiet past the
// debounce with no turn running and every model request answered.
func (s *scenario) settle() {
	s.t.Helper()
	// Twice the debounce and 400 ms more: a debounce timer a loaded
	// machine fires late still starts its turn inside the quiet.
	quiet := 2*s.debounce + 400*time.Millisecond
	deadline := time.Now().Add(corpusWait)
	var since time.Time
	for time.Now().Before(deadline) {
		busy := len(s.api.Requests()) != s.api.Answered()
		for _, a := range s.h.Agents() {
			busy = busy || a.InTurn
		}
		switch {
		case busy:
			since = time.Time{}
		case since.IsZero():
			since = time.Now()
		case time.Since(since) >= quiet:
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.t.Fatalf("the host did not settle within %s", corpusWait)
}

// waitConnected waits until the host has the peer connected with its
// policy established.
func (s *scenario) waitConnected() {
	deadline := time.Now().Add(corpusWait)
	for time.Now().Before(deadline) {
		if st, ok := s.h.Server("editor"); ok && st.Connected && len(st.Grant.Effective) > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.t.Fatalf("the host did not reconnect within %s", corpusWait)
}

// continuousReplacements sends eligible replacements of one subject every
// intervalMs, faster than the quiet, for three seconds, and observes when
// the subject's content first reached a model request (firstDeliveryMs,
// from the first send).
func (s *scenario) continuousReplacements(st corpusStep, o map[string]any) {
	t := s.t
	interval := time.Duration(st.Interval) * time.Millisecond
	start := time.Now()
	var first float64 = -1
	for i := 0; time.Since(start) < 3*time.Second; i++ {
		spec := `{"key":"K"}`
		if i == 0 {
			spec = `{"key":"K","initial":true}`
		}
		params := fmt.Sprintf(`{"featureSet":"doc","eventId":"r%d","timestamp":"2026-01-01T00:00:00Z","coalesce":%s,"payload":{"content":[{"type":"text","text":"REPLACEMENT_%d"}]}}`, i, spec, i)
		if r := s.peer.call(t, "push/event", json.RawMessage(params)); r["result"] == nil {
			t.Fatalf("replacement %d refused: %v", i, r)
		}
		if first < 0 {
			for _, r := range s.api.Requests() {
				if strings.Contains(requestText(r), "REPLACEMENT_") {
					first = float64(time.Since(start).Milliseconds())
				}
			}
		}
		time.Sleep(interval)
	}
	o["firstDeliveryMs"] = first
	s.settle()
}

// observe adds what every check may read besides the step's own.
func (s *scenario) observe(o map[string]any) {
	reqs := s.api.Requests()
	var all []string
	for _, r := range reqs {
		all = append(all, requestText(r))
	}
	byModel := map[string]any{}
	for i, r := range reqs {
		var req struct {
			Model string `json:"model"`
		}
		json.Unmarshal(r, &req)
		byModel[req.Model] = all[i]
	}
	o["byModel"] = byModel
	o["modelCalls"] = float64(len(reqs))
	o["modelFailures"] = float64(s.failures())
	if len(all) > 0 {
		o["requestText"] = all[len(all)-1]
	} else {
		o["requestText"] = ""
	}
	o["allRequestText"] = strings.Join(all, "\n")
	o["allContextText"] = strings.Join(append(all, s.inboxContext()...), "\n")
	renders := s.peer.rendersSeen()
	o["renders"] = renders
	reqs2 := make([]any, len(all))
	for i, r := range all {
		reqs2[i] = r
	}
	o["requests"] = reqs2
	var agents []any
	for _, a := range s.h.Agents() {
		agents = append(agents, a.Name)
	}
	o["agents"] = agents
	if st, ok := s.h.Server("editor"); ok {
		var enabled []string
		for _, fs := range st.Grant.FeatureSets {
			if fs.State == grant.StateEnabled {
				enabled = append(enabled, fs.Name)
			}
		}
		o["servers"] = map[string]any{"editor": map[string]any{
			"connected":         st.Connected,
			"policyEstablished": len(st.Grant.Effective) > 0,
			// The binding is the configured server name (host/coalesce.go).
			"binding":         "editor",
			"grant":           anyOf(st.Grant.Effective),
			"enabledFeatures": anyOf(enabled),
			// The operator's policy: the server's configuration the host
			// runs.
			"operatorPolicy": anyOf(s.serverConfig("editor")),
		}}
	}
}

// inboxContext is the text of every row of the inbox that is context for
// a model, read or not: stored context, as allContextText reads it.
func (s *scenario) inboxContext() []string {
	msgs, err := s.st.Page(context.Background(), store.InboxQuery{Server: "editor", Limit: 10000})
	if err != nil {
		s.t.Fatalf("reading the inbox: %v", err)
	}
	var out []string
	for _, m := range msgs {
		shown, content := true, []json.RawMessage(nil)
		if m.EventID != "" {
			shown, content = s.h.CoalescedContext(m.Server, m.EventID)
		}
		if !shown {
			continue
		}
		body := m.Body
		if content != nil {
			body, _ = json.Marshal(map[string]any{"payload": map[string]any{"content": content}})
		}
		out = append(out, requestText(json.RawMessage(`{"messages":[`+string(body)+`]}`)))
	}
	return out
}

// serverConfig is the configuration of server id the host runs.
func (s *scenario) serverConfig(id string) config.Server {
	for _, srv := range s.cfg.Servers {
		if srv.ID == id {
			return srv
		}
	}
	s.t.Fatalf("no server %s in the config", id)
	return config.Server{}
}

// failures counts the turns the model's failure ended, as the host's
// transcript says.
func (s *scenario) failures() int {
	n := 0
	for _, a := range s.h.Agents() {
		for _, ev := range a.Recent {
			if ev.Event == agent.EventTurnEnd && ev.Reason == "error" {
				n++
			}
		}
	}
	return n
}

func anyOf(v any) any {
	b, _ := json.Marshal(v)
	var out any
	json.Unmarshal(b, &out)
	return out
}

// requestText is every string of a request's messages, a line each.
func requestText(body json.RawMessage) string {
	var req struct {
		Messages json.RawMessage `json:"messages"`
	}
	json.Unmarshal(body, &req)
	var v any
	json.Unmarshal(req.Messages, &v)
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, k := range slices.Sorted(func(yield func(string) bool) {
				for k := range x {
					if !yield(k) {
						return
					}
				}
			}) {
				if k == "text" || k == "content" || k == "payload" {
					walk(x[k])
				}
			}
		}
	}
	walk(v)
	return strings.Join(out, "\n")
}

// lookup reads a dotted path of an observation.
func lookup(o any, path string) (any, bool) {
	cur := o
	for _, seg := range strings.Split(path, ".") {
		switch x := cur.(type) {
		case map[string]any:
			v, ok := x[seg]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			if seg == "length" {
				cur = float64(len(x))
				continue
			}
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			cur = x[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// check applies a step's expectations to its observation.
func (s *scenario) check(st corpusStep, o map[string]any) {
	t := s.t
	t.Helper()
	for _, raw := range st.Checks {
		var c map[string]any
		json.Unmarshal(raw, &c)
		if ev, ok := c["event"].(string); ok {
			s.checkEvent(st, ev, c["metadata"])
			continue
		}
		path, _ := c["path"].(string)
		if m, ok := c["model"].(string); ok && path == "" {
			// A model's own requests: the last one's text.
			path = "byModel." + m
			delete(c, "model")
		}
		if path == "" {
			t.Errorf("step %s: a check with no path this adapter reads: %s", st.ID, raw)
			continue
		}
		got, ok := lookup(o, path)
		text, _ := got.(string)
		where := fmt.Sprintf("step %s (%s) %s", st.ID, st.Op, path)
		for k, want := range c {
			switch k {
			case "path":
			case "eq":
				if !ok || !reflect.DeepEqual(got, want) {
					t.Errorf("%s = %s, want %s (observed %s)", where, show(got), show(want), show(o["reply"]))
				}
			case "oneOf":
				if !ok || !slices.ContainsFunc(want.([]any), func(w any) bool { return reflect.DeepEqual(got, w) }) {
					t.Errorf("%s = %s, want one of %s", where, show(got), show(want))
				}
			case "gte":
				if g, isNum := got.(float64); !isNum || g < want.(float64) {
					t.Errorf("%s = %s, want at least %s", where, show(got), show(want))
				}
			case "lteProfile":
				bound := corpusProfile.wakeBoundMs
				if g, isNum := got.(float64); !isNum || g < 0 || g > bound {
					t.Errorf("%s = %s, want within the profile's %s of %vms", where, show(got), want, bound)
				}
			case "sameAs":
				ref := want.(string)
				id, rest, _ := strings.Cut(ref, ".")
				prior, has := s.obs[id]
				pv, found := lookup(prior, rest)
				if !has || !found || !ok || !reflect.DeepEqual(got, pv) {
					t.Errorf("%s = %s, want the same as %s = %s", where, show(got), ref, show(pv))
				}
			case "includes":
				for _, w := range want.([]any) {
					if !strings.Contains(text, w.(string)) {
						t.Errorf("%s has no %q:\n%s", where, w, text)
					}
				}
			case "excludes":
				for _, w := range want.([]any) {
					if strings.Contains(text, w.(string)) {
						t.Errorf("%s has %q:\n%s", where, w, text)
					}
				}
			case "counts":
				for w, n := range want.(map[string]any) {
					if got := strings.Count(text, w); float64(got) != n.(float64) {
						t.Errorf("%s has %q %d times, want %v:\n%s", where, w, got, n, text)
					}
				}
			case "order":
				at := -1
				for _, w := range want.([]any) {
					i := strings.Index(text[max(at, 0):], w.(string))
					if i < 0 {
						t.Errorf("%s: %q not after the ones before it (%s):\n%s", where, w, show(want), text)
						break
					}
					at = max(at, 0) + i + len(w.(string))
				}
			case "exactlyOneOf":
				n := 0
				for _, w := range want.([]any) {
					n += strings.Count(text, w.(string))
				}
				if n != 1 {
					t.Errorf("%s shows %d of %s, want exactly one:\n%s", where, n, show(want), text)
				}
			case "recoveryContent":
				// RFC-006 vector 40: "replaced" is the new occurrence
				// alone; "appended" the old once, then the new.
				ws := want.([]any)
				oldText, newText := ws[0].(string), ws[1].(string)
				outcome := s.lastOutcome()
				switch outcome {
				case "replaced":
					if strings.Contains(text, oldText) || strings.Count(text, newText) != 1 {
						t.Errorf("%s after %q: want %q alone:\n%s", where, outcome, newText, text)
					}
				case "appended":
					i, j := strings.Index(text, oldText), strings.Index(text, newText)
					if strings.Count(text, oldText) != 1 || strings.Count(text, newText) != 1 || i < 0 || j < i {
						t.Errorf("%s after %q: want %q once, then %q once:\n%s", where, outcome, oldText, newText, text)
					}
				default:
					t.Errorf("%s: no replaced or appended outcome before it (%q)", where, outcome)
				}
			case "everyIncludes":
				reqs, _ := got.([]any)
				if len(reqs) == 0 {
					t.Errorf("%s: no requests", where)
				}
				for i, r := range reqs {
					if !strings.Contains(r.(string), want.(string)) {
						t.Errorf("%s: request %d has no %q", where, i, want)
					}
				}
			default:
				t.Errorf("%s: expectation %q is not read by this adapter", where, k)
			}
		}
	}
}

// checkEvent checks what the host keeps of occurrence eventID: the
// platform message and thread (metadata's messageId and threadId) that
// every stored copy of it answers as.
func (s *scenario) checkEvent(st corpusStep, eventID string, metadata any) {
	t := s.t
	want, _ := metadata.(map[string]any)
	msgs, err := s.st.Page(context.Background(), store.InboxQuery{Server: "editor", Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range msgs {
		if _, id, _ := strings.Cut(m.EventID, "/"); id != eventID {
			continue
		}
		n++
		got := map[string]any{"messageId": m.MessageID, "threadId": m.ThreadID}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("step %s: occurrence %s has %s %v, want %v", st.ID, eventID, k, got[k], w)
			}
		}
	}
	if n == 0 {
		t.Errorf("step %s: no stored copy of occurrence %s", st.ID, eventID)
	}
}

// lastOutcome is the coalesce outcome of the latest send observed.
func (s *scenario) lastOutcome() string {
	out := ""
	for _, st := range s.v.Steps {
		o, ok := s.obs[st.ID]
		if !ok || st.Op != "send" {
			continue
		}
		if v, ok := lookup(o, "reply.result.coalesce.outcome"); ok {
			out, _ = v.(string)
		}
	}
	return out
}

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
