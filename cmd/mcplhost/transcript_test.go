package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/agent"
	"github.com/mcpl-go/mcpl/internal/treat"
)

const sampleTranscript = `{"at":"2026-12-01T10:00:00Z","agent":"ada","turn":1,"event":"turn_start","wokenBy":[{"kind":"channel","server":"chat","channel":"general","messageId":"m1"}]}
{"at":"2026-12-01T10:00:00Z","agent":"ada","turn":1,"event":"shown","text":"[#general (general) on chat · from alice · addressed to you · message m1]\nhello \u001b[31mred\u001b[0m"}
{"at":"2026-12-01T10:00:00Z","agent":"ada","turn":1,"event":"typing","outcome":"start","server":"chat","channel":"general"}
{"at":"2026-12-01T10:00:01Z","agent":"ada","turn":1,"event":"model_retry","provider":"openai","attempt":{"n":1,"ms":1500,"waitMs":2000},"text":"the model server at 127.0.0.1:9 answered HTTP 429"}
{"at":"2026-12-01T10:00:01Z","agent":"ada","turn":1,"event":"model","stop":"tool_use","calls":[{"id":"c1","name":"channel_list","args":{}}],"usage":{"in":10,"out":2},"model":"m"}
{"at":"2026-12-01T10:00:01Z","agent":"ada","turn":1,"event":"tool","callId":"c1","tool":"channel_list","outcome":"ok","text":"[]"}
{"at":"2026-12-01T10:00:02Z","agent":"ada","turn":1,"event":"streamed","server":"chat","channel":"general","text":"hi alice"}
{"at":"2026-12-01T10:00:02Z","agent":"ada","turn":1,"event":"speech","server":"chat","channel":"general","outcome":"delivered","text":"hi alice"}
{"at":"2026-12-01T10:00:02Z","agent":"ada","turn":1,"event":"notice","text":"[delivered] Your reply was posted to #general (general)."}
{"at":"2026-12-01T10:00:02Z","agent":"ada","turn":1,"event":"typing","outcome":"stop","server":"chat","channel":"general"}
{"at":"2026-12-01T10:00:02Z","agent":"ada","turn":1,"event":"model_failed","provider":"openai","attempt":{"n":2,"ms":250},"reason":"not-retryable","text":"HTTP 401"}
{"at":"2026-12-01T10:00:02Z","agent":"ada","turn":1,"event":"turn_end","reason":"end_turn"}
{"at":"2026-12-01T10:00:03Z","agent":"bob","turn":1,"event":"turn_start","wokenBy":[{"kind":"push","server":"ci","messageId":"e1"}]}
`

