package channels

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/protocol"
)

// What the host tells a channel's server while an agent works toward
// speech there (outgoing.go): channels/typing, on virtual time, and
// channels/outgoing/chunk and complete.

// rigCaps is the rig's usual grant and extra.
func rigCaps(extra ...string) []string {
	return append([]string{"channels.register", "channels.lifecycle", "channels.publish", "channels.incoming"}, extra...)
}

// sentNote is a notification as a test compares it: its method and its
// params, decoded.
type sentNote struct {
	Method string
	Params any
}

// sentNotes returns the notifications d was sent, decoded.
func sentNotes(t *testing.T, d *double) []sentNote {
	t.Helper()
	out := []sentNote{}
	for _, n := range d.notified() {
		var p any
		if err := json.Unmarshal(n.params, &p); err != nil {
			t.Fatalf("%s params %s: %v", n.method, n.params, err)
		}
		out = append(out, sentNote{n.method, p})
	}
	return out
}

// wantNote is a notification as a test expects it: params is its JSON.
func wantNote(t *testing.T, method, params string) sentNote {
	t.Helper()
	var p any
	if err := json.Unmarshal([]byte(params), &p); err != nil {
		t.Fatalf("want %s params %s: %v", method, params, err)
	}
	return sentNote{method, p}
}

func typingNote(t *testing.T, channel, op string) sentNote {
	t.Helper()
	return wantNote(t, protocol.MethodChannelsTyping, `{"channelId":"`+channel+`","op":"`+op+`"}`)
}

// checkNotes checks that d was sent exactly want, in order.
func checkNotes(t *testing.T, d *double, when string, want ...sentNote) {
	t.Helper()
	if want == nil {
		want = []sentNote{}
	}
	if diff := cmp.Diff(want, sentNotes(t, d)); diff != "" {
		t.Errorf("notifications %s (-want +got):\n%s", when, diff)
	}
}

// typingInOpen is a rig granted channels.typing with c open, and typing
// started in c (Typing's stop returned).
func typingInOpen(t *testing.T) (*rig, func()) {
	t.Helper()
	rg := newRig(t, rigCaps("channels.typing")...)
	openedChannel(rg, desc("c", true))
	stop, ok := rg.reg.Typing("s", "c")
	if !ok {
		t.Fatal("Typing on an open channel with channels.typing: ok false")
	}
	return rg, stop
}

func TestTypingStartRepeatStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, rigCaps("channels.typing")...)
		openedChannel(rg, desc("c", true))
		checkNotes(t, rg.srv, "before typing")

		stop, ok := rg.reg.Typing("s", "c")
		if !ok {
			t.Fatal("Typing on an open channel with channels.typing: ok false")
		}
		start := typingNote(t, "c", "start")
		// The first start goes out at once, from typing's own goroutine.
		synctest.Wait()
		checkNotes(t, rg.srv, "at once", start)

		time.Sleep(TypingInterval - time.Millisecond)
		synctest.Wait()
		checkNotes(t, rg.srv, "just before 7s", start)
		time.Sleep(time.Millisecond)
		synctest.Wait()
		checkNotes(t, rg.srv, "at 7s", start, start)
		time.Sleep(TypingInterval - time.Millisecond)
		synctest.Wait()
		checkNotes(t, rg.srv, "just before 14s", start, start)
		time.Sleep(time.Millisecond)
		synctest.Wait()
		checkNotes(t, rg.srv, "at 14s", start, start, start)

		time.Sleep(TypingInterval / 2)
		// stop waits for the stop to be sent.
		stop()
		stopped := typingNote(t, "c", "stop")
		checkNotes(t, rg.srv, "after stop", start, start, start, stopped)

		time.Sleep(5 * TypingInterval)
		synctest.Wait()
		stop()
		synctest.Wait()
		checkNotes(t, rg.srv, "35s after stop, and a second stop", start, start, start, stopped)
		rg.srv.none()

		// Typing again starts afresh.
		stop, ok = rg.reg.Typing("s", "c")
		if !ok {
			t.Fatal("Typing again: ok false")
		}
		stop()
		checkNotes(t, rg.srv, "after typing again", start, start, start, stopped, start, stopped)
	})
}

func TestTypingRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup returns the server and channel to type into.
		setup func(rg *rig) (server, channel string)
	}{
		{"no grant", func(rg *rig) (string, string) {
			openedChannel(rg, desc("c", true))
			rg.srv.setGrant("channels.typing", false)
			return "s", "c"
		}},
		{"closed channel", func(rg *rig) (string, string) {
			rg.registered("c")
			return "s", "c"
		}},
		{"unregistered channel", func(rg *rig) (string, string) {
			openedChannel(rg, desc("c", true))
			return "s", "x"
		}},
		{"unknown server", func(rg *rig) (string, string) {
			openedChannel(rg, desc("c", true))
			return "t", "c"
		}},
		{"closed by the agent", func(rg *rig) (string, string) {
			openedChannel(rg, desc("c", true))
			ch := rg.toolAsync(ToolClose, `{"channelId":"c"}`)
			rg.srv.expect("close", "c").ok()
			if res := recv(rg.t, ch); res.IsError {
				rg.t.Fatalf("channel_close: %s", res.Text())
			}
			return "s", "c"
		}},
		{"disconnected", func(rg *rig) (string, string) {
			openedChannel(rg, desc("c", true))
			rg.reg.Disconnected("s", false)
			return "s", "c"
		}},
		{"registry closed", func(rg *rig) (string, string) {
			openedChannel(rg, desc("c", true))
			rg.reg.Close()
			return "s", "c"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newRig(t, rigCaps("channels.typing")...)
				server, channel := tc.setup(rg)
				synctest.Wait()
				stop, ok := rg.reg.Typing(server, channel)
				if ok {
					t.Errorf("Typing(%q, %q): ok true", server, channel)
				}
				if stop == nil {
					t.Fatal("Typing returned a nil stop")
				}
				time.Sleep(3 * TypingInterval)
				synctest.Wait()
				stop()
				stop()
				synctest.Wait()
				checkNotes(t, rg.srv, "after a refused Typing")
			})
		})
	}
}

func TestTypingStopsAtClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg, stop := typingInOpen(t)
		rg.reg.Close()
		// Close waits for the typing goroutine: the stop is sent by now,
		// and nothing follows it.
		notes := sentNotes(t, rg.srv)
		start, stopped := typingNote(t, "c", "start"), typingNote(t, "c", "stop")
		if len(notes) < 2 || !cmp.Equal(notes[0], start) || !cmp.Equal(notes[len(notes)-1], stopped) {
			t.Fatalf("notifications at Close = %v, want a start first and a stop last", notes)
		}
		for _, n := range notes[1 : len(notes)-1] {
			if !cmp.Equal(n, start) {
				t.Errorf("notification %v between the start and the stop", n)
			}
		}
		time.Sleep(5 * TypingInterval)
		synctest.Wait()
		stop()
		stop()
		synctest.Wait()
		checkNotes(t, rg.srv, "after Close and stop", notes...)
		// synctest.Test fails on a goroutine left in the bubble, and
		// goleak after the package's tests.
	})
}

// TestTypingStopConcurrent calls stop from several goroutines at once:
// one stop is sent, and every call returns.
func TestTypingStopConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg, stop := typingInOpen(t)
		done := make(chan struct{})
		for range 4 {
			go func() {
				stop()
				done <- struct{}{}
			}()
		}
		for range 4 {
			recv(t, done)
		}
		checkNotes(t, rg.srv, "after concurrent stops", typingNote(t, "c", "start"), typingNote(t, "c", "stop"))
	})
}

// TestTypingTwoChannels types into two channels at once: each has its own
// starts and stop.
func TestTypingTwoChannels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, rigCaps("channels.typing")...)
		openedChannel(rg, desc("a", true))
		openedChannel(rg, desc("b", true))
		stopA, okA := rg.reg.Typing("s", "a")
		time.Sleep(TypingInterval / 2)
		stopB, okB := rg.reg.Typing("s", "b")
		if !okA || !okB {
			t.Fatalf("Typing: ok %v, %v", okA, okB)
		}
		time.Sleep(TypingInterval / 2) // 7s: a's second start
		synctest.Wait()
		stopA()
		time.Sleep(TypingInterval / 2) // 10.5s: b's second start
		synctest.Wait()
		stopB()
		checkNotes(t, rg.srv, "typing into a then b",
			typingNote(t, "a", "start"), typingNote(t, "b", "start"), typingNote(t, "a", "start"),
			typingNote(t, "a", "stop"), typingNote(t, "b", "start"), typingNote(t, "b", "stop"))
	})
}

// notifyFails is a double whose notifications fail.
type notifyFails struct{ *double }

func (notifyFails) Notify(context.Context, string, any) error { return errors.New("connection lost") }

