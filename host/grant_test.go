package host_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/host"
	"github.com/mcpl-go/mcpl/protocol"
)

// adEverything advertises every privileged surface and a feature set for
// each kind, so the host has everything to grant if it would.
const adEverything = `{"version":"0.5","pushEvents":true,"channels":true,"inferenceRequest":true,"modelInfo":true,` +
	`"inferenceLifecycle":true,"contextHooks":{"beforeInference":true},` +
	`"featureSets":{"chat":{"description":"chat","uses":["pushEvents","channels.register","channels.incoming"]},` +
	`"tools.only":{"description":"tools","uses":["tools"]}}}`

// privilegedMethods are every privileged method a server sends the host,
// with the capability each needs, and whether this host serves it.
var privilegedMethods = []struct {
	method, capability string
	served             bool
}{
	{protocol.MethodPushEvent, "pushEvents", false},
	{protocol.MethodChannelsRegister, "channels.register", true},
	{protocol.MethodChannelsChanged, "channels.register", true},
	{protocol.MethodChannelsList, "channels.register", true},
	{protocol.MethodChannelsIncoming, "channels.incoming", true},
	{protocol.MethodInferenceRequest, "inferenceRequest", false},
	{protocol.MethodModelInfo, "modelInfo", false},
}

// served is what this host grants a server that advertises everything:
// tools, and the channel paths its channel layer consumes.
var served = []string{"channels.acknowledge", "channels.incoming", "channels.lifecycle", "channels.publish", "channels.register", "channels.streaming", "channels.typing", "tools"}

// serverReport is what the test server's policy tool reports.
type serverReport struct {
	Initialize protocol.InitializeParams `json:"initialize"`
	Policies   []struct {
		AsRequest bool                             `json:"asRequest"`
		Params    protocol.FeatureSetsUpdateParams `json:"params"`
	} `json:"policies"`
	Early []struct {
		Result json.RawMessage `json:"result"`
		Error  *protocol.Error `json:"error"`
	} `json:"early"`
}