func TestTranscript(t *testing.T) {
	t.Setenv("TZ", "UTC")
	path := filepath.Join(t.TempDir(), "t.jsonl")
	if err := os.WriteFile(path, []byte(sampleTranscript), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("transcript", "--agent", "ada", path)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// What the model was shown is escaped: the server's escape sequence
	// reaches no terminal.
	if strings.Contains(out, "\x1b") || !strings.Contains(out, `hello \x1b[31mred\x1b[0m`) {
		t.Errorf("the shown text was not escaped:\n%q", out)
	}
	for _, want := range []string{
		" ada turn 1, woken by m1 in general on chat\n",
		"    | [#general (general) on chat · from alice · addressed to you · message m1]\n",
		"  ada typing start in general\n",
		"  ada model call attempt 1 failed after 1.5 s, made again in 2.0 s: the model server at 127.0.0.1:9 answered HTTP 429\n",
		"  ada model m: tool_use, 10 tokens in, 2 out\n",
		"  ada model call attempt 2 failed after 0.2 s, not made again (not-retryable): HTTP 401\n",
		"  ada calls channel_list {}\n",
		"  ada channel_list: ok: []\n",
		"  ada streamed to general: hi alice\n",
		"  ada says in general (delivered): hi alice\n",
		"  ada is told: [delivered] Your reply was posted to #general (general).\n",
		"  ada typing stop in general\n",
		" ada turn 1 ended: end_turn\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "bob") {
		t.Errorf("--agent ada printed bob's events:\n%s", out)
	}
	// Colour when asked: the program's styles, and still no escape from
	// the text.
	_, colored, _ := runCLI("transcript", "--color", "always", path)
	if !strings.Contains(colored, "\x1b[32m  ada says in general (delivered): hi alice\x1b[0m") || strings.Contains(colored, "\x1b[31mred") {
		t.Errorf("coloured output:\n%q", colored)
	}
	if !strings.Contains(colored, "bob turn 1, woken by event e1 from ci") {
		t.Errorf("bob's push turn is missing:\n%s", colored)
	}
}

func TestTranscriptErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(strings.SplitN(sampleTranscript, "\n", 2)[0]+"\nnot json\n"), 0o600)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no file", []string{"transcript"}, exitUsage, "mcplhost transcript: give the transcript FILE (- for standard input)"},
		{"two files", []string{"transcript", "a", "b"}, exitUsage, `unexpected argument "b"`},
		{"bad colour", []string{"transcript", "--color", "pink", "a"}, exitUsage, `--color "pink" is not auto, always or never`},
		{"missing file", []string{"transcript", filepath.Join(dir, "none")}, exitFail, "no such file"},
		{"not a transcript", []string{"transcript", bad}, exitFail, "bad.jsonl:2: not a transcript event (not JSON, or JSON that is no event); 1 line skipped, every other event printed; exit status 1: the file is damaged or is not a transcript\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, tc.code, tc.want)
			}
		})
	}
}

// A transcript a crash tore, then a later run appended to: the line cut
// short in the middle is skipped, the runs after it are printed, and the
// end says how many lines were skipped and where the first was; a cut
// line is what a crash leaves, so the exit status stays 0. A line that is
// not cut short but damaged is skipped too, the rest still printed, and
// makes the exit status 1. A zero width space a server slipped into a
// text is shown escaped.
func TestTranscriptSkipsTornLines(t *testing.T) {
	t.Setenv("TZ", "UTC")
	lines := strings.Split(strings.TrimSuffix(sampleTranscript, "\n"), "\n")
	first, last := lines[0], lines[len(lines)-1] // ada's turn start, bob's
	cut := lines[6][:len(lines[6])/2]            // ada's speech, cut in the middle of a write
	later := strings.ReplaceAll(last, "10:00:03", "11:00:00")
	zw := `{"at":"2026-12-01T11:00:01Z","agent":"bob","turn":1,"event":"notice","text":"pay\u200bpal"}`
	dir := t.TempDir()
	write := func(name string, ls ...string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(ls, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name   string
		lines  []string
		code   int
		stderr string
	}{
		{"cut in the middle", []string{first, cut, later, zw}, exitOK,
			"torn.jsonl:2: a line cut short, as a crash or kill in the middle of a write leaves one; 1 line skipped, every other event printed\n"},
		{"cut at the end", []string{first, later, zw, cut}, exitOK,
			"torn.jsonl:4: a line cut short, as a crash or kill in the middle of a write leaves one; 1 line skipped, every other event printed\n"},
		{"damaged", []string{first, cut, "garbage\x00\u202e", later, "[1,2]", zw, `{"no":"event"}`}, exitFail,
			"torn.jsonl:3: not a transcript event (not JSON, or JSON that is no event); 4 lines (1 cut short) skipped, the first skipped at line 2, every other event printed; exit status 1: the file is damaged or is not a transcript\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := write("torn.jsonl", tc.lines...)
			code, out, errOut := runCLI("transcript", "--color", "never", path)
			if code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
			if want := "mcplhost transcript: " + strings.Replace(tc.stderr, "torn.jsonl", path, 1); errOut != want {
				t.Errorf("stderr %q, want %q", errOut, want)
			}
			for _, want := range []string{
				"10:00:00 ada turn 1, woken by m1 in general on chat\n",
				"11:00:00 bob turn 1, woken by event e1 from ci\n",
				"  bob is told: pay\\u200bpal\n",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("stdout lacks %q:\n%s", want, out)
				}
			}
			if strings.ContainsAny(out, "\u200b\u202e\x00") || strings.Contains(out, "hi alice") {
				t.Errorf("stdout carries a raw invisible character or the cut line:\n%q", out)
			}
		})
	}
}

