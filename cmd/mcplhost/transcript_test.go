package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sampleTranscript = `{"at":"2026-12-01T10:00:00Z","agent":"ada","turn":1,"event":"turn_start","wokenBy":[{"kind":"channel","server":"chat","channel":"general","messageId":"m1"}]}
{"at":"2026-12-01T10:00:00Z","agent":"ada","turn":1,"event":"shown","text":"[#general (general) on chat · from alice · addressed to you · message m1]\nhello \u001b[31mred\u001b[0m"}
{"at":"2026-12-01T10:00:00Z","agent":"ada","turn":1,"event":"typing","outcome":"start","server":"chat","channel":"general"}
{"at":"2026-12-01T10:00:01Z","agent":"ada","turn":1,"event":"model","stop":"tool_use","calls":[{"id":"c1","name":"channel_list","args":{}}],"usage":{"in":10,"out":2},"model":"m"}
{"at":"2026-12-01T10:00:01Z","agent":"ada","turn":1,"event":"tool","callId":"c1","tool":"channel_list","outcome":"ok","text":"[]"}
{"at":"2026-12-01T10:00:02Z","agent":"ada","turn":1,"event":"streamed","server":"chat","channel":"general","text":"hi alice"}
{"at":"2026-12-01T10:00:02Z","agent":"ada","turn":1,"event":"speech","server":"chat","channel":"general","outcome":"delivered","text":"hi alice"}
{"at":"2026-12-01T10:00:02Z","agent":"ada","turn":1,"event":"notice","text":"[delivered] Your reply was posted to #general (general)."}
{"at":"2026-12-01T10:00:02Z","agent":"ada","turn":1,"event":"typing","outcome":"stop","server":"chat","channel":"general"}
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
		"  ada model m: tool_use, 10 tokens in, 2 out\n",
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
		{"not a transcript", []string{"transcript", bad}, exitFail, "bad.jsonl:2: not a transcript event"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, tc.code, tc.want)
			}
		})
	}
}
