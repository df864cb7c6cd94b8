package host_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mcpl-go/mcpl/internal/testserver"
)

// A 2026-07-28 server through the Host: its tools are listed and called
// statelessly, a structured result that breaks its outputSchema is an
// error the agent reads plainly, a good one is shown, an input_required
// leg is sent again, and a change announced on subscriptions/listen
// re-lists.
func TestModernServerThroughHost(t *testing.T) {
	h, rec := newHost(t)
	if err := h.Connect(t.Context(), server(t, "id: m\ncommand: "+ts(t, "-modern", "only"))); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(toolNames(h)), fmt.Sprint(prefixed("m", testserver.ModernTools...)); got != want {
		t.Errorf("Tools = %v, want %v", got, want)
	}
	st, ok := h.Server("m")
	if !ok || st.ProtocolVersion != "2026-07-28" || !st.Stateless || st.Advertisement != nil {
		t.Errorf("state: protocol %q stateless %v advertisement %v", st.ProtocolVersion, st.Stateless, st.Advertisement)
	}
	wantOK(t, h, "m--plain", `{}`, "plain")
	wantRefused(t, h, "m--op", `{}`, `The "m" server answered m--op, but its structured result does not match the output schema the tool declares, so this host did not use it. The call ran and may have taken effect: check before calling it again.`)
	line := rec.One(t, "a tool's structured result breaks the outputSchema it declares; the agent is told, and the result is not used")
	if !strings.Contains(line.Attr("problem"), "integer") {
		t.Errorf("the log does not say what broke the schema: %v", line.Attrs)
	}
	wantOK(t, h, "m--good", `{}`, `{"value":42}`)
	wantOK(t, h, "m--cont", `{}`, "leg 2 done (state-for-leg2)")
	wantOK(t, h, "m--touch", `{}`, "touched")
	waitLog(t, rec, logListed, "m", 2)
	if got := toolNames(h); len(got) != len(testserver.ModernTools)+1 || got[len(got)-1] != "m--extra" {
		t.Errorf("Tools after the change = %v, want extra added", got)
	}
	wantOK(t, h, "m--extra", `{}`, "extra")
}

// MCP's embedded resources and resource links, as the host shows a tool's
// result: the embedded text after a line naming it, the blob as a marker
// without its data, the link described and not fetched.
func TestResourceBlocksThroughHost(t *testing.T) {
	h, _ := newHost(t)
	if err := h.Connect(t.Context(), server(t, "id: m\ncommand: "+ts(t, "-modern", "only"))); err != nil {
		t.Fatal(err)
	}
	res, err := h.CallTool(t.Context(), "m--resources", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := h.ResultText("m--resources", res)
	for _, want := range []string{
		`[Resource "file:///notes.txt" (text/plain), embedded by the server; its text follows:]`,
		"the notes",
		`[Resource not shown: the server embedded "file:///logo.png" (image/png) as binary data, which this host doesn't show.]`,
		`[Resource link, not fetched by this host: report "https://example.com/report" (application/pdf)]`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the result reads\n%s\nwithout %q", got, want)
		}
	}
	if strings.Contains(got, "SECRETBASE64") {
		t.Errorf("the blob's data reached the text: %s", got)
	}
}