// mcplhost run appending to a transcript whose last write was cut short
// starts on a line of its own, so the cut line does not swallow the new
// run's first event.
func TestRunTranscriptStartsOwnLine(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "t.jsonl")
	lines := strings.Split(sampleTranscript, "\n")
	if err := os.WriteFile(tr, []byte(lines[0]+"\n"+lines[1][:40]), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "host.yaml")
	if err := os.WriteFile(cfg, []byte("store: ./host.db\nservers: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // stop as soon as it has started
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"run", "--config", cfg, "--transcript", tr}, &stdout, &stderr); code != exitOK {
		t.Fatalf("mcplhost run: exit %d\n%s", code, stderr.String())
	}
	b, err := os.ReadFile(tr)
	if err != nil {
		t.Fatal(err)
	}
	if want := lines[0] + "\n" + lines[1][:40] + "\n"; string(b) != want {
		t.Fatalf("the transcript after the run is %q, want %q", b, want)
	}
	// What the next run appends is read whole.
	f, err := os.OpenFile(tr, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(lines[len(lines)-2] + "\n")
	f.Close()
	code, out, errOut := runCLI("transcript", "--color", "never", tr)
	if code != exitOK || !strings.Contains(out, "bob turn 1") || !strings.Contains(errOut, ":2: a line cut short") {
		t.Errorf("transcript: exit %d\n%s%s", code, out, errOut)
	}
	// Run again: a file that ends in a newline is left as it is.
	if code := run(ctx, []string{"run", "--config", cfg, "--transcript", tr}, &stdout, &stderr); code != exitOK {
		t.Fatalf("mcplhost run: exit %d\n%s", code, stderr.String())
	}
	if b2, _ := os.ReadFile(tr); len(b2) != len(b)+len(lines[len(lines)-2])+1 {
		t.Errorf("a second run changed the transcript: %q", b2)
	}
}

// A turn's line says what it carried, and a read's line what it batched
// and ignored; a read that only woke the agent says nothing more.
func TestTranscriptWakeLines(t *testing.T) {
	var out strings.Builder
	tp := transcriptPrinter{p: printer{&out}}
	at := time.Date(2026, 12, 2, 6, 0, 0, 0, time.Local)
	tp.event(agent.Event{At: at, Agent: "ada", Turn: 3, Event: agent.EventTurnStart, WokenBy: []agent.Wake{{Kind: "channel", Server: "chat", Channel: "a", MessageID: "q"}}, Carried: &agent.Carried{Held: 2, Batched: 40}})
	tp.event(agent.Event{At: at, Agent: "ada", Turn: 3, Event: agent.EventTreated, Treated: []agent.Treated{{Server: "chat", Treat: treat.Wake, N: 1}}})
	tp.event(agent.Event{At: at, Agent: "ada", Turn: 3, Event: agent.EventTreated, Treated: []agent.Treated{{Server: "chat", Treat: treat.Batch, N: 40}, {Server: "ads", Treat: treat.Ignore, N: 2}}})
	want := "06:00:00 ada turn 3, woken by q in a on chat; carried 2 held, 40 batched\n" +
		"  ada read 40 batched on chat, 2 ignored on ads\n"
	if out.String() != want {
		t.Errorf("printed:\n%s\nwant:\n%s", out.String(), want)
	}
}
