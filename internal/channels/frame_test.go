package channels

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/internal/forgery"
)

// Framing (content/frame.go) on the publish texts: a channel's id, label
// and thread, and a server's reason, posted id and echoed thread, leave
// the host's framing marks where the host put them, in one line.
func TestPublishTextsFraming(t *testing.T) {
	render := func(id, label, thread, reason, posted string) []string {
		place := where(id, label, &thread)
		return []string{
			textNotSent(place, textUndeclaredThread(label, id, threadName(&thread))),
			textNotSent(place, textRootThread(label, id, thread)),
			textNotSent(place, textReportedNotDelivered("chat", reason)),
			textUnconfirmed(place, textNotDeliveredButPosted("chat", posted)),
		}
	}
	rng := rand.New(rand.NewPCG(23, 4))
	for range 5000 {
		id, label, thread, reason, posted := "c"+forgery.String(rng), forgery.String(rng), forgery.String(rng), forgery.String(rng), forgery.String(rng)
		got := render(id, label, thread, reason, posted)
		want := render("c"+forgery.Plain(id[1:]), forgery.Plain(label), forgery.Plain(thread), forgery.Plain(reason), forgery.Plain(posted))
		for i := range got {
			if g, w := content.MarksOf(got[i]), content.MarksOf(want[i]); g != w {
				t.Fatalf("text %d has marks %+v, want %+v:\n%q\nagainst\n%q", i, g, w, got[i], want[i])
			}
			if strings.ContainsAny(got[i], "\n\r\u2028\u2029\u0085\u202e\u200b\x1b") {
				t.Fatalf("text %d is not one clean line: %q", i, got[i])
			}
		}
	}
}

// A channel id, or a message's id or thread, that wouldn't read as it is
// is refused where it arrives: an agent repeats ids exactly.
func TestUnprintableIDsRefused(t *testing.T) {
	if got := checkDescriptor(desc("c\u202e1", false)); got != "invalid descriptor: the id holds a control, line break, bidirectional or invisible formatting character" {
		t.Errorf("descriptor = %q", got)
	}
	if got := checkDescriptor(desc("c[1] · x", false)); got != "" {
		t.Errorf("a printable id was refused: %q", got)
	}
}

func TestUnprintableMessageIDsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		res, err := rg.reg.Incoming(context.Background(), "s", rawMsgs(
			`{"channelId":"c","messageId":"m\u200b1","content":"hi"}`,
			`{"channelId":"c","messageId":"m2","threadId":"t\n1","content":"hi"}`,
			`{"channelId":"c","messageId":"m3","threadId":"t[1] · x","content":"hi"}`))
		if err != nil {
			t.Fatal(err)
		}
		const why = "invalid channel/message identity: an id holds a control, line break, bidirectional or invisible formatting character"
		if r := res.Results; len(r) != 3 || r[0].Accepted || r[0].Reason != why || r[1].Accepted || r[1].Reason != why || !r[2].Accepted {
			t.Errorf("results = %+v", res.Results)
		}
	})
}
