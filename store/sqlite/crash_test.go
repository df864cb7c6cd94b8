package sqlite

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/store"
	"github.com/mcpl-go/mcpl/store/storetest"
)

// The crash test: a child process (this test binary, in TestCrashChild)
// writes to a store from several goroutines and prints a line for every
// write acknowledged (the call returned nil); the parent SIGKILLs it at a
// random point, reopens the file and checks that every acknowledged write
// is there, and that no call is there in part. The iterations share one
// file, so each also recovers the file the previous crash left.
//
// The child prints
//
//	A <call> <seq>...    an Append of len(seq) records, acknowledged
//	M <call> <seq>...    an AddMessages, acknowledged; 0 for a duplicate
//	R <call> <seq>...    a Record of len(seq) entries, acknowledged
//
// A record's Source is "<call> <i> <n>": record i of the call's n. A
// message's id is "<call>.<i>" and its ThreadID "<call>/<n>", n counting
// the call's new messages (a call may also resend an older message, which
// is not added again). A Record's call is "<cursor>/<pos>": it sets the
// cursor to pos (each cursor is one goroutine's, which counts pos up from
// 1) and records entries alternating between the conversations
// crashConversations, each with the body crashEntry.

const (
	crashFileEnv = "MCPL_STORE_CRASH_FILE"
	crashRunEnv  = "MCPL_STORE_CRASH_RUN"
	crashSeedEnv = "MCPL_STORE_CRASH_SEED"
)

// crashConversations are the conversations the child records in.
var crashConversations = [...]string{"conv0", "conv1"}

// crashEntry is the body of a crash test's history entry: entry I of the
// N of the Record that set Cursor to Pos.
type crashEntry struct {
	Cursor string `json:"cursor"`
	Pos    int64  `json:"pos"`
	I      int    `json:"i"`
	N      int    `json:"n"`
}

func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashFileEnv)
	if path == "" {
		t.Skip("the crash test's child; runs only under TestCrash")
	}
	// The child dies with its parent (stdin closes), and on its own after
	// a while in case nobody kills it.
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(2)
	}()
	time.AfterFunc(30*time.Second, func() { os.Exit(3) })

	run := os.Getenv(crashRunEnv)
	d, err := Open(path, nil)
	if err != nil {
		fmt.Printf("ERR %v\n", err)
		os.Exit(1)
	}
	var mu sync.Mutex
	say := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		os.Stdout.WriteString(line) // one write: the line is out, or not
	}
	say("open\n")
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Go(func() {
			for k := 0; ; k++ {
				id := fmt.Sprintf("r%sg%dc%d", run, g, k)
				n := 1 + k%4
				recs := make([]store.Record, n)
				for i := range recs {
					recs[i] = store.Record{Kind: store.KindDecision, Server: "s", Channel: fmt.Sprintf("g%d", g),
						State: store.Open, Source: fmt.Sprintf("%s %d %d", id, i, n), At: time.Now()}
				}
				out, err := d.Append(ctx, recs...)
				if err != nil {
					say(fmt.Sprintf("ERR %v\n", err))
					return
				}
				var b strings.Builder
				fmt.Fprintf(&b, "A %s", id)
				for _, r := range out {
					fmt.Fprintf(&b, " %d", r.Seq)
				}
				say(b.String() + "\n")
			}
		})
	}
	wg.Go(func() {
		var prev store.Message
		for k := 0; ; k++ {
			id := fmt.Sprintf("r%sm%d", run, k)
			n := 1 + k%3
			var msgs []store.Message
			for i := range n {
				msgs = append(msgs, store.Message{Server: "s", Channel: "c", MessageID: fmt.Sprintf("%s.%d", id, i),
					ThreadID: fmt.Sprintf("%s/%d", id, n), Body: []byte(`{"k":1}`), At: time.Now()})
			}
			if k%5 == 4 {
				msgs = append(msgs, prev) // an older one again
			}
			added, err := d.AddMessages(ctx, msgs)
			if err != nil {
				say(fmt.Sprintf("ERR %v\n", err))
				return
			}
			var b strings.Builder
			fmt.Fprintf(&b, "M %s", id)
			for i, m := range msgs {
				if !added[i] {
					m.Seq = 0
				}
				fmt.Fprintf(&b, " %d", m.Seq)
			}
			say(b.String() + "\n")
			prev = msgs[0]
			prev.Seq = 0
		}
	})
	for g := range 2 {
		wg.Go(func() {
			name := fmt.Sprintf("r%sh%d", run, g)
			for pos := int64(1); ; pos++ {
				n := 1 + int(pos)%3
				entries := make([]store.Entry, n)
				for i := range entries {
					body, _ := json.Marshal(crashEntry{Cursor: name, Pos: pos, I: i, N: n})
					entries[i] = store.Entry{Conversation: crashConversations[i%len(crashConversations)], Body: body, At: time.Now()}
				}
				out, err := d.Record(ctx, entries, map[string]int64{name: pos})
				if err != nil {
					say(fmt.Sprintf("ERR %v\n", err))
					return
				}
				var b strings.Builder
				fmt.Fprintf(&b, "R %s/%d", name, pos)
				for _, e := range out {
					fmt.Fprintf(&b, " %d", e.Seq)
				}
				say(b.String() + "\n")
			}
		})
	}
	wg.Wait() // only if a write failed
	os.Exit(1)
}