// TestTypingAndStreamFailuresLogged: a failed notification is logged,
// rate-limited, and changes nothing for the caller.
func TestTypingAndStreamFailuresLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		fd := newDouble(t, rigCaps("channels.typing", "channels.streaming")...)
		rg.reg.AddServer("f", notifyFails{fd}, ServerConfig{})
		_, start := rg.reg.Register("f", []protocol.ChannelDescriptor{desc("c", true)})
		start()
		fd.expect("open", "c").ok()
		synctest.Wait()

		stop, ok := rg.reg.Typing("f", "c")
		if !ok {
			t.Fatal("Typing with failing notifications: ok false")
		}
		// A start at once and at 7s, then the stop: three failures within
		// the limiter's window, one logged in full.
		time.Sleep(TypingInterval)
		synctest.Wait()
		stop()
		if n := len(rg.logs.Find("channels/typing could not be sent; the turn goes on")); n != 1 {
			t.Errorf("typing failures logged in full %d times, want 1 (the rest counted):\n%s", n, rg.logs.Dump())
		}

		o := rg.reg.Stream("f", "c", nil)
		if o == nil {
			t.Fatal("Stream: nil")
		}
		o.Chunk("i1", "v1", 0, "a")
		o.Chunk("i1", "v1", 1, "b")
		o.Complete("i1", "v1", "ab")
		if n := len(rg.logs.Find("channels/outgoing could not be sent; the speech is still published")); n != 1 {
			t.Errorf("stream failures logged in full %d times, want 1 (the rest counted):\n%s", n, rg.logs.Dump())
		}
		rec := rg.logs.One(t, "channels/outgoing could not be sent; the speech is still published")
		if rec.Attr("server") != "f" || rec.Attr("channel") != "c" || rec.Attr("method") != protocol.MethodChannelsOutgoingChunk || rec.Attr("error") != "connection lost" {
			t.Errorf("stream failure logged as %+v", rec)
		}
		fd.none()
	})
}

func TestStreamRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		openedChannel(rg, desc("c", true))
		if o := rg.reg.Stream("s", "c", nil); o != nil {
			t.Error("Stream without channels.streaming: not nil")
		}
		rg.srv.setGrant("channels.streaming", true)
		if o := rg.reg.Stream("s", "x", nil); o != nil {
			t.Error("Stream into an unregistered channel: not nil")
		}
		if o := rg.reg.Stream("t", "c", nil); o != nil {
			t.Error("Stream to an unknown server: not nil")
		}
		o := rg.reg.Stream("s", "c", nil)
		if o == nil {
			t.Fatal("Stream with the grant into a registered channel: nil")
		}
		// The grant goes mid-stream: nothing more is sent.
		rg.srv.setGrant("channels.streaming", false)
		o.Chunk("inf_1", "ada", 0, "Hel")
		o.Complete("inf_1", "ada", "Hel")
		rg.srv.setGrant("channels.streaming", true)
		// Without channels.publish the delivery path would refuse the
		// speech: nothing streams.
		rg.srv.setGrant("channels.publish", false)
		if o := rg.reg.Stream("s", "c", nil); o != nil {
			t.Error("Stream without channels.publish: not nil")
		}
		rg.srv.setGrant("channels.publish", true)
		rg.reg.Disconnected("s", false)
		if o := rg.reg.Stream("s", "c", nil); o != nil {
			t.Error("Stream into a channel no longer registered: not nil")
		}
		synctest.Wait()
		checkNotes(t, rg.srv, "after refused streams")
	})
}

func TestStreamChunksAndComplete(t *testing.T) {
	for _, open := range []bool{true, false} {
		name := "open channel"
		if !open {
			name = "closed channel"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newRig(t, rigCaps("channels.streaming")...)
				if open {
					openedChannel(rg, desc("c", true))
				} else {
					rg.registered("c")
				}
				o := rg.reg.Stream("s", "c", nil)
				if o == nil {
					t.Fatal("Stream: nil")
				}
				o.Chunk("inf-1", "conv-1", 0, "Hel")
				o.Chunk("inf-1", "conv-1", 1, `lo, "<world>" 👀`)
				o.Complete("inf-1", "conv-1", `Hello, "<world>" 👀`)
				synctest.Wait()
				checkNotes(t, rg.srv, "of a stream",
					wantNote(t, protocol.MethodChannelsOutgoingChunk, `{"inferenceId":"inf-1","conversationId":"conv-1","channelId":"c","index":0,"delta":"Hel"}`),
					wantNote(t, protocol.MethodChannelsOutgoingChunk, `{"inferenceId":"inf-1","conversationId":"conv-1","channelId":"c","index":1,"delta":"lo, \"<world>\" 👀"}`),
					wantNote(t, protocol.MethodChannelsOutgoingComplete, `{"inferenceId":"inf-1","conversationId":"conv-1","channelId":"c","content":[{"type":"text","text":"Hello, \"<world>\" 👀"}]}`),
				)
				rg.srv.none()
			})
		})
	}
}

