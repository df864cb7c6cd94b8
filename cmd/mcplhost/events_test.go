package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/protocol"
)

func pushEvent(i int) session.Inbound {
	return session.Inbound{Method: protocol.MethodPushEvent, Request: true, Admitted: true,
		Params: json.RawMessage(fmt.Sprintf(`{"featureSet":"chat","eventId":"e%d"}`, i)), Answer: json.RawMessage(`{"accepted":true}`)}
}

// TestEventLogCounts checks that the first maxEventsPerMethod events of
// each method are kept and printed, and the rest counted: said once as a
// method passes the bound, whether before the header or after, and summed
// up by finish.
func TestEventLogCounts(t *testing.T) {
	var out bytes.Buffer
	l := &eventLog{out: &out}
	for i := range maxEventsPerMethod + 2 { // before the header: held
		l.add(pushEvent(i))
	}
	l.add(session.Inbound{Method: protocol.MethodChannelsIncoming, Request: true, Reason: "no", Params: json.RawMessage(`{}`)})
	if out.Len() != 0 {
		t.Fatalf("printed before goLive:\n%s", out.String())
	}
	l.goLive()
	for i := range maxEventsPerMethod + 5 { // after it: printed as they come
		l.add(session.Inbound{Method: protocol.MethodChannelsRegister, Request: true, Admitted: true, Params: json.RawMessage(fmt.Sprintf(`{"channels":[{"id":"c%d"}]}`, i))})
	}
	l.finish()
	l.add(pushEvent(99)) // after finish: counted, not printed (3 omitted now)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	count := func(prefix string) int {
		n := 0
		for _, line := range lines {
			if strings.HasPrefix(line, prefix) {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		prefix string
		want   int
	}{
		{"event push/event: admitted (request) {", maxEventsPerMethod},
		{"event channels/incoming: rejected (request): no {}", 1},
		{"event channels/register: admitted (request) {", maxEventsPerMethod},
		{"event push/event: more than 20 arrived; further push/event events are counted, not printed", 1},
		{"event channels/register: more than 20 arrived; further channels/register events are counted, not printed", 1},
		{"events: 2 further push/event events were counted, not printed", 1},
		{"events: 5 further channels/register events were counted, not printed", 1},
	} {
		if got := count(tc.prefix); got != tc.want {
			t.Errorf("%d lines start %q, want %d; output:\n%s", got, tc.prefix, tc.want, out.String())
		}
	}
	if len(lines) != 2*maxEventsPerMethod+5 {
		t.Errorf("%d lines, want %d", len(lines), 2*maxEventsPerMethod+5)
	}
	omitted, ignored := l.omitted()
	if diff := cmp.Diff(map[string]int{protocol.MethodPushEvent: 3, protocol.MethodChannelsRegister: 5}, omitted); diff != "" || ignored != 0 {
		t.Errorf("omitted (-want +got):\n%s; ignored %d", diff, ignored)
	}
	if all := l.all(); len(all) != 2*maxEventsPerMethod+1 || all[0].Method != protocol.MethodPushEvent || all[len(all)-1].Method != protocol.MethodChannelsRegister {
		t.Errorf("kept %d events, want %d in arrival order", len(all), 2*maxEventsPerMethod+1)
	}
	// With nothing left out, omitted is {} (not null) in the report.
	if m, _ := (&eventLog{}).omitted(); m == nil || len(m) != 0 {
		t.Errorf("omitted of an empty log = %#v, want an empty map", m)
	}
}

// TestEventBounds checks the bounds on one event: its text line, and the
// params, answer and reason kept.
func TestEventBounds(t *testing.T) {
	big := `{"featureSet":"chat","text":"` + strings.Repeat("é\x1b", 3000) + `"}`
	in := session.Inbound{Method: protocol.MethodPushEvent, Request: true, Admitted: false,
		Reason: "bad\x1b[2J" + strings.Repeat("r", maxEventPart+10), Params: json.RawMessage(big), Answer: json.RawMessage(big)}
	var out bytes.Buffer
	l := &eventLog{out: &out, live: true}
	l.add(in)
	line := strings.TrimSuffix(out.String(), "\n")
	full := "event push/event: rejected (request): " + in.Reason + " " + big
	escaped := strings.ReplaceAll(full, "\x1b", `\x1b`)
	head, cut, ok := strings.Cut(line, "… (")
	if !ok || !strings.HasPrefix(escaped, head) || utf8.RuneCountInString(head) != maxEventLine ||
		cut != fmt.Sprintf("%d bytes cut)", len(escaped)-len(head)) || strings.Contains(line, "\x1b") {
		t.Errorf("line = %q, want the escaped line's first %d runes, then how many bytes were cut", line, maxEventLine)
	}
	e := l.all()[0]
	if e.Params != nil || e.ParamsOmitted != len(big) || e.Answer != nil || e.AnswerOmitted != len(big) {
		t.Errorf("params %q (%d omitted), answer %q (%d omitted): want both left out with their size", e.Params, e.ParamsOmitted, e.Answer, e.AnswerOmitted)
	}
	if len(e.Reason) != maxEventPart+len("…") || !strings.HasSuffix(e.Reason, "…") {
		t.Errorf("reason of %d bytes kept, want it cut to %d", len(e.Reason), maxEventPart)
	}
	if b, err := json.Marshal(e); err != nil || !json.Valid(b) || !strings.Contains(string(b), fmt.Sprintf(`"params":null,"answer":null,"paramsOmitted":%d,"answerOmitted":%d`, len(big), len(big))) {
		t.Errorf("event JSON = %s (%v)", b, err)
	}
	// A short line is not cut; small params are kept as they came.
	out.Reset()
	l.add(pushEvent(1))
	if got, want := out.String(), "event push/event: admitted (request) {\"featureSet\":\"chat\",\"eventId\":\"e1\"} -> {\"accepted\":true}\n"; got != want {
		t.Errorf("line = %q, want %q", got, want)
	}
	if e := l.all()[1]; string(e.Params) != `{"featureSet":"chat","eventId":"e1"}` || string(e.Answer) != `{"accepted":true}` {
		t.Errorf("kept params %s, answer %s", e.Params, e.Answer)
	}
}

// TestEventLineKinds pins each event's line and note: whether it came as
// a request or a notification, and, for a channels/incoming notification,
// that nothing tells the server which messages were kept.
func TestEventLineKinds(t *testing.T) {
	incoming := json.RawMessage(`{"messages":[{"channelId":"general","messageId":"m1"}]}`)
	declined := json.RawMessage(`{"results":[{"messageId":"m1","accepted":false}]}`)
	for _, tc := range []struct {
		name       string
		in         session.Inbound
		line, note string
	}{
		{
			name: "request admitted",
			in:   session.Inbound{Method: protocol.MethodChannelsIncoming, Request: true, Admitted: true, Params: incoming, Answer: declined},
			line: `event channels/incoming: admitted (request) {"messages":[{"channelId":"general","messageId":"m1"}]} -> {"results":[{"messageId":"m1","accepted":false}]}`,
		},
		{
			name: "request admitted with a reason",
			in: session.Inbound{Method: protocol.MethodPushEvent, Request: true, Admitted: true, Reason: "duplicate eventId: answered as before",
				Params: json.RawMessage(`{"eventId":"e1"}`), Answer: json.RawMessage(`{"accepted":true}`)},
			line: `event push/event: admitted (request; duplicate eventId: answered as before) {"eventId":"e1"} -> {"accepted":true}`,
		},
		{
			name: "request rejected",
			in:   session.Inbound{Method: protocol.MethodChannelsIncoming, Request: true, Reason: "no", Params: incoming, Answer: json.RawMessage(`{"code":-32002}`)},
			line: `event channels/incoming: rejected (request): no {"messages":[{"channelId":"general","messageId":"m1"}]}`,
		},
		{
			name: "notification admitted",
			in:   session.Inbound{Method: protocol.MethodPushEvent, Admitted: true, Params: json.RawMessage(`{"eventId":"e1"}`)},
			line: `event push/event: admitted (notification) {"eventId":"e1"}`,
		},
		{
			name: "notification rejected",
			in:   session.Inbound{Method: protocol.MethodChannelsRegister, Reason: "no"},
			line: `event channels/register: rejected (notification): no null`,
		},
		{
			name: "channels/incoming notification admitted",
			in:   session.Inbound{Method: protocol.MethodChannelsIncoming, Admitted: true, Params: incoming},
			line: `event channels/incoming: admitted (notification): a notification can't be answered with per-message results, so nothing tells the server which messages were kept; probe declined them all (it has no agent) {"messages":[{"channelId":"general","messageId":"m1"}]}`,
			note: `a notification can't be answered with per-message results, so nothing tells the server which messages were kept; probe declined them all (it has no agent)`,
		},
		{
			name: "channels/incoming notification rejected",
			in:   session.Inbound{Method: protocol.MethodChannelsIncoming, Reason: "no", Params: incoming},
			line: `event channels/incoming: rejected (notification): no; a notification can't be answered with per-message results, so nothing tells the server which messages were kept (none were) {"messages":[{"channelId":"general","messageId":"m1"}]}`,
			note: `a notification can't be answered with per-message results, so nothing tells the server which messages were kept (none were)`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			l := &eventLog{out: &out, live: true}
			l.add(tc.in)
			if got := strings.TrimSuffix(out.String(), "\n"); got != tc.line {
				t.Errorf("line:\n%s\nwant:\n%s", got, tc.line)
			}
			e := l.all()[0]
			if e.Note != tc.note || e.Request != tc.in.Request {
				t.Errorf("event: note %q, request %v; want note %q, request %v", e.Note, e.Request, tc.note, tc.in.Request)
			}
			b, _ := json.Marshal(e)
			if want := fmt.Sprintf(`"request":%v,`, tc.in.Request); !strings.Contains(string(b), want) {
				t.Errorf("event JSON %s lacks %s", b, want)
			}
			if hasNote := strings.Contains(string(b), `"note":`); hasNote != (tc.note != "") {
				t.Errorf("event JSON %s: note given %v, want %v", b, hasNote, tc.note != "")
			}
		})
	}
}