// acked is what the children acknowledged: call -> Seqs, and each
// cursor's furthest position.
type acked struct {
	records, messages, entries map[string][]int64
	cursors                    map[string]int64
}

func TestCrash(t *testing.T) {
	if os.Getenv(crashFileEnv) != "" {
		t.Skip("in the child")
	}
	iterations, budget := 20, 15*time.Second
	if testing.Short() {
		iterations, budget = 4, 5*time.Second
	}
	rng := crashRand(t, 0)
	path := filepath.Join(t.TempDir(), "state", "host.db")
	all := acked{records: map[string][]int64{}, messages: map[string][]int64{}, entries: map[string][]int64{}, cursors: map[string]int64{}}
	start := time.Now()
	done := 0
	for ; done < iterations && time.Since(start) < budget; done++ {
		// -1: kill at once, maybe before the child has created the file;
		// 0: once it has opened it; n: after n acknowledged writes.
		killAfter := rng.IntN(302) - 1
		crashChild(t, path, done, killAfter, all)
		verify(t, path, all)
	}
	t.Logf("%d crashes in %v; %d calls appended, %d added and %d recorded acknowledged", done, time.Since(start).Round(time.Millisecond), len(all.records), len(all.messages), len(all.entries))
	if done < 3 {
		t.Fatalf("only %d crashes within %v", done, budget)
	}
}

// crashChild runs one child, kills it after killAfter acknowledged writes,
// and adds what it acknowledged to all.
func crashChild(t *testing.T, path string, run, killAfter int, all acked) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
	cmd.Env = append(os.Environ(), crashFileEnv+"="+path, crashRunEnv+"="+strconv.Itoa(run))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	kill := func() {
		if !killed {
			killed = true
			cmd.Process.Kill() // SIGKILL
		}
	}
	// Reap the child whatever happens; a child that hangs is killed.
	hung := time.AfterFunc(20*time.Second, func() { cmd.Process.Kill() })
	defer func() {
		hung.Stop()
		kill()
		stdin.Close()
		cmd.Wait()
	}()

	if killAfter < 0 {
		kill()
	}
	writes := 0
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "open":
			if killAfter == 0 {
				kill()
			}
			continue
		case "ERR":
			t.Fatalf("child %d: %s", run, sc.Text())
		case "A", "M", "R":
		default:
			continue // the test framework's own lines
		}
		if len(f) < 3 {
			t.Fatalf("child %d: short line %q", run, sc.Text())
		}
		seqs := make([]int64, len(f)-2)
		for i, s := range f[2:] {
			if seqs[i], err = strconv.ParseInt(s, 10, 64); err != nil {
				t.Fatalf("child %d: line %q: %v", run, sc.Text(), err)
			}
		}
		switch f[0] {
		case "A":
			all.records[f[1]] = seqs
		case "M":
			all.messages[f[1]] = seqs
		case "R":
			all.entries[f[1]] = seqs
			name, p, _ := strings.Cut(f[1], "/")
			pos, err := strconv.ParseInt(p, 10, 64)
			if err != nil {
				t.Fatalf("child %d: line %q: %v", run, sc.Text(), err)
			}
			all.cursors[name] = max(all.cursors[name], pos)
		}
		writes++
		if writes == killAfter {
			kill()
		}
	}
	if !killed {
		t.Fatalf("child %d ended by itself after %d writes; stderr:\n%s", run, writes, stderr.String())
	}
}

