package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseScript(t *testing.T) {
	posts, err := ParseScript(strings.NewReader(`
# a comment
+2s #general alice: hello everyone
   +1m30s   #dev   bob @agent:   can you review PR 12?  

+0s #random carol.b: a: colon inside
+agent #dev/pr-12 frank @agent: is the backoff capped?
+1s @dm bob: just between us
`), Channels)
	if err != nil {
		t.Fatal(err)
	}
	want := []Post{
		{Delay: 2 * time.Second, Channel: "#general", Author: "alice", Text: "hello everyone", Line: 3},
		{Delay: 90 * time.Second, Channel: "#dev", Author: "bob", Mention: true, Text: "can you review PR 12?", Line: 4},
		{Delay: 0, Channel: "#random", Author: "carol.b", Text: "a: colon inside", Line: 6},
		{AfterAgent: true, Channel: "#dev", Thread: "pr-12", Author: "frank", Mention: true, Text: "is the backoff capped?", Line: 7},
		{Delay: time.Second, Channel: "@bob", DM: true, Author: "bob", Mention: true, Text: "just between us", Line: 8},
	}
	if diff := cmp.Diff(want, posts); diff != "" {
		t.Errorf("posts (-want +got):\n%s", diff)
	}
}

// TestParseScriptSmallDelays: the delays tests use (none, or a few
// milliseconds) parse as written.
func TestParseScriptSmallDelays(t *testing.T) {
	posts, err := ParseScript(strings.NewReader("+0s #general a: one\n+10ms #dev b @agent: two\n+0.25s #random c: three\n+1us #general d: four\n+0 #general e: five\n"), Channels)
	if err != nil {
		t.Fatal(err)
	}
	var got []time.Duration
	for _, p := range posts {
		got = append(got, p.Delay)
	}
	want := []time.Duration{0, 10 * time.Millisecond, 250 * time.Millisecond, time.Microsecond, 0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("delays (-want +got):\n%s", diff)
	}
}

func TestParseScriptErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"+2s #general alice hello", `line 1: "+2s #general alice hello" is not`},
		{"2s #general alice: hello", "line 1: "},
		{"# only a comment\n+soon #general alice: hi", `line 2: delay "soon" is not a duration`},
		{"+-1s #general alice: hi", `delay "-1s"`},
		{"+1s #ops alice: hi", "line 1: there is no channel #ops; the channels are #general, #random, #dev"},
		{"+1s #general alice:   ", "line 1: the message is empty"},
		{"+1s #general alice @bob: hi", "is not"},
		{"+1s #general/t1 alice: hi", "line 1: #general has no threads; threads are in #dev"},
		{"+1s #dev/ alice: hi", "is not"},
		{"+1s @dm bob @agent: hi", "line 1: a direct message addresses the agent already: drop the @agent"},
		{"+1s @dm: hi", "is not"},
		{"+1s @bob alice: hi", "is not"},
		{"# nothing\n\n", "the script has no posts"},
	} {
		_, err := ParseScript(strings.NewReader(tc.in), Channels)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseScript(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}

func TestDefaultScript(t *testing.T) {
	posts, err := ParseScript(bytes.NewReader(defaultScript), Channels)
	if err != nil {
		t.Fatal(err)
	}
	mentions, threaded, dms, byChannel := 0, 0, 0, map[string]int{}
	for _, p := range posts {
		switch {
		case p.DM:
			dms++
		case p.Thread != "":
			threaded++
			fallthrough
		default:
			byChannel[p.Channel]++
		}
		if p.Mention {
			mentions++
		}
	}
	// The demo needs each channel to speak, some messages to address the
	// agent, #general (open from the start) to address it early, and a
	// thread and a direct message to show.
	if len(byChannel) != len(Channels) || mentions < 3 || mentions == len(posts) || threaded == 0 || dms == 0 {
		t.Errorf("default script: %d posts by channel %v, %d mentions, %d in threads, %d DMs", len(posts), byChannel, mentions, threaded, dms)
	}
	for _, p := range posts {
		if p.Channel == "#general" && p.Mention {
			break
		}
		if p.Mention {
			t.Errorf("the first mention is in %s, not #general, which a host has open first", p.Channel)
			break
		}
	}
}

// TestPlaySchedule runs the schedule on synctest's clock: each post comes
// its delay, divided by speed, after the one before.
func TestPlaySchedule(t *testing.T) {
	posts := []Post{
		{Delay: 2 * time.Second, Text: "a"},
		{Delay: 0, Text: "b"},
		{Delay: 5 * time.Second, Text: "c"},
	}
	for _, tc := range []struct {
		name  string
		speed float64
		loop  bool
		stop  time.Duration // the context's deadline; 0 for none
		want  []string
	}{
		{"real time", 1, false, 0, []string{"a@2s", "b@2s", "c@7s"}},
		{"twice as fast", 2, false, 0, []string{"a@1s", "b@1s", "c@3.5s"}},
		{"looping until ctx ends", 1, true, 16 * time.Second, []string{"a@2s", "b@2s", "c@7s", "a@9s", "b@9s", "c@14s", "a@16s", "b@16s"}},
		{"ctx ends mid-script", 1, false, 3 * time.Second, []string{"a@2s", "b@2s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				if tc.stop > 0 {
					var cancel context.CancelFunc
					// A hair past the deadline of the last post it allows.
					ctx, cancel = context.WithTimeout(ctx, tc.stop+time.Millisecond)
					defer cancel()
				}
				start := time.Now()
				var got []string
				Play(ctx, posts, tc.speed, tc.loop, nil, func(p Post) {
					got = append(got, p.Text+"@"+time.Since(start).String())
				})
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("posts (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestPlayLoopWithoutTime: a looping script that takes no time plays once
// rather than spinning.
func TestPlayLoopWithoutTime(t *testing.T) {
	n := 0
	Play(context.Background(), []Post{{Text: "a"}, {Text: "b"}}, 1, true, nil, func(Post) { n++ })
	if n != 2 {
		t.Errorf("played %d posts, want 2", n)
	}
}

// TestPlayAfterAgent: a "+agent" post waits for the agent's first message
// after the post before it; what the agent said earlier doesn't count.
func TestPlayAfterAgent(t *testing.T) {
	posts, err := ParseScript(strings.NewReader("+0s #general a @agent: hi\n+agent #dev b @agent: and here?\n+1s #dev c: later\n"), Channels)
	if err != nil || !posts[1].AfterAgent || posts[1].Delay != 0 {
		t.Fatalf("parse: %+v, %v", posts, err)
	}
	synctest.Test(t, func(t *testing.T) {
		agent := make(chan struct{}, 1)
		agent <- struct{}{} // said before the first post: doesn't count
		posted := make(chan string)
		done := make(chan struct{})
		go func() {
			defer close(done)
			Play(t.Context(), posts, 1, false, agent, func(p Post) { posted <- p.Author })
		}()
		if got := <-posted; got != "a" {
			t.Fatalf("first post by %s", got)
		}
		synctest.Wait()
		select {
		case got := <-posted:
			t.Fatalf("%s posted before the agent spoke", got)
		default:
		}
		agent <- struct{}{}
		if got := <-posted; got != "b" {
			t.Fatalf("second post by %s", got)
		}
		start := time.Now()
		if got := <-posted; got != "c" || time.Since(start) != time.Second {
			t.Fatalf("third post by %s after %s", got, time.Since(start))
		}
		<-done
	})
}
