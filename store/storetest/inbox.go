package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/store"
)

// The contract of Page, InboxEnd and DropCursors: the tests Run adds to
// its list.

func page(t *testing.T, s store.Store, q store.InboxQuery) []store.Message {
	t.Helper()
	got, err := s.Page(t.Context(), q)
	if err != nil {
		t.Fatalf("Page(%s): %v", queryString(q), err)
	}
	return got
}

func queryString(q store.InboxQuery) string {
	ch := "nil"
	if q.Channel != nil {
		ch = fmt.Sprintf("%q", *q.Channel)
	}
	return fmt.Sprintf("after %d, through %d, server %q, channel %s, limit %d", q.After, q.Through, q.Server, ch, q.Limit)
}

func inboxEnd(t *testing.T, s store.Store) int64 {
	t.Helper()
	end, err := s.InboxEnd(t.Context())
	if err != nil {
		t.Fatalf("InboxEnd: %v", err)
	}
	return end
}

func ptr(s string) *string { return &s }

// filter is the messages of msgs that keep says.
func filter(msgs []store.Message, keep func(store.Message) bool) []store.Message {
	var out []store.Message
	for _, m := range msgs {
		if keep(m) {
			out = append(out, m)
		}
	}
	return out
}

// pageInbox adds an inbox of two servers' channel messages and push
// events, interleaved, and returns it in Seq order.
func pageInbox(t *testing.T, s store.Store) []store.Message {
	t.Helper()
	var all []store.Message
	for i := range 30 {
		var m store.Message
		switch i % 5 {
		case 0:
			m = message("s1", "general", fmt.Sprint(i), i)
		case 1:
			m = message("s2", "general", fmt.Sprint(i), i)
		case 2:
			m = pushEvent("s1", fmt.Sprintf("ev-%d", i), "mcpl.calendar", i)
		case 3:
			m = message("s1", "random", fmt.Sprint(i), i)
		case 4:
			m = message("s1", "general", fmt.Sprint(i), i)
		}
		all = append(all, m)
	}
	mustAdd(t, s, all[:7])
	mustAdd(t, s, all[7:])
	checkIncreasing(t, "AddMessages", msgSeqs(all))
	return all
}

// Page selects by server, by channel of a server, and a server's push
// events by the channel "", each in Seq order; a channel with no server
// is refused.
func testPageFilters(t *testing.T, s store.Store) {
	if got := page(t, s, store.InboxQuery{}); len(got) != 0 {
		t.Fatalf("Page of an empty inbox gave %d messages", len(got))
	}
	all := pageInbox(t, s)
	for _, tc := range []struct {
		q    store.InboxQuery
		keep func(store.Message) bool
	}{
		{store.InboxQuery{}, func(store.Message) bool { return true }},
		{store.InboxQuery{Server: "s1"}, func(m store.Message) bool { return m.Server == "s1" }},
		{store.InboxQuery{Server: "s2"}, func(m store.Message) bool { return m.Server == "s2" }},
		{store.InboxQuery{Server: "s1", Channel: ptr("general")}, func(m store.Message) bool { return m.Server == "s1" && m.Channel == "general" }},
		{store.InboxQuery{Server: "s2", Channel: ptr("general")}, func(m store.Message) bool { return m.Server == "s2" && m.Channel == "general" }},
		{store.InboxQuery{Server: "s1", Channel: ptr("random")}, func(m store.Message) bool { return m.Server == "s1" && m.Channel == "random" }},
		{store.InboxQuery{Server: "s1", Channel: ptr("")}, func(m store.Message) bool { return m.Server == "s1" && m.Kind == store.KindPushEvent }},
		{store.InboxQuery{Server: "s2", Channel: ptr("")}, func(store.Message) bool { return false }},
		{store.InboxQuery{Server: "s2", Channel: ptr("random")}, func(store.Message) bool { return false }},
		{store.InboxQuery{Server: "nobody"}, func(store.Message) bool { return false }},
		{store.InboxQuery{Server: "s"}, func(store.Message) bool { return false }}, // a prefix is not a server
	} {
		want := filter(all, tc.keep)
		if diff := cmp.Diff(want, page(t, s, tc.q), cmpOpts...); diff != "" {
			t.Errorf("Page(%s) (-want +got):\n%s", queryString(tc.q), diff)
		}
	}
	for _, q := range []store.InboxQuery{{Channel: ptr("general")}, {Channel: ptr("")}, {Channel: ptr(""), After: 3, Limit: 1}} {
		got, err := s.Page(t.Context(), q)
		if !errors.Is(err, store.ErrInvalid) || got != nil {
			t.Errorf("Page(%s) = %d messages, %v; want none, an error wrapping store.ErrInvalid", queryString(q), len(got), err)
		}
	}
}

