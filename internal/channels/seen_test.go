package channels

import (
	"testing"
	"testing/synctest"
	"time"
)

// The seen-acknowledgment's wait (SeenAll, tools.go), on virtual time: a
// turn goes on once its acknowledgments are answered, or after SeenWait.

// seenRig is a rig granted channels.acknowledge whose server asks for
// seen-acknowledgments.
func seenRig(t *testing.T) *rig {
	t.Helper()
	rg := newRig(t, rigCaps("channels.acknowledge")...)
	rg.reg.AddServer("s", rg.srv, ServerConfig{AcknowledgeSeen: "👀"})
	return rg
}

// seenAsync runs SeenAll on a goroutine of its own; the channel closes
// when it returns.
func seenAsync(rg *rig, msgs ...SeenMessage) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		rg.reg.SeenAll(msgs)
	}()
	return done
}

func returned(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestSeenWaitsForTheAnswer: Seen returns once its request is answered,
// not before, so the turn's reply goes after it.
func TestSeenWaitsForTheAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := seenRig(t)
		done := seenAsync(rg, SeenMessage{"s", "c", "m1"})
		c := rg.srv.next()
		if c.method != methodAck || c.channel != "c" {
			t.Fatalf("sent %s", c)
		}
		time.Sleep(SeenWait / 2)
		synctest.Wait()
		if returned(done) {
			t.Fatal("Seen returned before its request was answered")
		}
		c.answer(map[string]any{"acknowledged": true})
		synctest.Wait()
		if !returned(done) {
			t.Fatal("Seen did not return once its request was answered")
		}
	})
}

// TestSeenFailureEndsTheWait: an error answer ends the wait as an answer
// does, and is logged.
func TestSeenFailureEndsTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := seenRig(t)
		start := time.Now()
		done := seenAsync(rg, SeenMessage{"s", "c", "m1"})
		rg.srv.next().fail("no such message")
		recv(t, done)
		if d := time.Since(start); d != 0 {
			t.Errorf("Seen with a failed request took %v, want no wait past the answer", d)
		}
		rg.logs.One(t, "channels/acknowledge (seen) failed")
	})
}

// TestSeenWaitIsBounded: a server that doesn't answer holds the turn for
// SeenWait, no longer; the request stays out, and its late answer is
// taken without harm.
func TestSeenWaitIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := seenRig(t)
		start := time.Now()
		done := seenAsync(rg, SeenMessage{"s", "c", "m1"})
		c := rg.srv.next()
		recv(t, done)
		if d := time.Since(start); d != SeenWait {
			t.Errorf("Seen with no answer returned after %v, want %v", d, SeenWait)
		}
		c.answer(map[string]any{"acknowledged": false, "reason": "gone"})
		synctest.Wait()
		rg.logs.One(t, "channels/acknowledge (seen) not acknowledged")
	})
}

// TestSeenAllAtOnce: a turn's several messages are acknowledged
// concurrently, with one wait for all of them: all three requests are
// out before any is answered, SeenAll returns only once the last is
// answered, and one that never is holds it for SeenWait in all, not one
// SeenWait each.
func TestSeenAllAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := seenRig(t)
		msgs := []SeenMessage{{"s", "c", "m1"}, {"s", "d", "m2"}, {"s", "e", "m3"}}
		done := seenAsync(rg, msgs...)
		calls := takeCalls(t, rg.srv, 3)
		for _, k := range []string{methodAck + " c", methodAck + " d", methodAck + " e"} {
			if calls[k] == nil {
				t.Fatalf("requests %v, want %s among them", calls, k)
			}
		}
		calls[methodAck+" c"].answer(map[string]any{"acknowledged": true})
		calls[methodAck+" d"].answer(map[string]any{"acknowledged": true})
		synctest.Wait()
		if returned(done) {
			t.Fatal("SeenAll returned with one request unanswered")
		}
		calls[methodAck+" e"].answer(map[string]any{"acknowledged": true})
		synctest.Wait()
		if !returned(done) {
			t.Fatal("SeenAll did not return once every request was answered")
		}

		start := time.Now()
		done = seenAsync(rg, msgs...)
		calls = takeCalls(t, rg.srv, 3)
		calls[methodAck+" c"].answer(map[string]any{"acknowledged": true})
		recv(t, done)
		if d := time.Since(start); d != SeenWait {
			t.Errorf("SeenAll with two requests unanswered returned after %v, want one SeenWait (%v)", d, SeenWait)
		}
	})
}

// TestSeenSkipsWithoutWaiting: a message whose server asks for no
// acknowledgment, or isn't granted channels.acknowledge, or isn't known,
// sends nothing and costs no wait; the others of the turn still go.
func TestSeenSkipsWithoutWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, rigCaps()...) // no channels.acknowledge
		rg.reg.AddServer("s", rg.srv, ServerConfig{AcknowledgeSeen: "👀"})
		quiet := newDouble(t, rigCaps("channels.acknowledge")...)
		rg.reg.AddServer("q", quiet, ServerConfig{}) // no acknowledgeSeen
		asks := newDouble(t, rigCaps("channels.acknowledge")...)
		rg.reg.AddServer("a", asks, ServerConfig{AcknowledgeSeen: "👀"})

		start := time.Now()
		rg.reg.SeenAll([]SeenMessage{{"s", "c", "m1"}, {"q", "c", "m2"}, {"gone", "c", "m3"}})
		if d := time.Since(start); d != 0 {
			t.Errorf("SeenAll with nothing to send took %v", d)
		}
		done := seenAsync(rg, SeenMessage{"s", "c", "m1"}, SeenMessage{"a", "c", "m4"})
		asks.next().ok()
		recv(t, done)
		synctest.Wait()
		rg.srv.none()
		quiet.none()
		if got := rg.srv.log(); len(got) != 0 {
			t.Errorf("the ungranted server was sent %v", got)
		}
	})
}

// TestSeenAtClose: Close begins while a turn waits for an acknowledgment
// the server doesn't answer: the wait ends at once, and Close is as
// prompt as with nothing out (the request ends with the drain).
func TestSeenAtClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := seenRig(t)
		done := seenAsync(rg, SeenMessage{"s", "c", "m1"})
		rg.srv.next() // never answered
		start := time.Now()
		rg.reg.Close()
		if d := time.Since(start); d != 0 {
			t.Errorf("Close with a seen-acknowledgment out took %v", d)
		}
		recv(t, done)
		if d := time.Since(start); d != 0 {
			t.Errorf("Seen returned %v after Close began, want at once", d)
		}
		rg.logs.One(t, "channels/acknowledge (seen) failed")
	})
}
