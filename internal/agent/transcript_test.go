package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestTranscriptLines(t *testing.T) {
	var b bytes.Buffer
	tr := NewTranscript(&b)
	tr.now = func() time.Time { return time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) }
	tr.Write(Event{Agent: "ada", Turn: 1, Event: EventTurnStart, WokenBy: []Wake{{Kind: "channel", Server: "chat", Channel: "general", MessageID: "m1"}}})
	tr.Write(Event{Agent: "ada", Turn: 1, Event: EventModel, Stop: "tool_use", Calls: []CallLine{{ID: "call_1", Name: "channel_open", Args: json.RawMessage(`{"channelId":"b"}`)}}, Usage: &UsageLine{In: 10, Out: 2}})
	tr.Write(Event{Agent: "ada", Turn: 1, Event: EventSpeech, Server: "chat", Channel: "b", Text: "Joined b.\n\u001b[2J", Outcome: "delivered"})
	want := `{"at":"2026-12-01T00:00:00Z","agent":"ada","turn":1,"event":"turn_start","wokenBy":[{"kind":"channel","server":"chat","channel":"general","messageId":"m1"}]}
{"at":"2026-12-01T00:00:00Z","agent":"ada","turn":1,"event":"model","stop":"tool_use","calls":[{"id":"call_1","name":"channel_open","args":{"channelId":"b"}}],"usage":{"in":10,"out":2}}
{"at":"2026-12-01T00:00:00Z","agent":"ada","turn":1,"event":"speech","text":"Joined b.\n\u001b[2J","outcome":"delivered","server":"chat","channel":"b"}
`
	if b.String() != want {
		t.Errorf("transcript:\n%s\nwant:\n%s", b.String(), want)
	}
	if tr.Err() != nil {
		t.Error(tr.Err())
	}
}

// TestTranscriptConcurrent: lines written at once never mix.
func TestTranscriptConcurrent(t *testing.T) {
	var b bytes.Buffer
	tr := NewTranscript(&b)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() { tr.Write(Event{Agent: fmt.Sprint(i), Event: EventNotice, Text: "x"}) })
	}
	wg.Wait()
	sc := bufio.NewScanner(&b)
	n := 0
	for sc.Scan() {
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %d: %v: %s", n, err, sc.Text())
		}
		n++
	}
	if n != 50 {
		t.Errorf("%d lines, want 50", n)
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	f.n++
	return 0, errors.New("disk full")
}

func TestTranscriptStopsAfterFailure(t *testing.T) {
	w := &failWriter{}
	tr := NewTranscript(w)
	tr.Write(Event{Event: EventNotice})
	tr.Write(Event{Event: EventNotice})
	if w.n != 1 || tr.Err() == nil {
		t.Errorf("writes %d, err %v; want one write and the error kept", w.n, tr.Err())
	}
	var nilT *Transcript
	nilT.Write(Event{}) // no panic
	if nilT.Err() != nil {
		t.Error("nil transcript has an error")
	}
}

// A tapped transcript hands each event, stamped, to its tap, also with no
// writer and after a failed write.
func TestTranscriptTap(t *testing.T) {
	var got []Event
	w := &failWriter{}
	tr := NewTappedTranscript(w, func(ev Event) { got = append(got, ev) })
	tr.Write(Event{Agent: "ada", Event: EventTurnStart})
	tr.Write(Event{Agent: "ada", Event: EventTurnEnd, Reason: "end_turn"})
	if len(got) != 2 || got[1].Reason != "end_turn" || got[0].At.IsZero() {
		t.Errorf("tapped %+v, want both events, stamped", got)
	}
	if w.n != 1 {
		t.Errorf("%d writes, want 1 (none after the failure)", w.n)
	}
	got = nil
	NewTappedTranscript(nil, func(ev Event) { got = append(got, ev) }).Write(Event{Event: EventNotice})
	if len(got) != 1 {
		t.Errorf("a transcript with no writer tapped %d events, want 1", len(got))
	}
}
