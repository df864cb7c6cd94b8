package fetchref

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpl-go/mcpl/internal/content"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const payload = "RIFF0000WAVEpayload"

// rig is a fetcher on a TLS server standing in for an MCPL server's origin.
type rig struct {
	t       *testing.T
	refs    *content.Refs
	f       *Fetcher
	ts      *httptest.Server
	dir     string
	servers map[string]Server

	mu       sync.Mutex
	handlers map[string]http.HandlerFunc
	requests atomic.Int64
	auth     []string
}

func newRig(t *testing.T, opts Options) *rig {
	r := &rig{t: t, refs: content.NewRefs(0), dir: t.TempDir(), handlers: map[string]http.HandlerFunc{}}
	r.ts = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		r.mu.Lock()
		r.auth = append(r.auth, req.Header.Get("Authorization"))
		h := r.handlers[req.URL.Path]
		r.mu.Unlock()
		if h == nil {
			http.NotFound(w, req)
			return
		}
		h(w, req)
	}))
	t.Cleanup(r.ts.Close)
	u, _ := url.Parse(r.ts.URL)
	r.servers = map[string]Server{
		"chat":  {URL: "wss://" + u.Host + "/mcpl", Token: "fixture-secret"},
		"local": {},
	}
	opts.Refs = r.refs
	opts.Server = func(id string) (Server, bool) { s, ok := r.servers[id]; return s, ok }
	if opts.Dir == "" {
		opts.Dir = r.dir
	}
	opts.Client = r.ts.Client()
	r.f = New(opts)
	return r
}

func (r *rig) handle(path string, h http.HandlerFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handlers[path] = h
}

// ref registers a reference from block (with $ORIGIN replaced) delivered
// by server.
func (r *rig) ref(block, server string) string {
	r.t.Helper()
	b := content.Classify(json.RawMessage(strings.ReplaceAll(block, "$ORIGIN", r.ts.URL)))
	if b.Kind != content.KindReference {
		r.t.Fatalf("not a reference: %s", block)
	}
	return r.refs.Register(*b.Ref, server, content.ProvenanceToolResult).ID
}

func serve(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(body)) }
}

func TestFetchGood(t *testing.T) {
	r := newRig(t, Options{})
	r.handle("/a", serve(payload))
	id := r.ref(`{"type":"resource","uri":"$ORIGIN/a","name":"../../etc/passwd","mimeType":"audio/wav","sizeBytes":19,"digest":"sha256:uM7OLD5sO8G3SeWw3LirIreZM71523d9_qXxkn8ewpM"}`, "chat")
	res, err := r.f.Fetch(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(res.Path)
	if string(got) != payload || res.Bytes != 19 || res.MimeType != "audio/wav" || res.DigestVerified != true {
		t.Errorf("result %+v, file %q", res, got)
	}
	if filepath.Dir(res.Path) != r.dir || filepath.Base(res.Path) != id+".wav" {
		t.Errorf("saved at %s, want %s/%s.wav", res.Path, r.dir, id)
	}
	if st, _ := os.Stat(res.Path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode())
	}
	if r.auth[0] != "Bearer fixture-secret" {
		t.Errorf("authorization %q", r.auth[0])
	}
	if ref, _ := r.refs.Lookup(id); !ref.Fetched || ref.Path != res.Path {
		t.Errorf("record %+v", ref)
	}
}