// TestGrantOnlyWhatIsServed: the host grants only what it serves: tools
// and the channel paths the channel layer consumes, until the agent layer
// wires the rest. Through host.Host and the real test server advertising
// everything: what the host advertises, the policy it sends, and the
// answer to every privileged method (sent before the policy and after it,
// as a request and as a notification): a served one is answered; each
// other request is refused with -32002 saying this host does not
// implement it, at once, never held and never answered as if it were
// honoured.
func TestGrantOnlyWhatIsServed(t *testing.T) {
	h, rec := newHost(t)
	flags := []string{"-mcpl", adEverything}
	for _, m := range privilegedMethods {
		flags = append(flags, "-early", m.method)
	}
	if err := h.Connect(t.Context(), server(t, "id: chat\ncommand: "+ts(t, flags...))); err != nil {
		t.Fatal(err)
	}
	st, _ := h.Server("chat")
	if st.Policy != grant.OutcomeAccepted || !slices.Equal(st.Grant.Effective, served) {
		t.Fatalf("policy %s, grant %v; want accepted, %v", st.Policy, st.Grant.Effective, served)
	}
	notImpl := st.Grant.DeniedFor(grant.DenialNotImplemented)
	if len(notImpl) != len(st.Advertisement.Capabilities)-len(served) || len(st.Grant.DeniedPaths()) != len(notImpl) {
		t.Errorf("denied %v, want every advertised path but those served, as not implemented", st.Grant.Denied)
	}
	if fs, _ := st.Grant.FeatureSet("chat"); fs.State != grant.StateDisabled || fs.Reason != grant.ReasonCapabilityDenied {
		t.Errorf("chat feature set %+v, want disabled for its denied capabilities", fs)
	}
	if fs, _ := st.Grant.FeatureSet("tools.only"); fs.State != grant.StateEnabled {
		t.Errorf("tools.only feature set %+v, want enabled", fs)
	}

	out, err := call(t, h, "chat--policy", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	var rep serverReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := `{"version":"0.5","channels":{"register":true,"lifecycle":true,"publish":true,"incoming":true,"streaming":true,"acknowledge":true,"typing":true},"featureSets":true}`
	if got := string(rep.Initialize.Capabilities.Experimental["mcpl"]); got != want {
		t.Errorf("the host advertised %s, want %s", got, want)
	}
	if len(rep.Policies) != 1 || !rep.Policies[0].AsRequest ||
		!slices.Equal(rep.Policies[0].Params.EffectiveCapabilities, served) ||
		!slices.Equal(rep.Policies[0].Params.DeniedCapabilities, notImpl) ||
		!slices.Equal(rep.Policies[0].Params.Enabled, []string{"tools.only"}) {
		t.Errorf("the server received the policy %+v", rep.Policies)
	}
	// Sent before the policy: refused, not held (the server's early
	// answers are in), each naming its capability.
	if len(rep.Early) != len(privilegedMethods) {
		t.Fatalf("%d early answers, want %d", len(rep.Early), len(privilegedMethods))
	}
	refused := 0
	for _, e := range rep.Early {
		if e.Error != nil {
			refused++
			if e.Error.Code != protocol.CodeCapabilityDenied || !strings.Contains(e.Error.Message, "is not implemented by this host") {
				t.Errorf("an early privileged request was answered %+v, want -32002, not implemented", e.Error)
			}
		}
	}
	if refused != 3 {
		t.Errorf("%d early requests refused, want the 3 this host does not serve: %+v", refused, rep.Early)
	}
	// Sent after it: the same, as requests; notifications are dropped.
	notServed := 0
	for _, m := range privilegedMethods {
		if m.served {
			out, err := call(t, h, "chat--send", fmt.Sprintf(`{"method":%q,"params":{"channels":[]}}`, m.method))
			if err != nil || !strings.HasPrefix(out, `{"result":`) {
				t.Errorf("%s answered %s %v, want a result", m.method, out, err)
			}
			continue
		}
		notServed++
		out, err := call(t, h, "chat--send", fmt.Sprintf(`{"method":%q,"params":{"channels":[]}}`, m.method))
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Result json.RawMessage `json:"result"`
			Error  *protocol.Error `json:"error"`
		}
		json.Unmarshal([]byte(out), &got)
		want := fmt.Sprintf(`%s rejected: capability %q is not implemented by this host`, m.method, m.capability)
		if got.Error == nil || got.Error.Code != protocol.CodeCapabilityDenied || got.Error.Message != want ||
			string(got.Error.Data) != fmt.Sprintf(`{"capability":%q}`, m.capability) {
			t.Errorf("%s answered %s, want -32002 %q", m.method, out, want)
		}
		if _, err := call(t, h, "chat--send", fmt.Sprintf(`{"method":%q,"params":{},"notify":true}`, m.method)); err != nil {
			t.Fatal(err)
		}
	}
	// Every refused method is logged, notifications as discarded: once
	// per method, each again only counted (lograte), so a flood of them
	// makes no more lines.
	waitLog(t, rec, "privileged notification discarded", "chat", notServed)
	if n := logCount(rec, "privileged request refused", "chat"); n != notServed {
		t.Errorf("%d refusals logged, want %d", n, notServed)
	}
}

// TestToolsDeniedByPolicy: host policy that denies the "tools" path lists
// none of the server's tools and refuses calls to them, for an MCPL server
// and a plain one alike: the grant and the behaviour agree.
func TestToolsDeniedByPolicy(t *testing.T) {
	h, rec := newHost(t)
	if err := h.Connect(t.Context(), server(t, "id: m\ncommand: "+ts(t, "-mcpl", adMCPL)+"\ncapabilities: {disable: [tools]}")); err != nil {
		t.Fatal(err)
	}
	if err := h.Connect(t.Context(), server(t, "id: p\ncommand: "+ts(t)+"\ncapabilities: {enable: [pushEvents]}")); err != nil {
		t.Fatal(err)
	}
	if got := toolNames(h); len(got) != 0 {
		t.Errorf("Tools = %v, want none: policy denies tools", got)
	}
	for _, id := range []string{"m", "p"} {
		te := wantRefused(t, h, id+"--echo", `{"text":"hi"}`, textDenied(id, id+"--echo"))
		if te.Outcome != host.OutcomeRefused || te.Server != id {
			t.Errorf("%s: %+v, want refused", id, te)
		}
	}
	if st, _ := h.Server("m"); st.Grant.Has("tools") {
		t.Errorf("grant %v holds tools", st.Grant.Effective)
	}
	// A pattern that can do nothing here is said in the log.
	if err := h.Connect(t.Context(), server(t, "id: n\ncommand: "+ts(t)+"\ncapabilities: {enable: [tools, modelInfo, chanels.*]}")); err != nil {
		t.Fatal(err)
	}
	var problems []string
	for _, r := range rec.Find("a capability pattern in host policy does nothing here") {
		if r.Attr("server") == "n" {
			problems = append(problems, r.Attr("pattern")+"="+r.Attr("problem"))
		}
	}
	if want := []string{"modelInfo=not_implemented", "chanels.*=unknown"}; !slices.Equal(problems, want) {
		t.Errorf("pattern notes %v, want %v", problems, want)
	}
	wantOK(t, h, "n--echo", `{"text":"hi"}`, "hi")
}