// verify reopens the file and checks it against what was acknowledged.
func verify(t *testing.T, path string, all acked) {
	t.Helper()
	if _, err := os.Stat(path); os.IsNotExist(err) && len(all.records) == 0 {
		return // killed before it made the file
	}
	d, err := Open(path, nil)
	if err != nil {
		t.Fatalf("reopen after the crash: %v", err)
	}
	defer d.Close()
	ctx := t.Context()

	// The log: Seqs increasing; each call whole, in order, at consecutive
	// Seqs (one writer, one transaction a batch), or absent.
	type present struct {
		n    int
		seqs []int64
	}
	calls := map[string]*present{}
	var last int64
	if err := d.Replay(ctx, func(r store.Record) error {
		if r.Seq <= last {
			return fmt.Errorf("Seq %d after %d", r.Seq, last)
		}
		last = r.Seq
		var id string
		var i, n int
		if _, err := fmt.Sscanf(r.Source, "%s %d %d", &id, &i, &n); err != nil {
			return fmt.Errorf("record %d: source %q: %v", r.Seq, r.Source, err)
		}
		p := calls[id]
		if p == nil {
			p = &present{n: n}
			calls[id] = p
		}
		if i != len(p.seqs) || i > 0 && r.Seq != p.seqs[i-1]+1 {
			return fmt.Errorf("call %s: record %d of %d at Seq %d after Seqs %v", id, i, n, r.Seq, p.seqs)
		}
		p.seqs = append(p.seqs, r.Seq)
		return nil
	}); err != nil {
		t.Fatalf("replay after the crash: %v", err)
	}
	for id, p := range calls {
		if len(p.seqs) != p.n {
			t.Errorf("call %s is in the log in part: %d of its %d records", id, len(p.seqs), p.n)
		}
	}
	for id, seqs := range all.records {
		p := calls[id]
		if p == nil || fmt.Sprint(p.seqs) != fmt.Sprint(seqs) {
			t.Errorf("acknowledged call %s at Seqs %v: the log has %v", id, seqs, p)
		}
	}

	// The inbox: Seqs increasing; each call's new messages all there or
	// none; every acknowledged message there at its Seq.
	bySeq := map[int64]string{}
	newOf := map[string]int{}  // call -> new messages present
	wantOf := map[string]int{} // call -> new messages it had
	last = 0
	if err := d.Messages(ctx, 0, func(m store.Message) error {
		if m.Seq <= last {
			return fmt.Errorf("Seq %d after %d", m.Seq, last)
		}
		last = m.Seq
		bySeq[m.Seq] = m.MessageID
		id, n, ok := strings.Cut(m.ThreadID, "/")
		if !ok {
			return fmt.Errorf("message %d: thread %q", m.Seq, m.ThreadID)
		}
		newOf[id]++
		wantOf[id], _ = strconv.Atoi(n)
		return nil
	}); err != nil {
		t.Fatalf("reading the inbox after the crash: %v", err)
	}
	for id, n := range newOf {
		if n != wantOf[id] {
			t.Errorf("call %s is in the inbox in part: %d of its %d messages", id, n, wantOf[id])
		}
	}
	for id, seqs := range all.messages {
		for i, seq := range seqs {
			if seq == 0 {
				continue // a duplicate, not added
			}
			if want := fmt.Sprintf("%s.%d", id, i); bySeq[seq] != want {
				t.Errorf("acknowledged message %s at Seq %d: the inbox has %q there", want, seq, bySeq[seq])
			}
		}
	}
	verifyHistory(t, d, all)
	if t.Failed() {
		t.FailNow()
	}
}

