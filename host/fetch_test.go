package host_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/mcpl-go/mcpl/host"
	"github.com/mcpl-go/mcpl/protocol"
	sdk "github.com/mcpl-go/mcpl/server"
)

// TestFetchReferenceEndToEnd: a real WebSocket server on 127.0.0.1 whose
// tool answers with references to files on its own origin; through
// host.Host, the result shows stubs, and fetch_reference fetches a good
// one with the server's token and refuses the rest, each with its own
// sentence.
func TestFetchReferenceEndToEnd(t *testing.T) {
	payload := []byte("RIFF0000WAVEpayload")
	sum := sha256.Sum256(payload)
	digest := "sha256:" + base64.RawURLEncoding.EncodeToString(sum[:])
	mux := http.NewServeMux()
	var auth []string
	mux.HandleFunc("/files/", func(w http.ResponseWriter, r *http.Request) {
		auth = append(auth, r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "audio/wav")
		w.Write(payload)
	})
	ts := httptest.NewServer(mux)
	defer ts.Close()
	srv := sdk.New("files", "1.0.0", nil)
	srv.HandleTool(sdk.Tool{Name: "attach"}, func(ctx context.Context, args json.RawMessage) (protocol.CallToolResult, error) {
		block := func(path, extra string) json.RawMessage {
			return json.RawMessage(fmt.Sprintf(`{"type":"resource","uri":"%s%s","name":"a.wav","mimeType":"audio/wav","sizeBytes":19%s}`, ts.URL, path, extra))
		}
		return protocol.CallToolResult{Content: []json.RawMessage{
			block("/files/good.wav", `,"digest":"`+digest+`","disposition":"never"`),
			block("/files/bad.wav", `,"digest":"sha256:2SmKENGwc1g33EvYXaxkGw887yekfl1TpU8vP1svz_o"`),
			block("/files/big.wav", `,"sizeBytes":300000000`),
			block("/files/old.wav", `,"expiresAt":"2020-01-01T00:00:00Z"`),
			json.RawMessage(`{"type":"resource","uri":"https://elsewhere.example/x.wav","name":"x.wav"}`),
		}}, nil
	})
	mux.Handle("/mcpl", srv)
	defer srv.Close()

	dir := t.TempDir()
	rec := newRecorder()
	h, err := host.New(host.Options{Logger: rec.Logger(), RefsDir: dir, LookupEnv: func(k string) (string, bool) {
		return "s3cret", k == "FILES_TOKEN"
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	wsURL := "ws" + strings.TrimPrefix(ts.URL, "http") + "/mcpl"
	if err := h.Connect(t.Context(), server(t, "id: files\nurl: "+wsURL+"\ntokenEnv: FILES_TOKEN")); err != nil {
		t.Fatal(err)
	}
	res, err := h.CallTool(t.Context(), "files--attach", json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	text := h.ResultText("files--attach", res)
	if strings.Contains(text, ts.URL) || strings.Contains(text, "elsewhere") {
		t.Errorf("the result shows a link:\n%s", text)
	}
	ids := regexp.MustCompile(`\[(ref_[0-9a-z]+_[0-9a-z]{4})\]`).FindAllStringSubmatch(text, -1)
	if len(ids) != 5 {
		t.Fatalf("want 5 stubs:\n%s", text)
	}
	if !strings.HasSuffix(strings.Split(text, "\n")[3], "— from tool result — expired") {
		t.Errorf("the old reference's stub: %q", strings.Split(text, "\n")[3])
	}
	fetch := func(id string) (string, error) {
		res, err := h.CallTool(t.Context(), "fetch_reference", json.RawMessage(`{"ref_id":"`+id+`"}`))
		if err != nil {
			return "", err
		}
		return res.Text(), nil
	}
	out, err := fetch(ids[0][1])
	if err != nil {
		t.Fatalf("fetch_reference of a good reference: %v", err)
	}
	var got struct {
		Path           string `json:"path"`
		Bytes          int64  `json:"bytes"`
		MimeType       string `json:"mime_type"`
		DigestVerified any    `json:"digest_verified"`
	}
	json.Unmarshal([]byte(out), &got)
	if b, _ := os.ReadFile(got.Path); string(b) != string(payload) || got.DigestVerified != true || got.MimeType != "audio/wav" || !strings.HasPrefix(got.Path, dir) {
		t.Errorf("fetched %s", out)
	}
	if len(auth) != 1 || auth[0] != "Bearer s3cret" {
		t.Errorf("the fetch carried %q, want the server's token", auth)
	}
	for i, want := range []struct {
		text    string
		outcome host.Outcome
	}{
		{"Reference " + ids[1][1] + "'s payload doesn't match the digest its server gave, so this host discarded it; fetching it again won't change that unless the server's copy changes.", host.OutcomeToolError},
		{"Reference " + ids[2][1] + " claims 286.1 MiB, more than the 256.0 MiB this fetch may take, so nothing was fetched; a larger max_bytes may allow it.", host.OutcomeRefused},
		{"Reference " + ids[3][1] + " has expired, so this host didn't fetch it, and trying again won't change that.", host.OutcomeRefused},
		{"Reference " + ids[4][1] + " points somewhere other than the server that sent it, and this host fetches only from a server's own address; nothing was fetched, and trying again won't change that.", host.OutcomeRefused},
	} {
		_, err := fetch(ids[i+1][1])
		var te *host.ToolError
		if !errors.As(err, &te) || te.Text != want.text || te.Outcome != want.outcome {
			t.Errorf("fetch_reference %s = %v\nwant %q (%s)", ids[i+1][1], err, want.text, want.outcome)
		}
	}
	if len(auth) != 2 {
		t.Errorf("%d requests reached the origin, want 2 (the good one and the digest mismatch)", len(auth))
	}
	if _, err := fetch("ref_nope_zzzz"); err == nil || !strings.HasPrefix(err.Error(), "There's no reference ref_nope_zzzz here") {
		t.Errorf("an unknown id: %v", err)
	}
}