func register(ids ...string) session.Inbound {
	var p protocol.ChannelsRegisterParams
	for _, id := range ids {
		p.Channels = append(p.Channels, protocol.ChannelDescriptor{ID: id, Label: "#" + id})
	}
	b, _ := json.Marshal(p)
	return session.Inbound{Method: protocol.MethodChannelsRegister, Request: true, Admitted: true, Params: b}
}

// TestChannelsBounded checks that at most maxChannels registered channels
// are kept, the rest counted, while updates and removals go on working.
func TestChannelsBounded(t *testing.T) {
	var ids []string
	for i := range maxChannels + 5 {
		ids = append(ids, fmt.Sprintf("c%d", i))
	}
	var out bytes.Buffer
	l := &eventLog{out: &out}
	l.add(register(ids...))
	l.add(register(strings.Repeat("x", maxChannelID+1)))
	if got := l.channels(); len(got) != maxChannels || got[0].ID != "c0" || got[maxChannels-1].ID != ids[maxChannels-1] {
		t.Fatalf("kept %d channels, want the first %d", len(got), maxChannels)
	}
	// An update of a kept channel applies; a removal makes room.
	changed, _ := json.Marshal(protocol.ChannelsChangedParams{Removed: []string{"c0"},
		Updated: []protocol.ChannelDescriptor{{ID: "c1", Label: "renamed" + strings.Repeat("!", 2*maxChannelField)}}})
	l.add(session.Inbound{Method: protocol.MethodChannelsChanged, Request: true, Admitted: true, Params: changed})
	l.add(register("late"))
	got := l.channels()
	if len(got) != maxChannels || got[0].ID != "c1" || !strings.HasPrefix(got[0].Label, "renamed") || len(got[0].Label) > maxChannelField+len("…") || got[len(got)-1].ID != "late" {
		t.Errorf("after the change: %d channels, first %+v, last %+v", len(got), got[0].ID, got[len(got)-1].ID)
	}
	if _, ignored := l.omitted(); ignored != 6 {
		t.Errorf("ignored %d, want 6 (5 beyond the bound, 1 id too long)", ignored)
	}
	l.goLive()
	out.Reset()
	l.finish()
	if want := fmt.Sprintf("channels: 6 more registered channels were ignored (at most %d are kept)\n", maxChannels); out.String() != want {
		t.Errorf("finish printed %q, want %q", out.String(), want)
	}

	// channels/list adds those it gives up to the same bound.
	listed := []protocol.ChannelDescriptor{{ID: "c1"}, {ID: "new"}}
	for i := range maxChannels {
		listed = append(listed, protocol.ChannelDescriptor{ID: fmt.Sprintf("l%d", i)})
	}
	merged := mergeListed([]probeChannel{{ID: "c1", Registered: true}}, listed)
	if len(merged) != maxChannels || !merged[0].Listed || !merged[0].Registered || merged[1].ID != "new" || merged[1].Registered {
		t.Errorf("merged %d channels, first %+v, second %+v", len(merged), merged[0], merged[1])
	}
}