// Page bounds the Seqs by After and Through and the count by Limit, 0 or
// less meaning store.DefaultPageLimit; paging on from the last Seq of each
// page reads everything once.
func testPageBounds(t *testing.T, s store.Store) {
	all := pageInbox(t, s)
	s1 := filter(all, func(m store.Message) bool { return m.Server == "s1" })
	general := filter(all, func(m store.Message) bool { return m.Server == "s1" && m.Channel == "general" })
	for _, tc := range []struct {
		q    store.InboxQuery
		want []store.Message
	}{
		{store.InboxQuery{After: all[4].Seq}, all[5:]},
		{store.InboxQuery{After: -5}, all},
		{store.InboxQuery{Through: all[4].Seq}, all[:5]},
		{store.InboxQuery{Through: -1}, all}, // 0 or less: no bound
		{store.InboxQuery{After: all[4].Seq, Through: all[9].Seq}, all[5:10]},
		{store.InboxQuery{After: all[4].Seq, Through: all[4].Seq}, nil},
		{store.InboxQuery{After: all[9].Seq, Through: all[4].Seq}, nil},
		{store.InboxQuery{After: all[29].Seq}, nil},
		{store.InboxQuery{Limit: 3}, all[:3]},
		{store.InboxQuery{After: all[27].Seq, Limit: 3}, all[28:]},
		{store.InboxQuery{After: all[4].Seq, Through: all[9].Seq, Limit: 2}, all[5:7]},
		{store.InboxQuery{Server: "s1", After: s1[3].Seq, Limit: 4}, s1[4:8]},
		{store.InboxQuery{Server: "s1", Through: s1[5].Seq}, s1[:6]},
		{store.InboxQuery{Server: "s1", Channel: ptr("general"), After: general[2].Seq, Through: general[8].Seq, Limit: 3}, general[3:6]},
		{store.InboxQuery{Server: "s1", Channel: ptr("general"), After: general[2].Seq + 1, Through: general[8].Seq - 1}, general[3:8]},
	} {
		if diff := cmp.Diff(tc.want, page(t, s, tc.q), cmpOpts...); diff != "" {
			t.Errorf("Page(%s) (-want +got):\n%s", queryString(tc.q), diff)
		}
	}
	for _, q := range []store.InboxQuery{{Limit: 4}, {Server: "s1", Limit: 3}, {Server: "s1", Channel: ptr("general"), Limit: 2}, {Server: "s1", Channel: ptr(""), Limit: 1}} {
		var got []store.Message
		for {
			p := page(t, s, q)
			if len(p) > q.Limit {
				t.Fatalf("Page(%s) gave %d messages", queryString(q), len(p))
			}
			if len(p) == 0 {
				break
			}
			got = append(got, p...)
			q.After = p[len(p)-1].Seq
		}
		want := filter(all, func(m store.Message) bool {
			return (q.Server == "" || m.Server == q.Server) && (q.Channel == nil || m.Channel == *q.Channel)
		})
		if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
			t.Errorf("paging with %s (-want +got):\n%s", queryString(q), diff)
		}
	}

	// The default limit.
	more := make([]store.Message, store.DefaultPageLimit)
	for i := range more {
		more[i] = message("s3", "c", fmt.Sprint(i), i)
	}
	mustAdd(t, s, more)
	for _, q := range []store.InboxQuery{{}, {Limit: -1}, {Server: "s3"}, {Server: "s3", Channel: ptr("c"), After: more[0].Seq - 1}} {
		if got := page(t, s, q); len(got) != store.DefaultPageLimit {
			t.Errorf("Page(%s) gave %d messages, want store.DefaultPageLimit, %d", queryString(q), len(got), store.DefaultPageLimit)
		}
	}
	if got := page(t, s, store.InboxQuery{Server: "s3", Limit: store.DefaultPageLimit + 1}); len(got) != store.DefaultPageLimit {
		t.Errorf("Page(s3's, limit above them) gave %d messages, want all %d", len(got), store.DefaultPageLimit)
	}
}

