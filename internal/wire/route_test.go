package wire_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/jsonrpc"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
)

// The server's request ids collide with ours (both count from 1). Inbound
// requests go to the handler and are answered with their own ids; answers
// go to our calls; neither side's id is matched against the other's.
func TestCollidingIDSpacesNeverCross(t *testing.T) {
	mux := wire.NewMux()
	mux.HandleFunc("host/echo", func(_ context.Context, r *wire.Request) (any, error) {
		return map[string]any{"handled": json.RawMessage(r.Params), "id": json.RawMessage(r.ID())}, nil
	})
	p, far, _ := pipePeer(t, wire.Options{Handler: mux})

	type result struct {
		n   int
		res map[string]int
		err error
	}
	results := make(chan result, 3)
	for n := 1; n <= 3; n++ {
		go func() {
			var res map[string]int
			err := p.Call(testCtx(t), "server/work", map[string]int{"n": n}, &res)
			results <- result{n, res, err}
		}()
	}
	// Our three requests, ids 1..3, whichever order they were written in.
	ourN := map[string]int{}
	for range 3 {
		m := far.mustRead()
		var params map[string]int
		json.Unmarshal(m.Params, &params)
		if m.Method != "server/work" {
			t.Fatalf("far end read %s", m.raw)
		}
		ourN[string(m.ID)] = params["n"]
	}
	if len(ourN) != 3 || ourN["1"] == 0 || ourN["2"] == 0 || ourN["3"] == 0 {
		t.Fatalf("our ids: %v", ourN)
	}

	// The server's own requests with ids 1, 2, 3 (and "1" and 1.0, which an
	// id matcher that reads loosely would also take for ours), interleaved
	// with the answer to our call 2.
	far.send(`{"jsonrpc":"2.0","id":1,"method":"host/echo","params":{"k":"server-1"}}`)
	far.send(`{"jsonrpc":"2.0","id":2,"result":{"for":2}}`)
	far.send(`{"jsonrpc":"2.0","id":2,"method":"host/echo","params":{"k":"server-2"}}`)
	far.send(`{"jsonrpc":"2.0","id":"1","method":"host/echo","params":{"k":"server-string-1"}}`)
	far.send(`{"jsonrpc":"2.0","id":3,"method":"host/echo","params":{"k":"server-3"}}`)
	far.send(`{"jsonrpc":"2.0","id":1.0,"method":"host/echo","params":{"k":"server-float-1"}}`)

	want := map[string]string{`1`: "server-1", `2`: "server-2", `"1"`: "server-string-1", `3`: "server-3", `1.0`: "server-float-1"}
	for range len(want) {
		m := far.mustRead()
		if m.Method != "" || m.Error != nil {
			t.Fatalf("far end expected an answer to its request, read %s", m.raw)
		}
		var res struct {
			Handled map[string]string `json:"handled"`
			ID      json.RawMessage   `json:"id"`
		}
		json.Unmarshal(m.Result, &res)
		k, ok := want[string(m.ID)]
		if !ok || res.Handled["k"] != k || string(res.ID) != string(m.ID) {
			t.Fatalf("answer %s does not match the server's request", m.raw)
		}
		delete(want, string(m.ID))
	}

	// Call 2 has its answer; 1 and 3 are still waiting despite the
	// server's requests 1 and 3.
	r := <-results
	if r.err != nil || r.n != ourN["2"] || r.res["for"] != 2 {
		t.Fatalf("first call to finish: %+v, want the one sent as id 2 (n=%d)", r, ourN["2"])
	}
	select {
	case r := <-results:
		t.Fatalf("a call finished on the server's request: %+v", r)
	default:
	}
	far.send(`{"jsonrpc":"2.0","id":3,"result":{"for":3}}`)
	far.send(`{"jsonrpc":"2.0","id":"1","result":{"for":1}}`) // an id echoed as a string
	for range 2 {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		if got := r.res["for"]; ourN[strconv.Itoa(got)] != r.n {
			t.Errorf("call n=%d got the answer for id %d", r.n, got)
		}
	}
}