// verifyHistory checks the histories and cursors against what was
// acknowledged: each Record's entries all there, at consecutive Seqs, with
// its cursor, or none of it; every acknowledged one there at its Seqs; and
// every cursor as far as acknowledged at least.
func verifyHistory(t *testing.T, d *DB, all acked) {
	t.Helper()
	ctx := t.Context()
	var entries []store.Entry
	for _, conv := range crashConversations {
		if err := d.History(ctx, conv, func(e store.Entry) error {
			entries = append(entries, e)
			return nil
		}); err != nil {
			t.Fatalf("reading the history of %s after the crash: %v", conv, err)
		}
	}
	slices.SortFunc(entries, func(a, b store.Entry) int { return cmp.Compare(a.Seq, b.Seq) })
	type present struct {
		n    int
		seqs []int64
	}
	calls := map[string]*present{} // "<cursor>/<pos>"
	top := map[string]int64{}      // cursor -> the furthest pos with entries
	for k, e := range entries {
		if k > 0 && e.Seq == entries[k-1].Seq {
			t.Fatalf("Seq %d twice in the histories", e.Seq)
		}
		var ce crashEntry
		if err := json.Unmarshal(e.Body, &ce); err != nil {
			t.Fatalf("entry %d: body %q: %v", e.Seq, e.Body, err)
		}
		if want := crashConversations[ce.I%len(crashConversations)]; e.Conversation != want {
			t.Errorf("entry %d (%+v) is in %s, want %s", e.Seq, ce, e.Conversation, want)
		}
		id := fmt.Sprintf("%s/%d", ce.Cursor, ce.Pos)
		p := calls[id]
		if p == nil {
			p = &present{n: ce.N}
			calls[id] = p
		}
		if ce.I != len(p.seqs) || ce.I > 0 && e.Seq != p.seqs[ce.I-1]+1 {
			t.Fatalf("call %s: entry %d of %d at Seq %d after Seqs %v", id, ce.I, ce.N, e.Seq, p.seqs)
		}
		p.seqs = append(p.seqs, e.Seq)
		top[ce.Cursor] = max(top[ce.Cursor], ce.Pos)
	}
	for id, p := range calls {
		if len(p.seqs) != p.n {
			t.Errorf("call %s is in the histories in part: %d of its %d entries", id, len(p.seqs), p.n)
		}
	}
	for id, seqs := range all.entries {
		if p := calls[id]; p == nil || fmt.Sprint(p.seqs) != fmt.Sprint(seqs) {
			t.Errorf("acknowledged Record %s at Seqs %v: the histories have %v", id, seqs, p)
		}
	}

	cursors, err := d.Cursors(ctx)
	if err != nil {
		t.Fatalf("reading the cursors after the crash: %v", err)
	}
	for name, pos := range all.cursors {
		if cursors[name] < pos {
			t.Errorf("cursor %s is at %d, acknowledged at %d", name, cursors[name], pos)
		}
	}
	// A cursor and its Record's entries went in together: each cursor is
	// at the furthest of its Records there, and every Record up to it is
	// there (its goroutine made them one after another).
	for name, pos := range cursors {
		if top[name] != pos {
			t.Errorf("cursor %s is at %d, but the histories' furthest Record of it is at %d", name, pos, top[name])
		}
		for p := int64(1); p <= pos; p++ {
			if calls[fmt.Sprintf("%s/%d", name, p)] == nil {
				t.Errorf("cursor %s is at %d, but its Record at %d is not in the histories", name, pos, p)
			}
		}
	}
	for name := range top {
		if _, ok := cursors[name]; !ok {
			t.Errorf("the histories have Records of cursor %s, which is not set", name)
		}
	}
}

// The compaction crash test: a child (this test binary, in
// TestCrashCompactChild) compacts a large log, keeping the newest decision
// of each channel; the parent SIGKILLs it at a random point of the
// Compact, reopens the file and checks that the log is either the whole
// log it had or the compacted one, never a mix, and folds to the same
// decisions either way. Each iteration starts from a fresh copy of the
// same log.
//
// The child prints "compacting" just before it calls Compact, and
// "compacted <n> <rebuilt>" once it returned n dropped, rebuilt saying
// whether it made the log anew (see writer.compact).

const (
	crashCompactFileEnv    = "MCPL_STORE_CRASH_COMPACT_FILE"
	crashCompactThroughEnv = "MCPL_STORE_CRASH_COMPACT_THROUGH"
)