// Page with an ended context, or on a closed store, reads nothing.
func testPageCanceled(t *testing.T, s store.Store) {
	pageInbox(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if got, err := s.Page(ctx, store.InboxQuery{}); !errors.Is(err, context.Canceled) || got != nil {
		t.Errorf("Page with an ended context = %d messages, %v; want none, context.Canceled", len(got), err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got, err := s.Page(t.Context(), store.InboxQuery{Server: "s1"}); !errors.Is(err, store.ErrClosed) || got != nil {
		t.Errorf("Page after Close = %d messages, %v; want none, store.ErrClosed", len(got), err)
	}
}

// InboxEnd is the highest Seq in the inbox, 0 for none; a message not
// added does not move it.
func testInboxEnd(t *testing.T, s store.Store) {
	if end := inboxEnd(t, s); end != 0 {
		t.Fatalf("InboxEnd of an empty inbox = %d, want 0", end)
	}
	msgs := []store.Message{message("s", "c", "1", 1), pushEvent("s", "ev", "", 2)}
	mustAdd(t, s, msgs)
	if end := inboxEnd(t, s); end != msgs[1].Seq {
		t.Fatalf("InboxEnd = %d, want the last added, %d", end, msgs[1].Seq)
	}
	mustAdd(t, s, []store.Message{message("s", "c", "1", 3)})
	if end := inboxEnd(t, s); end != msgs[1].Seq {
		t.Fatalf("InboxEnd after adding a duplicate = %d, want it unchanged at %d", end, msgs[1].Seq)
	}
	all := append(msgs, pageInbox(t, s)...)
	if end := inboxEnd(t, s); end != all[len(all)-1].Seq {
		t.Fatalf("InboxEnd = %d, want the last added, %d", end, all[len(all)-1].Seq)
	}
	if got := messages(t, s, 0); got[len(got)-1].Seq != all[len(all)-1].Seq {
		t.Fatalf("Messages ends at %d, InboxEnd at %d", got[len(got)-1].Seq, all[len(all)-1].Seq)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.InboxEnd(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("InboxEnd with an ended context: %v, want context.Canceled", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if end, err := s.InboxEnd(t.Context()); !errors.Is(err, store.ErrClosed) || end != 0 {
		t.Errorf("InboxEnd after Close = %d, %v; want 0, store.ErrClosed", end, err)
	}
}

// DropCursors removes the cursors it names and ignores names with none;
// a dropped cursor can be set again; on a closed store it fails with
// store.ErrClosed.
func testDropCursors(t *testing.T, s store.Store) {
	mustRecord(t, s, []store.Entry{entry("a", 1)}, map[string]int64{"a": 1, "b": 2, "c": 3, "a@s/ch": 4})
	if err := s.DropCursors(t.Context()); err != nil {
		t.Fatalf("DropCursors(): %v", err)
	}
	if err := s.DropCursors(t.Context(), "a@s/ch", "missing", "", "a@s/ch"); err != nil {
		t.Fatalf("DropCursors: %v", err)
	}
	if diff := cmp.Diff(map[string]int64{"a": 1, "b": 2, "c": 3}, cursors(t, s)); diff != "" {
		t.Fatalf("cursors after DropCursors (-want +got):\n%s", diff)
	}
	if err := s.DropCursors(t.Context(), "c", "a"); err != nil {
		t.Fatalf("DropCursors: %v", err)
	}
	if diff := cmp.Diff(map[string]int64{"b": 2}, cursors(t, s)); diff != "" {
		t.Fatalf("cursors after DropCursors (-want +got):\n%s", diff)
	}
	if got := history(t, s, "a"); len(got) != 1 {
		t.Fatalf("DropCursors changed the history of a: %d entries", len(got))
	}
	mustRecord(t, s, nil, map[string]int64{"a": 7})
	if diff := cmp.Diff(map[string]int64{"a": 7, "b": 2}, cursors(t, s)); diff != "" {
		t.Fatalf("cursors after setting a dropped one again (-want +got):\n%s", diff)
	}

	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, names := range [][]string{{"b"}, nil} {
		if err := s.DropCursors(t.Context(), names...); !errors.Is(err, store.ErrClosed) {
			t.Errorf("DropCursors(%q) after Close: %v, want store.ErrClosed", names, err)
		}
	}
}

// DropCursors with an ended context drops nothing.
func testDropCursorsCanceled(t *testing.T, s store.Store) {
	mustRecord(t, s, nil, map[string]int64{"a": 1})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.DropCursors(ctx, "a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("DropCursors with an ended context: %v, want context.Canceled", err)
	}
	if diff := cmp.Diff(map[string]int64{"a": 1}, cursors(t, s)); diff != "" {
		t.Fatalf("cursors after a canceled DropCursors (-want +got):\n%s", diff)
	}
}

// A store reopened on the same data pages its inbox as before, knows its
// end, and keeps dropped cursors dropped.
func testReopenInbox(t *testing.T, s store.Store, reopen func(t *testing.T, s store.Store) store.Store) {
	all := pageInbox(t, s)
	mustRecord(t, s, nil, map[string]int64{"a": 1, "b": 2})
	if err := s.DropCursors(t.Context(), "a"); err != nil {
		t.Fatalf("DropCursors: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	r := reopen(t, s)
	if end := inboxEnd(t, r); end != all[len(all)-1].Seq {
		t.Errorf("reopened store's InboxEnd = %d, want %d", end, all[len(all)-1].Seq)
	}
	q := store.InboxQuery{Server: "s1", Channel: ptr(""), Limit: 2}
	want := filter(all, func(m store.Message) bool { return m.Server == "s1" && m.Kind == store.KindPushEvent })[:2]
	if diff := cmp.Diff(want, page(t, r, q), cmpOpts...); diff != "" {
		t.Errorf("reopened store's Page(%s) (-before +after):\n%s", queryString(q), diff)
	}
	if diff := cmp.Diff(map[string]int64{"b": 2}, cursors(t, r)); diff != "" {
		t.Errorf("reopened store's cursors (-want +got):\n%s", diff)
	}
}