func TestFetchRefusals(t *testing.T) {
	r := newRig(t, Options{Ceiling: 64, Budget: 100})
	r.handle("/big", func(w http.ResponseWriter, _ *http.Request) { w.Write(bytes.Repeat([]byte("x"), 65)) })
	r.handle("/gone", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusGone) })
	r.handle("/moved", func(w http.ResponseWriter, req *http.Request) { http.Redirect(w, req, "/a", http.StatusFound) })
	r.handle("/a", serve(payload))
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		name, block, server string
		want                func(id string) string
		dialed              bool
	}{
		{"expired", `{"type":"resource","uri":"$ORIGIN/a","expiresAt":"` + past + `"}`, "chat", textExpired, false},
		{"expiry unreadable", `{"type":"resource","uri":"$ORIGIN/a","expiresAt":"soon"}`, "chat", textExpiryUnreadable, false},
		{"expiry rejected", `{"type":"resource","uri":"$ORIGIN/a","expiresAt":7}`, "chat", textExpiryRejected, false},
		{"unbound", `{"type":"resource","uri":"$ORIGIN/a"}`, "", textUnbound, false},
		{"local server", `{"type":"resource","uri":"$ORIGIN/a"}`, "local", textNoOrigin, false},
		{"file link", `{"type":"resource","uri":"file:///etc/passwd"}`, "chat", textScheme, false},
		{"cross origin", `{"type":"resource","uri":"https://elsewhere.example/a"}`, "chat", textCrossOrigin, false},
		{"plaintext from a secure origin", `{"type":"resource","uri":"` + strings.Replace("$ORIGIN", "$ORIGIN", "http"+strings.TrimPrefix(r.ts.URL, "https"), 1) + `/a"}`, "chat", textPlaintext, false},
		{"claimed over the ceiling", `{"type":"resource","uri":"$ORIGIN/a","sizeBytes":65}`, "chat", func(id string) string { return textClaimOverCeiling(id, "65 bytes", "64 bytes") }, false},
		{"redirect", `{"type":"resource","uri":"$ORIGIN/moved"}`, "chat", textRedirect, true},
		{"HTTP status", `{"type":"resource","uri":"$ORIGIN/gone"}`, "chat", func(id string) string { return textHTTPStatus(id, 410) }, true},
		{"larger than the ceiling", `{"type":"resource","uri":"$ORIGIN/big","sizeBytes":1}`, "chat", func(id string) string { return textOverCeiling(id, "64 bytes") }, true},
		{"digest mismatch", `{"type":"resource","uri":"$ORIGIN/a","digest":"sha256:2SmKENGwc1g33EvYXaxkGw887yekfl1TpU8vP1svz_o"}`, "chat", textDigest, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A link of its own: the registry keeps one record a link.
			var fields map[string]any
			json.Unmarshal([]byte(tc.block), &fields)
			fields["uri"] = fields["uri"].(string) + "?case=" + url.QueryEscape(tc.name)
			block, _ := json.Marshal(fields)
			id := r.ref(string(block), tc.server)
			before := r.requests.Load()
			_, err := r.f.Fetch(context.Background(), id, 0)
			var ref *Refusal
			if !errors.As(err, &ref) || ref.Text != tc.want(id) {
				t.Fatalf("Fetch = %v\nwant %q", err, tc.want(id))
			}
			if dialed := r.requests.Load() > before; dialed != tc.dialed || ref.Dialed != tc.dialed {
				t.Errorf("dialed %v (says %v), want %v", dialed, ref.Dialed, tc.dialed)
			}
			if strings.Contains(ref.Text, r.ts.URL) || strings.Contains(ref.Text, "fixture-secret") || strings.Contains(ref.Text, "elsewhere") {
				t.Errorf("the refusal shows a link or token: %q", ref.Text)
			}
			if rec, _ := r.refs.Lookup(id); rec.Fetched {
				t.Error("marked fetched")
			}
		})
	}
	entries, _ := os.ReadDir(r.dir)
	if len(entries) != 0 {
		t.Errorf("files left: %v", entries)
	}
	// The budget: 65 + 19 fetched so far from chat, of 100.
	id := r.ref(`{"type":"resource","uri":"$ORIGIN/a?again"}`, "chat")
	r.f.Fetch(context.Background(), id, 0)
	id = r.ref(`{"type":"resource","uri":"$ORIGIN/a?once-more"}`, "chat")
	_, err := r.f.Fetch(context.Background(), id, 0)
	if err == nil || !strings.Contains(err.Error(), "limit of 100 bytes") {
		t.Errorf("past the budget: %v", err)
	}
	if _, err := r.f.Fetch(context.Background(), "ref_nope_0000", 0); err == nil || err.Error() != textUnknown("ref_nope_0000") {
		t.Errorf("unknown id: %v", err)
	}
}

func TestFetchGzipCountsDecodedBytes(t *testing.T) {
	r := newRig(t, Options{Ceiling: 100})
	gz := func(n int) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			zw.Write(bytes.Repeat([]byte("x"), n))
			zw.Close()
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(b.Bytes())
		}
	}
	r.handle("/small", gz(100))
	r.handle("/bomb", gz(1<<20))
	if res, err := r.f.Fetch(context.Background(), r.ref(`{"type":"resource","uri":"$ORIGIN/small"}`, "chat"), 0); err != nil || res.Bytes != 100 {
		t.Errorf("100 decoded bytes: %+v %v", res, err)
	}
	if _, err := r.f.Fetch(context.Background(), r.ref(`{"type":"resource","uri":"$ORIGIN/bomb"}`, "chat"), 0); err == nil {
		t.Error("a megabyte decoded past a 100-byte ceiling was kept")
	}
}

