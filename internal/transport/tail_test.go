package transport

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func writeAll(t *testing.T, tl *stderrTail, chunks ...string) {
	t.Helper()
	for _, c := range chunks {
		n, err := tl.Write([]byte(c))
		if err != nil || n != len(c) {
			t.Fatalf("Write(%d bytes) = %d, %v; want %d, nil", len(c), n, err, len(c))
		}
	}
}

func numbered(from, to int, width int) []string {
	var lines []string
	for i := from; i < to; i++ {
		lines = append(lines, fmt.Sprintf("line %0*d", width, i))
	}
	return lines
}

func TestStderrTailKeepsLines(t *testing.T) {
	tl := newStderrTail(discardLogger)
	if got := tl.String(); got != "" {
		t.Errorf("empty tail = %q", got)
	}
	writeAll(t, tl, "one\n", "two\r\n", "\n", "thr", "ee\n")
	if got, want := tl.String(), "one\ntwo\n\nthree"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestStderrTailPartialLastLine(t *testing.T) {
	tl := newStderrTail(discardLogger)
	writeAll(t, tl, "a\nb")
	if got, want := tl.String(), "a\nb"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	writeAll(t, tl, "c\r")
	if got, want := tl.String(), "a\nbc"; got != want {
		t.Errorf("String() with a trailing CR = %q, want %q", got, want)
	}
	writeAll(t, tl, "\nd\n")
	if got, want := tl.String(), "a\nbc\nd"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestStderrTailLineBound(t *testing.T) {
	tl := newStderrTail(discardLogger)
	writeAll(t, tl, strings.Join(numbered(0, 200, 3), "\n")+"\n")
	got := strings.Split(tl.String(), "\n")
	if diff := cmp.Diff(numbered(200-tailLines, 200, 3), got); diff != "" {
		t.Errorf("tail (-want +got):\n%s", diff)
	}
}

func TestStderrTailLineBoundCountsPartialLine(t *testing.T) {
	tl := newStderrTail(discardLogger)
	writeAll(t, tl, strings.Join(numbered(0, 100, 3), "\n")+"\n", "partial")
	got := strings.Split(tl.String(), "\n")
	want := append(numbered(100-tailLines+1, 100, 3), "partial")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tail (-want +got):\n%s", diff)
	}
}

func TestStderrTailByteBound(t *testing.T) {
	// 60 lines of about 1 KiB: under the line bound, over the byte bound.
	pad := strings.Repeat("x", 1000)
	var all []string
	for _, l := range numbered(0, 60, 2) {
		all = append(all, l+" "+pad)
	}
	for _, partial := range []string{"", strings.Repeat("p", 3000)} {
		t.Run(fmt.Sprintf("partial of %d bytes", len(partial)), func(t *testing.T) {
			tl := newStderrTail(discardLogger)
			writeAll(t, tl, strings.Join(all, "\n")+"\n", partial)
			got := tl.String()
			if len(got) > tailBytes {
				t.Errorf("tail is %d bytes, want at most %d", len(got), tailBytes)
			}
			if len(got) < tailBytes-2*len(all[0]) {
				t.Errorf("tail is %d bytes: it dropped more than it had to", len(got))
			}
			lines := strings.Split(got, "\n")
			want := all[len(all)-len(lines):]
			if partial != "" {
				want = append(all[len(all)-len(lines)+1:], partial)
			}
			if diff := cmp.Diff(want, lines); diff != "" {
				t.Errorf("tail is not the last lines (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStderrTailLongLineCut(t *testing.T) {
	long := strings.Repeat("L", 100<<10)
	tests := []struct {
		name   string
		chunks []string
	}{
		{"one write", []string{"before\n" + long + "\nafter\n"}},
		{"long line in its own write", []string{"before\n", long, "\nafter\n"}},
		{"small writes", append(append([]string{"before\n"}, splitEvery(long, 1000)...), "\nafter\n")},
		{"odd writes", append(append([]string{"before\n"}, splitEvery(long, 4097)...), "\nafter\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := newStderrTail(discardLogger)
			writeAll(t, tl, tt.chunks...)
			got := strings.Split(tl.String(), "\n")
			// The long line is cut once; the rest of it is dropped, not kept
			// as further lines that push the earlier ones out.
			want := []string{"before", long[:tailLineMax] + "…", "after"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("tail (-want +got):\n%.300s", diff)
			}
		})
	}
}

func TestStderrTailLongUnterminatedLine(t *testing.T) {
	tl := newStderrTail(discardLogger)
	writeAll(t, tl, append([]string{"before\n"}, splitEvery(strings.Repeat("L", 50<<10), 512)...)...)
	got := tl.String()
	if want := "before\n" + strings.Repeat("L", tailLineMax) + "…"; got != want {
		t.Errorf("tail is %d bytes (%.20q...), want the cut line after \"before\"", len(got), got)
	}
}

func TestStderrTailCutKeepsUTF8Valid(t *testing.T) {
	tl := newStderrTail(discardLogger)
	// "é" is two bytes; an odd prefix puts a rune across the cut.
	writeAll(t, tl, "x"+strings.Repeat("é", tailLineMax)+"\n")
	got := tl.String()
	if !utf8.ValidString(got) {
		t.Errorf("cut line is not valid UTF-8: ...%q", got[len(got)-8:])
	}
	if !strings.HasSuffix(got, "…") || len(got) > tailLineMax+len("…") {
		t.Errorf("cut line is %d bytes ending %q, want at most %d ending with …", len(got), got[len(got)-8:], tailLineMax+len("…"))
	}
}

func TestStderrTailLogsEachLine(t *testing.T) {
	rec := &logRecorder{}
	tl := newStderrTail(slog.New(rec))
	writeAll(t, tl, "first\nsec", "ond\n", "unfinished")
	var got []string
	for _, attrs := range rec.All("server stderr") {
		got = append(got, attrs["line"].String())
	}
	if diff := cmp.Diff([]string{"first", "second"}, got); diff != "" {
		t.Errorf("logged lines (-want +got):\n%s", diff)
	}
	if lvl, _, _ := rec.Find("server stderr"); lvl != slog.LevelDebug {
		t.Errorf("stderr lines logged at %v, want debug", lvl)
	}
}

func TestStderrTailConcurrentUse(t *testing.T) {
	tl := newStderrTail(discardLogger)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				fmt.Fprintf(tl, "g%d line %d\n", g, i)
				_ = tl.String()
			}
		})
	}
	wg.Wait()
	if n := len(strings.Split(tl.String(), "\n")); n != tailLines {
		t.Errorf("tail has %d lines after 800 writes, want %d", n, tailLines)
	}
}

func splitEvery(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}