// TestToolErrorOutcomes: each way a call fails carries its outcome, and
// the errors a program checks with errors.Is and errors.As.
func TestToolErrorOutcomes(t *testing.T) {
	h, rec := newHost(t)
	if err := h.Connect(t.Context(), server(t, "id: x\ncommand: "+ts(t))); err != nil {
		t.Fatal(err)
	}
	_, err := h.CallTool(t.Context(), "x--fail", json.RawMessage(`{"message":"archived","code":-32042}`))
	var te *host.ToolError
	var pe *protocol.Error
	if !errors.As(err, &te) || te.Outcome != host.OutcomeErrorAnswer || !errors.As(err, &pe) || pe.Code != -32042 || pe.Message != "archived" {
		t.Errorf("error answer: %+v", err)
	}
	_, err = h.CallTool(t.Context(), "x--tool_error", json.RawMessage(`{"text":"no"}`))
	if !errors.As(err, &te) || te.Outcome != host.OutcomeToolError || te.Result == nil || te.Err != nil {
		t.Errorf("error result: %+v", err)
	}
	_, err = h.CallTool(t.Context(), "x--echo", json.RawMessage(`{bad`))
	if !errors.As(err, &te) || te.Outcome != host.OutcomeRefused ||
		te.Text != `The arguments for x--echo aren't valid JSON, so the call didn't run. Call it again with its arguments as a JSON object.` {
		t.Errorf("arguments that are not JSON: %+v", err)
	}
	for args, kind := range map[string]string{`[1,2]`: "an array", `"hi"`: "a string", `42`: "a number", `true`: "true or false"} {
		_, err = h.CallTool(t.Context(), "x--echo", json.RawMessage(args))
		want := `The arguments for x--echo are ` + kind + `, not a JSON object, so the call didn't run. Call it again with its arguments as a JSON object.`
		if !errors.As(err, &te) || te.Outcome != host.OutcomeRefused || te.Text != want {
			t.Errorf("arguments %s: %+v", args, err)
		}
	}
	if res, err := h.CallTool(t.Context(), "x--count", json.RawMessage(`null`)); err != nil || res.Text() == "" {
		t.Errorf("null arguments (no arguments): %q, %v", res.Text(), err)
	}
	_, err = h.CallTool(t.Context(), "x--exit", json.RawMessage(`{"code":1}`))
	if !errors.As(err, &te) || te.Outcome != host.OutcomeNoAnswer || !errors.Is(err, host.ErrConnectionClosed) {
		t.Errorf("a call the server died in: %+v", err)
	}
	waitLog(t, rec, "server left the registry: its connection ended and it will not reconnect", "x", 1)
	_, err = h.CallTool(t.Context(), "x--echo", json.RawMessage(`{}`))
	if !errors.As(err, &te) || te.Outcome != host.OutcomeRefused || !errors.Is(err, host.ErrNotConnected) {
		t.Errorf("a call to a server gone: %+v", err)
	}
	_, err = h.CallTool(t.Context(), "nobody--echo", nil)
	if !errors.As(err, &te) || te.Outcome != host.OutcomeRefused || te.Err != nil || te.Server != "" {
		t.Errorf("no such tool: %+v", err)
	}
	h.Close()
	_, err = h.CallTool(t.Context(), "x--echo", nil)
	if !errors.Is(err, host.ErrHostClosed) {
		t.Errorf("after Close: %v", err)
	}
	if err := h.Connect(t.Context(), server(t, "id: y\ncommand: "+ts(t))); !errors.Is(err, host.ErrHostClosed) {
		t.Errorf("Connect after Close = %v", err)
	}
}
