package status_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/host"
	"github.com/mcpl-go/mcpl/internal/channels"
	"github.com/mcpl-go/mcpl/internal/chanserver"
	"github.com/mcpl-go/mcpl/internal/term"
	"github.com/mcpl-go/mcpl/protocol"
)

// startServer starts a host on one server, id, run as argv (a real
// subprocess), with no agent, and its status server.
func startServer(t *testing.T, id string, argv ...string) *running {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = fmt.Sprintf("%q", a) // YAML's double-quoted scalars take Go's escapes
	}
	return startConfig(t, fmt.Sprintf("servers:\n  - id: %s\n    command: [%s]\n", id, strings.Join(q, ", ")))
}

// startConfig starts a host on the configuration text (its servers real
// subprocesses), with no agent, and its status server.
func startConfig(t *testing.T, text string) *running {
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	h, err := host.New(host.Options{Logger: quiet, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	if err := h.Start(cfg); err != nil {
		t.Fatal(err)
	}
	return &running{h: h, srv: serve(t, h, reg)}
}

// pageText is the text of the element sel selects on bctx's page.
func pageText(t *testing.T, bctx context.Context, sel string) string {
	t.Helper()
	v, err := chromedp.Run(bctx, chromedp.Text(sel))
	if err != nil {
		t.Fatalf("reading %s: %v", sel, err)
	}
	return v
}

// chromium starts headless Chromium for one test, bounded by within.
func chromium(t *testing.T, within time.Duration) context.Context {
	path := chromiumPath(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.WindowSize(1280, 1000),
	)
	ctx, cancel := context.WithTimeout(context.Background(), within)
	t.Cleanup(cancel)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	return bctx
}

// What a server writes can't disguise itself on the page: a channel label
// with U+202E (RIGHT-TO-LEFT OVERRIDE) shows the override as \u202e and
// leaves the id beside it in order, a Hebrew label can't pull the id into
// its right-to-left run either, and every control, format character and
// separator shows escaped exactly as the terminal printer shows it
// (term.Line), an emoji's ZWJ left whole.
func TestPageEscapesServerStrings(t *testing.T) {
	bctx := chromium(t, 90*time.Second)
	chans := []protocol.ChannelDescriptor{
		{ID: "chan-42", Label: "\u202eevil", Type: "t\u200bype", Direction: "bidirectional"},
		{ID: "43", Label: "עברית", Type: "bidi", Direction: "bidirectional"},
	}
	// Every control, format character and separator, over as many
	// channels as it takes: a label is at most channels.MaxLabelBytes.
	var every strings.Builder
	flush := func() {
		chans = append(chans, protocol.ChannelDescriptor{ID: fmt.Sprintf("chan-44-%d", len(chans)), Label: every.String(), Type: "bidi", Direction: "bidirectional"})
		every.Reset()
	}
	every.WriteString("all:")
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
			if every.Len()+utf8.RuneLen(r) > channels.MaxLabelBytes {
				flush()
			}
			every.WriteRune(r)
		}
	}
	flush()
	every.WriteString(" 👩‍👩‍👧 👩🏽‍💻 ❤️‍🔥 a\u200db 🏴\U000e0067\U000e007f end")
	flush()
	r := startServer(t, "bidi", chanserver.Binary(t), "-channels", mustJSON(t, chans))

	row := func(id string) string { return `tr[data-channel="bidi/` + id + `"]` }
	if err := chromedp.Do(bctx, chromedp.Navigate(r.srv.URL()), chromedp.WaitVisible(row(chans[len(chans)-1].ID))); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	textOf := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector(`+strconv.Quote(sel)+`).textContent`))
		if err != nil {
			t.Fatalf("reading %s: %v", sel, err)
		}
		return s
	}
	for _, c := range chans {
		want := term.Line(c.Label) + " (" + c.ID + ")"
		if got := textOf(row(c.ID) + " td.name"); got != want {
			t.Errorf("channel %s shows %q, want %q", c.ID, got, want)
		}
		for _, r := range textOf(row(c.ID)) {
			if unicode.Is(unicode.Bidi_Control, r) || r == '\u200b' {
				t.Errorf("channel %s's row carries %U raw", c.ID, r)
			}
		}
	}
	if got, want := textOf(row("chan-42")+" td.live"), ` · t\u200bype`; !strings.HasSuffix(got, want) {
		t.Errorf("chan-42's type shows as %q, want it to end in %q", got, want)
	}
	// Where the browser draws them: each character of the id left of the
	// next, and every character of the label left of the id.
	xs := func(sel, needle string) []float64 {
		t.Helper()
		js := `(() => {
  const td = document.querySelector(` + strconv.Quote(sel) + `), needle = ` + strconv.Quote(needle) + `;
  const walk = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    const at = n.data.indexOf(needle);
    if (at < 0) continue;
    const xs = [];
    for (let i = at; i < at + needle.length; i++) {
      const r = document.createRange();
      r.setStart(n, i); r.setEnd(n, i + 1);
      xs.push(r.getBoundingClientRect().left);
    }
    return xs;
  }
  return [];
})()`
		x, err := chromedp.Run(bctx, chromedp.Evaluate[[]float64](js))
		if err != nil {
			t.Fatal(err)
		}
		if len(x) != len([]rune(needle)) {
			t.Fatalf("%s: %q is not drawn whole in one text node (x %v)", sel, needle, x)
		}
		return x
	}
	for _, c := range []struct{ id, label string }{{"chan-42", "evil"}, {"43", "עברית"}} {
		id, label := xs(row(c.id)+" td.name", c.id), xs(row(c.id)+" td.name", c.label)
		for i := 1; i < len(id); i++ {
			if !(id[i-1] < id[i]) {
				t.Errorf("channel %s: its id is not drawn in order (x %v)", c.id, id)
				break
			}
		}
		if slices.Max(label) >= id[0] {
			t.Errorf("channel %s: its label (x %v) is drawn into or right of its id (x %v)", c.id, label, id)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