// decode is base64 for the vectors' bodies.
func decode(t *testing.T, s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFetchBudgetHoldsAtOnce: fetches at once can't together go past a
// server's budget: each reserves its share before it dials.
func TestFetchBudgetHoldsAtOnce(t *testing.T) {
	r := newRig(t, Options{Ceiling: 90, Budget: 100})
	release, arrived := make(chan struct{}), make(chan struct{}, 5)
	r.handle("/slow", func(w http.ResponseWriter, _ *http.Request) {
		arrived <- struct{}{}
		<-release
		w.Write(bytes.Repeat([]byte("x"), 90))
	})
	var wg sync.WaitGroup
	var ok atomic.Int64
	for i := range 5 {
		id := r.ref(fmt.Sprintf(`{"type":"resource","uri":"$ORIGIN/slow?%d"}`, i), "chat")
		wg.Go(func() {
			if _, err := r.f.Fetch(context.Background(), id, 0); err == nil {
				ok.Add(1)
			}
		})
	}
	<-arrived // one fetch is out; the others find the budget reserved
	close(release)
	wg.Wait()
	if n := ok.Load(); n != 1 {
		t.Errorf("%d fetches of 90 bytes succeeded against a budget of 100, want 1", n)
	}
}

func TestFetchOriginCases(t *testing.T) {
	r := newRig(t, Options{})
	r.handle("/a", serve(payload))
	u, _ := url.Parse(r.ts.URL)
	r.servers["secure"] = Server{URL: "wss://" + u.Hostname() + "/mcpl"}
	r.servers["nocreds"] = Server{URL: "wss://" + u.Host + "/mcpl", NoToken: true}
	for _, tc := range []struct {
		name, uri, server string
		want              func(string) string
	}{
		{"plaintext on the default port", "http://" + u.Hostname() + "/a", "secure", textPlaintext},
		{"credentials in the link", "https://user:pass@" + u.Host + "/a", "chat", textScheme},
		{"the server's token can't be read", r.ts.URL + "/a?nocreds", "nocreds", textNoCredentials},
		{"the server is gone", r.ts.URL + "/a?gone", "gone", textServerGone},
	} {
		id := r.ref(`{"type":"resource","uri":"`+tc.uri+`"}`, tc.server)
		if _, err := r.f.Fetch(context.Background(), id, 0); err == nil || err.Error() != tc.want(id) {
			t.Errorf("%s: %v\nwant %q", tc.name, err, tc.want(id))
		}
	}
}

// TestFetchNames: the file's name comes from the id and the sniffed type
// only, and a name already taken is never replaced.
func TestFetchNames(t *testing.T) {
	r := newRig(t, Options{})
	r.handle("/text", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-sh")
		w.Write([]byte("echo hi"))
	})
	r.handle("/wav", serve(payload))
	id := r.ref(`{"type":"resource","uri":"$ORIGIN/text","name":"run.sh","mimeType":"application/x-sh"}`, "chat")
	res, err := r.f.Fetch(context.Background(), id, 0)
	if err != nil || filepath.Base(res.Path) != id || res.MimeType != "application/x-sh" {
		t.Errorf("a script: %+v %v; want the bare id as its name, its claimed type reported", res, err)
	}
	other := r.ref(`{"type":"resource","uri":"$ORIGIN/wav"}`, "chat")
	os.WriteFile(filepath.Join(r.dir, other+".wav"), []byte("earlier"), 0o600)
	res, err = r.f.Fetch(context.Background(), other, 0)
	if err != nil || res.Path == filepath.Join(r.dir, other+".wav") {
		t.Errorf("a name taken: %+v %v", res, err)
	}
	if b, _ := os.ReadFile(filepath.Join(r.dir, other+".wav")); string(b) != "earlier" {
		t.Error("the earlier file was replaced")
	}
	entries, _ := os.ReadDir(r.dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".fetch-") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}