func TestCrashCompactChild(t *testing.T) {
	path := os.Getenv(crashCompactFileEnv)
	if path == "" {
		t.Skip("the compaction crash test's child; runs only under TestCrashCompact")
	}
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(2)
	}()
	time.AfterFunc(60*time.Second, func() { os.Exit(3) })
	through, err := strconv.ParseInt(os.Getenv(crashCompactThroughEnv), 10, 64)
	if err != nil {
		fmt.Printf("ERR %v\n", err)
		os.Exit(1)
	}
	d, err := Open(path, nil)
	if err != nil {
		fmt.Printf("ERR %v\n", err)
		os.Exit(1)
	}
	var recs []store.Record
	if err := d.Replay(context.Background(), func(r store.Record) error { recs = append(recs, r); return nil }); err != nil {
		fmt.Printf("ERR %v\n", err)
		os.Exit(1)
	}
	os.Stdout.WriteString("compacting\n")
	n, err := d.Compact(context.Background(), through, storetest.NewestDecisions(recs))
	if err != nil {
		fmt.Printf("ERR %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("compacted %d %v\n", n, d.rebuilds.Load() == 1)
	select {} // until killed, or stdin closes
}

// crashRand is a crash test's randomness: the given PCG stream of a seed
// that is new each run unless crashSeedEnv sets it; a failed test logs
// the seed.
func crashRand(t *testing.T, stream uint64) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(crashSeedEnv); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s: %v", crashSeedEnv, err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d (%s=%d repeats this run)", seed, crashSeedEnv, seed)
		}
	})
	return rand.New(rand.NewPCG(seed, stream))
}

// logString is a log as the crash test compares it: each record's Seq
// and Source, which the test makes distinct.
func logString(recs []store.Record) string {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "%d %s\n", r.Seq, r.Source)
	}
	return b.String()
}

func TestCrashCompact(t *testing.T) {
	if os.Getenv(crashCompactFileEnv) != "" || os.Getenv(crashFileEnv) != "" {
		t.Skip("in a child")
	}
	records, channels, iterations := 60_000, 1_000, 8
	switch {
	case raceEnabled: // modernc.org/sqlite runs some 20 times slower
		records, iterations = 12_000, 2
	case testing.Short():
		records, iterations = 20_000, 4
	}
	rng := crashRand(t, 1)

	// The log: decisions of channels in turn, a decline now and then.
	dir := t.TempDir()
	base := filepath.Join(dir, "base.db")
	d, err := Open(base, nil)
	if err != nil {
		t.Fatal(err)
	}
	var whole []store.Record
	for i := 0; i < records; i += 1000 {
		recs := make([]store.Record, 1000)
		for j := range recs {
			n := i + j
			recs[j] = store.Record{Kind: store.KindDecision, Server: fmt.Sprintf("s%d", n%3), Channel: fmt.Sprintf("c%d", n%channels),
				State: []store.State{store.Open, store.Closed}[n%2], Source: fmt.Sprintf("r%d", n), At: time.Unix(1_780_000_000, int64(n))}
			if n%50 == 49 {
				recs[j].Kind, recs[j].State, recs[j].MessageID = store.KindDeclined, "", fmt.Sprintf("inv-%d", n)
			}
		}
		out, err := d.Append(t.Context(), recs...)
		if err != nil {
			t.Fatal(err)
		}
		whole = append(whole, out...)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	want := storetest.FoldDecisions(whole)
	keep := storetest.NewestDecisions(whole)

	// Through the end, most records go and Compact makes the log anew;
	// through the first third, most stay and it deletes ranges.
	throughs := []int64{whole[len(whole)-1].Seq, whole[len(whole)/3].Seq}
	compacted := make([]string, len(throughs))
	for k, through := range throughs {
		kept := map[int64]bool{}
		for _, seq := range keep {
			kept[seq] = true
		}
		compacted[k] = logString(slices.DeleteFunc(slices.Clone(whole), func(r store.Record) bool { return r.Seq <= through && !kept[r.Seq] }))
	}
	wholeLog := logString(whole)

	// How long a Compact takes here, one through each way, run to its end.
	took := make([]time.Duration, len(throughs))
	for k, through := range throughs {
		path := copyFile(t, base, filepath.Join(dir, fmt.Sprintf("calibrate-%d.db", k)))
		var rebuilt bool
		took[k], rebuilt = compactChild(t, path, through, -1)
		if rebuilt != (k == 0) {
			t.Fatalf("the Compact through %d made the log anew: %v; the test wants that only through the end", through, rebuilt)
		}
		if got := checkCompacted(t, path, wholeLog, compacted[k], want, fmt.Sprintf("a Compact through %d run to its end", through), nil); got != "compacted" {
			t.Fatalf("a Compact through %d run to its end left the %s log", through, got)
		}
	}
	t.Logf("a Compact through the end took %v, through the first third %v", took[0], took[1])

	outcomes := map[string]int{}
	for i := range iterations {
		k := i % len(throughs)
		// The first kill of each way comes as soon as the child says it is
		// compacting, the others at a random point up to half again as
		// long as a Compact takes.
		var delay time.Duration
		if i >= len(throughs) {
			delay = time.Duration(rng.Int64N(int64(took[k]) * 3 / 2))
		}
		path := copyFile(t, base, filepath.Join(dir, fmt.Sprintf("run-%d.db", i)))
		compactChild(t, path, throughs[k], delay)
		got := checkCompacted(t, path, wholeLog, compacted[k], want, fmt.Sprintf("run %d (through %d, killed %v after it began)", i, throughs[k], delay), func(d *DB) {
			// The whole log: compacting it again gives the compacted one.
			if _, err := d.Compact(t.Context(), throughs[k], keep); err != nil {
				t.Fatalf("run %d: Compact after the crash: %v", i, err)
			}
		})
		outcomes[got]++
		os.Remove(path)
	}
	t.Logf("%d kills during a Compact: %v", iterations, outcomes)
	if outcomes["whole"] == 0 {
		t.Errorf("no kill came before a Compact's COMMIT: the test tested nothing")
	}
}

// copyFile copies the closed store at from to to.
func copyFile(t *testing.T, from, to string) string {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(from + "-wal"); err == nil {
		t.Fatalf("%s has a -wal: it is not closed", from)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return to
}

// compactChild runs a child that compacts the log at path through
// through, and kills it delay after it says it is compacting, or lets it
// finish when delay is negative. It returns how long the Compact took
// (from the child's "compacting" to its "compacted") and whether it made
// the log anew, or 0 and false when killed.
func compactChild(t *testing.T, path string, through int64, delay time.Duration) (time.Duration, bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashCompactChild$")
	cmd.Env = append(os.Environ(), crashCompactFileEnv+"="+path, crashCompactThroughEnv+"="+strconv.FormatInt(through, 10))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	hung := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	var kill *time.Timer
	defer func() {
		hung.Stop()
		if kill != nil {
			kill.Stop()
		}
		cmd.Process.Kill()
		stdin.Close()
		cmd.Wait()
	}()
	var began time.Time
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "compacting":
			began = time.Now()
			if delay >= 0 {
				kill = time.AfterFunc(delay, func() { cmd.Process.Kill() }) // SIGKILL
			}
		case strings.HasPrefix(line, "compacted "):
			if delay < 0 {
				return time.Since(began), strings.HasSuffix(line, " true")
			}
		case strings.HasPrefix(line, "ERR "):
			t.Fatalf("child: %s", line)
		}
	}
	if delay < 0 {
		t.Fatalf("the child ended before it compacted; stderr:\n%s", stderr.String())
	}
	if began.IsZero() {
		t.Fatalf("the child ended before it began to compact; stderr:\n%s", stderr.String())
	}
	return 0, false
}

