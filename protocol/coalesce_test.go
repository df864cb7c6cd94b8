package protocol

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The wire shapes of RFC-006 §13, as a writer sends them: optional members
// left out when unset, push/render's dropped and notices always sent.
func TestCoalesceWireShapes(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"plain coalesce", Coalesce{Key: "battery"}, `{"key":"battery"}`},
		{"every member", Coalesce{Key: "K", ChannelID: "c", Deferred: true, Initial: true, Data: json.RawMessage(`{"by":"o"}`)},
			`{"key":"K","channelId":"c","deferred":true,"initial":true,"data":{"by":"o"}}`},
		{"retract", Coalesce{Key: "K", Retract: true}, `{"key":"K","retract":true}`},
		{"result without prior", CoalesceResult{Outcome: CoalesceFirst}, `{"outcome":"first"}`},
		{"result with prior", CoalesceResult{Outcome: CoalesceReplaced, PriorEventID: "a"}, `{"outcome":"replaced","priorEventId":"a"}`},
		{"notice without data", Notice{EventID: "n2", Timestamp: "t"}, `{"eventId":"n2","timestamp":"t"}`},
		{"render params, feature-set scope", PushRenderParams{FeatureSet: "doc", Key: "K", EventID: "n1",
			Notices: []Notice{{EventID: "n1", Timestamp: "t", Data: json.RawMessage(`[1, 2]`)}}},
			`{"featureSet":"doc","key":"K","eventId":"n1","notices":[{"eventId":"n1","timestamp":"t","data":[1,2]}],"dropped":0}`},
		{"render params, channel scope", PushRenderParams{FeatureSet: "doc", ChannelID: "chat", Key: "K", EventID: "n1", Notices: []Notice{}, Dropped: 3},
			`{"featureSet":"doc","channelId":"chat","key":"K","eventId":"n1","notices":[],"dropped":3}`},
		{"render result", PushRenderResult{Content: []json.RawMessage{json.RawMessage(`{"type":"text","text":"x"}`)}},
			`{"content":[{"type":"text","text":"x"}]}`},
		{"advertisement, default window", AllEventCoalescing(),
			`{"pushEvents":true,"channelsIncoming":true,"deferred":true,"channelScopedPush":true}`},
		{"advertisement, longer window", EventCoalescing{PushEvents: true, RetryWindowMs: 7200000},
			`{"pushEvents":true,"channelsIncoming":false,"deferred":false,"channelScopedPush":false,"retryWindowMs":7200000}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Errorf("got  %s\nwant %s", b, tc.want)
			}
		})
	}
}

// The outcome strings and the method name are RFC-006's, verbatim.
func TestCoalesceConstants(t *testing.T) {
	got := []string{CoalesceFirst, CoalesceReplaced, CoalesceAppended, CoalesceRetracted, CoalesceNoted, CoalesceConsumed,
		ReasonCoalesceInvalid, MethodPushRender, EventCoalescingMember}
	want := []string{"first", "replaced", "appended", "retracted", "noted", "consumed",
		"coalesce_invalid", "push/render", "eventCoalescing"}
	if d := cmp.Diff(want, got); d != "" {
		t.Error(d)
	}
	if DefaultRetryWindowMs != 3600000 || MaxCoalesceKeyBytes != 256 || MaxCoalesceDataBytes != 4096 {
		t.Error("bounds differ from RFC-006 §3.1 and §13")
	}
}

// A reader takes the boolean form and the object form; a part left out is
// not advertised; a malformed part or window is an error.
func TestEventCoalescingUnmarshal(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    EventCoalescing
		wantErr bool
	}{
		{in: `true`, want: AllEventCoalescing()},
		{in: ` false `, want: EventCoalescing{}},
		{in: `null`, want: EventCoalescing{}},
		{in: `{}`, want: EventCoalescing{}},
		{in: `{"pushEvents":true,"deferred":false,"future":1}`, want: EventCoalescing{PushEvents: true}},
		{in: `{"channelsIncoming":true,"channelScopedPush":true,"retryWindowMs":3600000}`,
			want: EventCoalescing{ChannelsIncoming: true, ChannelScopedPush: true, RetryWindowMs: 3600000}},
		{in: `{"retryWindowMs":7.2e6}`, want: EventCoalescing{RetryWindowMs: 7200000}},
		{in: `{"retryWindowMs":3599999}`, wantErr: true},
		{in: `{"retryWindowMs":3600000.5}`, wantErr: true},
		{in: `{"retryWindowMs":"3600000"}`, wantErr: true},
		{in: `{"retryWindowMs":1e300}`, wantErr: true},
		{in: `{"pushEvents":"yes"}`, wantErr: true},
		{in: `{"deferred":1}`, wantErr: true},
		{in: `[true]`, wantErr: true},
		{in: `"true"`, wantErr: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			var got EventCoalescing
			err := json.Unmarshal([]byte(tc.in), &got)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err == nil && got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// RetryWindow is the default when none is advertised, else the window;
// a writer refuses a window below the default rather than send it.
func TestEventCoalescingRetryWindow(t *testing.T) {
	if got := (EventCoalescing{}).RetryWindow(); got != DefaultRetryWindowMs {
		t.Errorf("default window %d", got)
	}
	if got := (EventCoalescing{RetryWindowMs: 7200000}).RetryWindow(); got != 7200000 {
		t.Errorf("window %d", got)
	}
	if _, err := json.Marshal(EventCoalescing{RetryWindowMs: 1000}); err == nil {
		t.Error("a window below the default was written")
	}
	var back EventCoalescing
	b, _ := json.Marshal(EventCoalescing{Deferred: true, RetryWindowMs: 9000000})
	if err := json.Unmarshal(b, &back); err != nil || back != (EventCoalescing{Deferred: true, RetryWindowMs: 9000000}) {
		t.Errorf("round trip: %+v, %v", back, err)
	}
}