// TestStreamEmptyDeltaAndText: an empty delta and an empty complete text
// are still sent with their fields.
func TestStreamEmptyDeltaAndText(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, rigCaps("channels.streaming")...)
		rg.registered("c")
		o := rg.reg.Stream("s", "c", nil)
		if o == nil {
			t.Fatal("Stream: nil")
		}
		o.Chunk("i", "v", 0, "")
		o.Complete("i", "v", "")
		checkNotes(t, rg.srv, "of an empty stream",
			wantNote(t, protocol.MethodChannelsOutgoingChunk, `{"inferenceId":"i","conversationId":"v","channelId":"c","index":0,"delta":""}`),
			wantNote(t, protocol.MethodChannelsOutgoingComplete, `{"inferenceId":"i","conversationId":"v","channelId":"c","content":[{"type":"text","text":""}]}`),
		)
	})
}

func TestTypingNoStartAfterChannelCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg, stop := typingInOpen(t)
		defer stop()
		ch := rg.toolAsync(ToolClose, `{"channelId":"c"}`)
		rg.srv.expect("close", "c").ok()
		if res := recv(t, ch); res.IsError {
			t.Fatal(res.Text())
		}
		time.Sleep(3 * TypingInterval)
		synctest.Wait()
		// The close took it out of the open channels: the stop went as
		// it did, and no start after it (typingclose_test.go has more).
		checkNotes(t, rg.srv, "after the channel closed", typingNote(t, "c", "start"), typingNote(t, "c", "stop"))
	})
}

func TestTypingNoStartAfterGrantRevoked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg, stop := typingInOpen(t)
		defer stop()
		synctest.Wait() // the first start is out
		rg.srv.setGrant("channels.typing", false)
		time.Sleep(3 * TypingInterval)
		synctest.Wait()
		checkNotes(t, rg.srv, "after the grant was revoked", typingNote(t, "c", "start"))
	})
}

func TestCloseWhileTypingIsPrompt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg, stop := typingInOpen(t)
		defer stop()
		time.Sleep(3 * time.Second)
		start := time.Now()
		rg.reg.Close()
		if d := time.Since(start); d != 0 {
			t.Errorf("Close with nothing in flight but typing took %v", d)
		}
		checkNotes(t, rg.srv, "at Close", typingNote(t, "c", "start"), typingNote(t, "c", "stop"))
	})
}

// TestTypingWhileOpenIsConfirmed: a channel selected open whose open is
// still out is typed in: the agent's turn is already working toward
// speech there.
func TestTypingWhileOpenIsConfirmed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, rigCaps("channels.typing")...)
		rg.register(desc("c", true))
		rg.srv.expect("open", "c") // stays out; Close cancels it
		stop, ok := rg.reg.Typing("s", "c")
		if !ok {
			t.Fatal("Typing on a channel selected open: ok false")
		}
		stop()
		synctest.Wait()
		checkNotes(t, rg.srv, "typed", typingNote(t, "c", "start"), typingNote(t, "c", "stop"))
	})
}

// A stream carries the place its final publish asks for (RFC-011 §6): a
// thread's id, null for the root, nothing when no place is asked.
func TestStreamCarriesTheThread(t *testing.T) {
	for _, tc := range []struct {
		name   string
		thread *string
		field  string
	}{
		{"a thread", thr("t1"), `,"threadId":"t1"`},
		{"the root", thr(""), `,"threadId":null`},
		{"no place", nil, ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newRig(t, rigCaps("channels.streaming")...)
				rg.registered("c")
				o := rg.reg.Stream("s", "c", tc.thread)
				o.Chunk("i", "v", 0, "hi")
				o.Complete("i", "v", "hi")
				checkNotes(t, rg.srv, "of a stream asking for "+tc.name,
					wantNote(t, protocol.MethodChannelsOutgoingChunk, `{"inferenceId":"i","conversationId":"v","channelId":"c","index":0,"delta":"hi"`+tc.field+`}`),
					wantNote(t, protocol.MethodChannelsOutgoingComplete, `{"inferenceId":"i","conversationId":"v","channelId":"c","content":[{"type":"text","text":"hi"}]`+tc.field+`}`),
				)
			})
		})
	}
}