// checkCompacted reopens the store at path and checks its log is the
// whole one or the compacted one, and folds to want; it returns which
// ("whole" or "compacted"). With the whole log, it calls again (when not
// nil) and checks the log is then the compacted one.
func checkCompacted(t *testing.T, path, whole, compacted string, want map[storetest.DecisionKey]store.Record, what string, again func(*DB)) string {
	t.Helper()
	d, err := Open(path, nil)
	if err != nil {
		t.Fatalf("%s: reopen: %v", what, err)
	}
	defer d.Close()
	read := func() []store.Record {
		var recs []store.Record
		if err := d.Replay(t.Context(), func(r store.Record) error { recs = append(recs, r); return nil }); err != nil {
			t.Fatalf("%s: replay: %v", what, err)
		}
		return recs
	}
	recs := read()
	folded := storetest.FoldDecisions(recs)
	if !maps.EqualFunc(want, folded, func(a, b store.Record) bool { return a.Seq == b.Seq && a.Source == b.Source && a.State == b.State }) {
		t.Fatalf("%s: the log folds to %d decisions that are not the whole log's %d", what, len(folded), len(want))
	}
	switch logString(recs) {
	case compacted:
		return "compacted"
	case whole:
		if again != nil {
			again(d)
			if logString(read()) != compacted {
				t.Fatalf("%s: compacting the whole log again did not give the compacted one", what)
			}
		}
		return "whole"
	}
	t.Fatalf("%s: the log (%d records) is neither the whole one (%d) nor the compacted one", what, len(recs), strings.Count(whole, "\n"))
	return ""
}

// raceEnabled is set in a build with the race detector (race_test.go).
var raceEnabled bool