// 1,000 concurrent calls, answered in shuffled order: each gets its own.
func TestThousandCallsAnsweredOutOfOrder(t *testing.T) {
	const n = 1000
	p, far, _ := pipePeer(t, wire.Options{})

	farDone := make(chan error, 1)
	go func() {
		type req struct {
			id json.RawMessage
			k  int
		}
		reqs := make([]req, 0, n)
		for range n {
			m, err := far.read()
			if err != nil {
				farDone <- err
				return
			}
			var params struct{ K int }
			json.Unmarshal(m.Params, &params)
			reqs = append(reqs, req{m.ID, params.K})
		}
		rng := rand.New(rand.NewPCG(1, 2))
		rng.Shuffle(len(reqs), func(i, j int) { reqs[i], reqs[j] = reqs[j], reqs[i] })
		for _, r := range reqs {
			far.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"k":%d,"sq":%d}}`, r.id, r.k, r.k*r.k)
		}
		farDone <- nil
	}()

	var wg sync.WaitGroup
	errs := make(chan error, n)
	for k := range n {
		wg.Go(func() {
			var res struct{ K, Sq int }
			if err := p.Call(testCtx(t), "square", map[string]int{"k": k}, &res); err != nil {
				errs <- err
				return
			}
			if res.K != k || res.Sq != k*k {
				errs <- fmt.Errorf("call k=%d got %+v", k, res)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := <-farDone; err != nil {
		t.Fatal(err)
	}
}

// Every inbound request gets exactly one answer, whatever its handler does;
// notifications get none.
func TestEveryInboundRequestAnsweredOnce(t *testing.T) {
	var late sync.WaitGroup // deferred answers still to be given
	held := make(chan func(any, error), 1)
	mux := wire.NewMux()
	mux.HandleFunc("ok", func(_ context.Context, r *wire.Request) (any, error) { return map[string]bool{"ok": true}, nil })
	mux.HandleFunc("nil", func(context.Context, *wire.Request) (any, error) { return nil, nil })
	mux.HandleFunc("err", func(context.Context, *wire.Request) (any, error) { return nil, fmt.Errorf("boom: secret detail") })
	mux.HandleFunc("rpcerr", func(context.Context, *wire.Request) (any, error) {
		return nil, jsonrpc.NewError(-32042, "no such channel", map[string]string{"channel": "x"})
	})
	mux.HandleFunc("wrapped", func(context.Context, *wire.Request) (any, error) {
		return nil, fmt.Errorf("ctx: %w", &jsonrpc.Error{Code: -32043, Message: "wrapped"})
	})
	mux.HandleFunc("notfound", func(context.Context, *wire.Request) (any, error) { return nil, wire.ErrMethodNotFound })
	mux.HandleFunc("panic", func(context.Context, *wire.Request) (any, error) { panic("handler bug") })
	mux.HandleFunc("typednil", func(context.Context, *wire.Request) (any, error) {
		var e *jsonrpc.Error
		return nil, e
	})
	mux.HandleFunc("chan", func(context.Context, *wire.Request) (any, error) { return make(chan int), nil })
	mux.HandleFunc("badjson", func(context.Context, *wire.Request) (any, error) { return json.RawMessage(`{bad`), nil })
	mux.HandleFunc("marshalpanic", func(context.Context, *wire.Request) (any, error) { return panicky{}, nil })
	mux.HandleFunc("defer-twice", func(_ context.Context, r *wire.Request) (any, error) {
		reply := r.Defer()
		late.Add(1)
		go func() {
			defer late.Done()
			reply("first", nil)
			reply("second", nil)
			reply(nil, fmt.Errorf("third"))
		}()
		return "ignored", nil
	})
	mux.HandleFunc("defer-race", func(_ context.Context, r *wire.Request) (any, error) {
		reply := r.Defer()
		late.Add(2)
		for i := range 2 {
			go func() { defer late.Done(); reply(i, nil) }()
		}
		return nil, nil
	})
	// Deferred, then handed on to a goroutine that defers it again (as a
	// request held until the policy settles is decided on another
	// goroutine): no race with the dispatcher, one answer.
	mux.HandleFunc("defer-again", func(_ context.Context, r *wire.Request) (any, error) {
		r.Defer()
		late.Add(1)
		go func() { defer late.Done(); r.Defer()("again", nil) }()
		return nil, nil
	})
	mux.HandleFunc("defer-error", func(_ context.Context, r *wire.Request) (any, error) {
		reply := r.Defer()
		late.Add(1)
		go func() { defer late.Done(); reply(nil, &jsonrpc.Error{Code: -32044, Message: "later"}) }()
		return nil, nil
	})
	mux.HandleFunc("defer-then-panic", func(_ context.Context, r *wire.Request) (any, error) {
		if !r.IsNotification() {
			held <- r.Defer()
		}
		panic("after defer")
	})
	mux.HandleFunc("barrier", func(_ context.Context, r *wire.Request) (any, error) {
		// The deferred answer held past its handler's panic is given now,
		// and must be dropped.
		(<-held)("too late", nil)
		late.Wait()
		return "barrier", nil
	})
	p, far, rec := pipePeer(t, wire.Options{Handler: mux})

	want := map[string]func(m wireMsg) bool{
		`"ok"`:           func(m wireMsg) bool { return string(m.Result) == `{"ok":true}` },
		`"nil"`:          func(m wireMsg) bool { return string(m.Result) == `null` && m.Error == nil },
		`"err"`:          func(m wireMsg) bool { return isCode(m, -32603) && !strings.Contains(m.raw, "secret") },
		`"rpcerr"`:       func(m wireMsg) bool { return isCode(m, -32042) && string(m.Error.Data) == `{"channel":"x"}` },
		`"wrapped"`:      func(m wireMsg) bool { return isCode(m, -32043) },
		`"notfound"`:     func(m wireMsg) bool { return isCode(m, -32601) },
		`"unknown"`:      func(m wireMsg) bool { return isCode(m, -32601) },
		`"panic"`:        func(m wireMsg) bool { return isCode(m, -32603) && !strings.Contains(m.raw, "handler bug") },
		`"typednil"`:     func(m wireMsg) bool { return isCode(m, -32603) },
		`"chan"`:         func(m wireMsg) bool { return isCode(m, -32603) },
		`"badjson"`:      func(m wireMsg) bool { return isCode(m, -32603) },
		`"marshalpanic"`: func(m wireMsg) bool { return isCode(m, -32603) },
		`"defer-twice"`:  func(m wireMsg) bool { return string(m.Result) == `"first"` },
		`"defer-race"`:   func(m wireMsg) bool { return string(m.Result) == `0` || string(m.Result) == `1` },
		`"defer-error"`:  func(m wireMsg) bool { return isCode(m, -32044) },
		`"defer-again"`:  func(m wireMsg) bool { return string(m.Result) == `"again"` },
		`"defer-then-panic"`: func(m wireMsg) bool {
			return isCode(m, -32603)
		},
		`"barrier"`: func(m wireMsg) bool { return string(m.Result) == `"barrier"` },
	}
	for _, id := range []string{"ok", "nil", "err", "rpcerr", "wrapped", "notfound", "unknown", "panic", "typednil",
		"chan", "badjson", "marshalpanic", "defer-twice", "defer-race", "defer-again", "defer-error", "defer-then-panic"} {
		method := id
		if id == "unknown" {
			method = "no/such/method"
		}
		far.sendf(`{"jsonrpc":"2.0","id":%q,"method":%q,"params":{}}`, id, method)
		// The same as a notification: handled, never answered.
		far.sendf(`{"jsonrpc":"2.0","method":%q,"params":{}}`, method)
	}
	far.send(`{"jsonrpc":"2.0","id":"barrier","method":"barrier"}`)

	got := map[string]int{}
	for got[`"barrier"`] == 0 {
		m := far.mustRead()
		got[string(m.ID)]++
		if check, ok := want[string(m.ID)]; !ok || !check(m) {
			t.Errorf("unexpected answer %s", m.raw)
		}
	}
	// The connection is alive: a call of ours still works.
	errc := make(chan error, 1)
	go func() { errc <- p.Call(testCtx(t), "after", nil, nil) }()
	m := far.mustRead()
	far.sendf(`{"jsonrpc":"2.0","id":%s,"result":true}`, m.ID)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	// Nothing more arrives: close and drain what the pipe still holds.
	p.Close()
	for {
		m, err := far.read()
		if err != nil {
			break
		}
		got[string(m.ID)]++
		t.Errorf("extra message after the barrier: %s", m.raw)
	}
	for id := range want {
		if got[id] != 1 {
			t.Errorf("request %s answered %d times", id, got[id])
		}
	}

	// Each failure left an operator log line; its detail was never sent.
	wantAttrs(t, logFor(t, rec, "handler failed", `"err"`), map[string]any{"method": "err", "error": "boom: secret detail"})
	wantAttrs(t, logFor(t, rec, "handler panicked", `"panic"`), map[string]any{"method": "panic", "panic": "handler bug"})
	if s := logFor(t, rec, "handler panicked", `"panic"`).Attrs["stack"].String(); !strings.Contains(s, "goroutine") {
		t.Errorf("panic log has no stack: %q", s)
	}
	logFor(t, rec, "handler panicked", `"defer-then-panic"`)
	if n := len(rec.Find("handler's result could not be encoded")); n != 3 {
		t.Errorf("%d encoding failures logged, want 3 (chan, badjson, marshalpanic)", n)
	}
}

type panicky struct{}

func (panicky) MarshalJSON() ([]byte, error) { panic("MarshalJSON bug") }

func isCode(m wireMsg, code int64) bool {
	return m.Error != nil && m.Error.Code == code && m.Result == nil
}

// logFor returns the record msg logged for the request with raw id id.
func logFor(t *testing.T, rec *recorder, msg, id string) logRec {
	t.Helper()
	for _, r := range rec.Find(msg) {
		if r.Attrs["id"].String() == id {
			return r
		}
	}
	t.Fatalf("no log %q for id %s:\n%s", msg, id, rec.Dump())
	return logRec{}
}

// Inbound messages reach the handler in arrival order, one at a time; a
// handler that defers its answer does not hold up the next message.
func TestDispatchOrderAndDefer(t *testing.T) {
	var (
		mu    sync.Mutex
		order []string
		busy  bool
	)
	release := make(chan struct{})
	h := wire.HandlerFunc(func(_ context.Context, r *wire.Request) (any, error) {
		mu.Lock()
		if busy {
			t.Error("handler called while another call was running")
		}
		busy = true
		order = append(order, r.Method)
		mu.Unlock()
		defer func() { mu.Lock(); busy = false; mu.Unlock() }()
		if r.Method == "slow" {
			reply := r.Defer()
			go func() { <-release; reply("slow done", nil) }()
		}
		return r.Method, nil
	})
	_, far, _ := pipePeer(t, wire.Options{Handler: h})

	far.send(`{"jsonrpc":"2.0","id":0,"method":"slow"}`)
	var sent []string
	for i := range 100 {
		method := fmt.Sprintf("m%03d", i)
		sent = append(sent, method)
		if i%3 == 0 {
			far.sendf(`{"jsonrpc":"2.0","method":%q}`, method)
		} else {
			far.sendf(`{"jsonrpc":"2.0","id":%d,"method":%q}`, i+1, method)
		}
	}
	// Every request after the slow one is answered while it still waits.
	for i := range 100 {
		if i%3 == 0 {
			continue
		}
		m := far.mustRead()
		if string(m.ID) != strconv.Itoa(i+1) || string(m.Result) != strconv.Quote(sent[i]) {
			t.Fatalf("answer %d out of order: %s", i, m.raw)
		}
	}
	close(release)
	if m := far.mustRead(); string(m.ID) != "0" || string(m.Result) != `"slow done"` {
		t.Fatalf("deferred answer: %s", m.raw)
	}
	// The last message sent was a notification, which gets no answer: a
	// request after it, once answered, shows everything before is handled.
	far.send(`{"jsonrpc":"2.0","id":1000,"method":"last"}`)
	if m := far.mustRead(); string(m.ID) != "1000" {
		t.Fatalf("answer to the last request: %s", m.raw)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(order, ","); got != "slow,"+strings.Join(sent, ",")+",last" {
		t.Errorf("handled in order %s", got)
	}
}

// A handler that panics is contained: its request gets -32603 and the
// connection carries on, both ways.
func TestHandlerPanicContained(t *testing.T) {
	h := wire.HandlerFunc(func(_ context.Context, r *wire.Request) (any, error) {
		if r.Method == "boom" {
			var m map[string]int
			m["x"] = 1 // a runtime panic
		}
		return "fine", nil
	})
	p, far, rec := pipePeer(t, wire.Options{Handler: h})
	far.send(`{"jsonrpc":"2.0","id":7,"method":"boom"}`)
	far.send(`{"jsonrpc":"2.0","method":"boom"}`)
	far.send(`{"jsonrpc":"2.0","id":8,"method":"after"}`)
	if m := far.mustRead(); string(m.ID) != "7" || !isCode(m, jsonrpc.CodeInternalError) {
		t.Fatalf("panicking request answered %s", m.raw)
	}
	if m := far.mustRead(); string(m.ID) != "8" || string(m.Result) != `"fine"` {
		t.Fatalf("next request answered %s", m.raw)
	}
	if n := len(rec.Find("handler panicked")); n != 2 {
		t.Errorf("%d panics logged, want 2", n)
	}
	errc := make(chan error, 1)
	go func() { errc <- p.Call(testCtx(t), "ping", nil, nil) }()
	m := far.mustRead()
	far.sendf(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
		t.Fatal("the connection ended")
	default:
	}
}

// With no handler, or a Mux without the method, a request gets -32601
// naming nothing but the method; a notification gets nothing and logs
// nothing above debug.
func TestUnknownMethod(t *testing.T) {
	for _, h := range []wire.Handler{nil, wire.NewMux()} {
		_, far, rec := pipePeer(t, wire.Options{Handler: h})
		far.send(`{"jsonrpc":"2.0","method":"x/notified"}`)
		far.send(`{"jsonrpc":"2.0","id":"a","method":"x/unknown","params":[1]}`)
		m := far.mustRead()
		if string(m.ID) != `"a"` || !isCode(m, jsonrpc.CodeMethodNotFound) || m.Error.Message != "method not found: x/unknown" {
			t.Fatalf("answered %s", m.raw)
		}
		if w := rec.AtLeast(slog.LevelInfo); len(w) != 0 {
			t.Errorf("an unknown method logged:\n%s", rec.Dump())
		}
	}
}

// Beyond MaxQueued, a request is refused with CodeOverloaded and a
// notification dropped, each logged; the reader keeps answering our calls.
func TestInboundQueueFull(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	h := wire.HandlerFunc(func(_ context.Context, r *wire.Request) (any, error) {
		if r.Method == "block" {
			close(started)
			<-release
		}
		return r.Method, nil
	})
	p, far, rec := pipePeer(t, wire.Options{Handler: h, MaxQueued: 2})
	far.send(`{"jsonrpc":"2.0","id":1,"method":"block"}`)
	<-started
	far.send(`{"jsonrpc":"2.0","id":2,"method":"q"}`)
	far.send(`{"jsonrpc":"2.0","id":3,"method":"q"}`)
	far.send(`{"jsonrpc":"2.0","id":4,"method":"over"}`)
	far.send(`{"jsonrpc":"2.0","method":"over-notified"}`)
	m := far.mustRead()
	if string(m.ID) != "4" || !isCode(m, wire.CodeOverloaded) {
		t.Fatalf("the request over the bound was answered %s", m.raw)
	}
	// Our call is answered while the handler is still blocked.
	errc := make(chan error, 1)
	go func() { errc <- p.Call(testCtx(t), "ping", nil, nil) }()
	m = far.mustRead()
	far.sendf(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	close(release)
	for _, id := range []string{"1", "2", "3"} {
		if m := far.mustRead(); string(m.ID) != id || m.Error != nil {
			t.Fatalf("queued request answered %s, want id %s", m.raw, id)
		}
	}
	rec.One(t, "inbound queue full; request refused")
	rec.One(t, "inbound queue full; notification dropped")
}

// The handler's context ends when the connection does.
func TestHandlerContextEndsAtClose(t *testing.T) {
	got := make(chan context.Context, 1)
	h := wire.HandlerFunc(func(ctx context.Context, r *wire.Request) (any, error) {
		r.Defer()
		got <- ctx
		return nil, nil
	})
	p, far, _ := pipePeer(t, wire.Options{Handler: h})
	far.send(`{"jsonrpc":"2.0","id":1,"method":"x"}`)
	ctx := <-got
	if ctx.Err() != nil {
		t.Fatal("the handler's context ended early")
	}
	p.Close()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's context outlived the connection")
	}
}

// TestPeerHangUpEndsABlockedHandler: when the other side ends the
// connection while a handler waits on its context, the context ends and
// the connection finishes, without anyone calling Close.
func TestPeerHangUpEndsABlockedHandler(t *testing.T) {
	entered := make(chan struct{})
	p, far, _ := pipePeer(t, wire.Options{Name: "s", Handler: wire.HandlerFunc(func(ctx context.Context, r *wire.Request) (any, error) {
		close(entered)
		<-ctx.Done()
		return nil, ctx.Err()
	})})
	far.send(`{"jsonrpc":"2.0","id":1,"method":"block"}`)
	<-entered
	far.s.Close()
	waitDone(t, p)
}

// TestQueuedRequestsAnsweredAfterPeerHangUp: what the other side sent
// before it closed its sending half is still handled and answered.
func TestQueuedRequestsAnsweredAfterPeerHangUp(t *testing.T) {
	host, srv := transport.Pipe(0)
	var handled atomic.Int32
	p := wire.NewPeer(srv, wire.Options{Name: "s", Logger: slog.New(slog.DiscardHandler), Handler: wire.HandlerFunc(func(ctx context.Context, r *wire.Request) (any, error) {
		handled.Add(1)
		return "ok", nil
	})})
	for i := 1; i <= 3; i++ {
		host.Write(context.Background(), []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"m"}`, i)))
	}
	host.Close()
	waitDone(t, p)
	if got := handled.Load(); got != 3 {
		t.Fatalf("handled %d of 3 requests sent before the hang-up", got)
	}
}
