package fetchref

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/internal/term"
)

// The upstream bulk-reference vectors' "fetch" cases, consumed as data
// (the file is internal/content/testdata's copy), each by its id, against
// an httptest TLS origin. Their "render" and "registry" cases run in
// package content.

type fetchCase struct {
	ID        string            `json:"id"`
	Operation string            `json:"operation"`
	Blocks    []json.RawMessage `json:"blocks"`
	MaxBytes  int64             `json:"maxBytes"`
	Response  *struct {
		BodyBase64  string `json:"bodyBase64"`
		ContentType string `json:"contentType"`
		Gzip        bool   `json:"gzip"`
		Redirect    bool   `json:"redirect"`
		Stream      *struct {
			Chunks     int `json:"chunks"`
			ChunkBytes int `json:"chunkBytes"`
			IntervalMs int `json:"intervalMs"`
		} `json:"stream"`
	} `json:"response"`
	Expect struct {
		Hidden         []string `json:"hidden"`
		OK             *bool    `json:"ok"`
		Requests       *int64   `json:"requests"`
		DecodedBase64  string   `json:"decodedBase64"`
		DigestVerified bool     `json:"digestVerified"`
		SavedMime      string   `json:"savedMime"`
		Unchanged      bool     `json:"unchanged"`
		AbortStream    bool     `json:"abortStream"`
		RedirectSafe   bool     `json:"redirectSafe"`
		StorageFromID  bool     `json:"storageFromId"`
		CleanLabel     bool     `json:"cleanLabel"`
	} `json:"expect"`
}

func TestBulkReferenceFetchVectors(t *testing.T) {
	b, err := os.ReadFile("../content/testdata/bulk-reference-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []fetchCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, c := range f.Cases {
		if c.Operation != "fetch" {
			continue
		}
		ran++
		t.Run(c.ID, func(t *testing.T) { runFetchCase(t, c) })
	}
	if ran != 14 {
		t.Errorf("%d fetch cases, want 14", ran)
	}
}

func runFetchCase(t *testing.T, c fetchCase) {
	r := newRig(t, Options{Ceiling: c.MaxBytes})
	var other atomic.Int64
	elsewhere := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		other.Add(1)
		w.Write([]byte("RIFF0000WAVEpayload"))
	}))
	defer elsewhere.Close()
	path := "/case/" + url.PathEscape(c.ID) + "/payload"
	var written, total atomic.Int64
	if resp := c.Response; resp != nil {
		body := decode(t, resp.BodyBase64)
		r.handle(path, func(w http.ResponseWriter, req *http.Request) {
			switch {
			case resp.Redirect:
				http.Redirect(w, req, elsewhere.URL+req.URL.Path, http.StatusFound)
			case resp.Stream != nil:
				total.Store(int64(resp.Stream.Chunks))
				chunk := bytes.Repeat([]byte("x"), resp.Stream.ChunkBytes)
				for range resp.Stream.Chunks {
					if _, err := w.Write(chunk); err != nil {
						return
					}
					w.(http.Flusher).Flush()
					written.Add(1)
					select {
					case <-req.Context().Done():
						return
					case <-time.After(time.Duration(resp.Stream.IntervalMs) * time.Millisecond):
					}
				}
			default:
				if resp.ContentType != "" {
					w.Header().Set("Content-Type", resp.ContentType)
				}
				if resp.Gzip {
					var zb bytes.Buffer
					zw := gzip.NewWriter(&zb)
					zw.Write(body)
					zw.Close()
					w.Header().Set("Content-Encoding", "gzip")
					body = zb.Bytes()
				}
				w.Write(body)
			}
		})
	}
	block := strings.ReplaceAll(strings.ReplaceAll(string(c.Blocks[0]), "$ORIGIN", r.ts.URL), "$CASE", url.PathEscape(c.ID))
	cls := content.Classify(json.RawMessage(block))
	if cls.Kind != content.KindReference {
		t.Fatalf("block = %+v", cls)
	}
	id := r.refs.Register(*cls.Ref, "chat", content.ProvenanceToolResult).ID
	res, err := r.f.Fetch(t.Context(), id, 0)
	seen := fmt.Sprintf("%+v %v", res, err)
	for _, h := range c.Expect.Hidden {
		if h = strings.ReplaceAll(h, "$ORIGIN", r.ts.URL); strings.Contains(seen, h) {
			t.Errorf("what the agent reads holds %q: %s", h, seen)
		}
	}
	if ok := c.Expect.OK; ok != nil && (err == nil) != *ok {
		t.Errorf("ok = %v, want %v: %v", err == nil, *ok, err)
	}
	var ref *Refusal
	if err != nil && !errors.As(err, &ref) {
		t.Errorf("error %T %v, want a *Refusal", err, err)
	}
	if n := c.Expect.Requests; n != nil && r.requests.Load() != *n {
		t.Errorf("%d requests, want %d", r.requests.Load(), *n)
	}
	if c.Expect.DecodedBase64 != "" {
		got, _ := os.ReadFile(res.Path)
		if !bytes.Equal(got, decode(t, c.Expect.DecodedBase64)) {
			t.Errorf("saved %d bytes, not the payload", len(got))
		}
	}
	if c.Expect.DigestVerified && res.DigestVerified != true {
		t.Errorf("digest_verified = %v", res.DigestVerified)
	}
	if m := c.Expect.SavedMime; m != "" && res.MimeType != m {
		t.Errorf("mime %q, want %q", res.MimeType, m)
	}
	if c.Expect.StorageFromID || c.Expect.CleanLabel {
		base := filepath.Base(res.Path)
		if !strings.HasPrefix(base, id) || filepath.Dir(res.Path) != r.dir || term.Line(base) != base {
			t.Errorf("saved as %s, want a name from %s in %s", res.Path, id, r.dir)
		}
	}
	if c.Expect.Unchanged {
		if rec, _ := r.refs.Lookup(id); rec.Fetched {
			t.Error("the record changed")
		}
		if entries, _ := os.ReadDir(r.dir); len(entries) != 0 {
			t.Errorf("files: %v", entries)
		}
	}
	if c.Expect.AbortStream && written.Load() >= total.Load() {
		t.Errorf("the stream ran to its end (%d of %d chunks): not aborted", written.Load(), total.Load())
	}
	if c.Expect.RedirectSafe && (other.Load() != 0 || err == nil) {
		t.Errorf("the redirect was followed: %d requests elsewhere, err %v", other.Load(), err)
	}
}
