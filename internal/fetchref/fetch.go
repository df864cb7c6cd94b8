// Package fetchref is fetch_reference: the only way this host dereferences
// an RFC-005 reference (§7, fail closed). Receipt never fetches. A fetch
// goes only to the delivering server's own dialed origin (ws→http,
// wss→https), over https unless that origin is plaintext, with the
// server's credentials (host-private), no redirects, a streamed byte
// ceiling and a per-server budget; a claimed size over the ceiling is
// refused without dialing; the digest is verified before anything is
// kept; an expired reference is refused; and the payload is stored under
// a name this host makes from the reference id, never the server's label.
package fetchref

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mcpl-go/mcpl/internal/content"
)

// Defaults.
const (
	DefaultCeiling = 256 << 20
	DefaultBudget  = 1 << 30
	DefaultTimeout = 60 * time.Second
)

// Server is what the fetcher knows of a server a reference is bound to.
type Server struct {
	// URL is the address this host dialed (ws:// or wss://); "" for a
	// server run as a local process.
	URL string
	// Token is its bearer token ("" for none): sent with the fetch, never
	// shown.
	Token string
}

// Options configure a Fetcher.
type Options struct {
	Refs *content.Refs
	// Server looks up a server a reference is bound to.
	Server func(id string) (Server, bool)
	// Dir is where payloads are saved ("" refuses every fetch).
	Dir string
	// Ceiling is a fetch's byte ceiling when the call gives none (0 means
	// DefaultCeiling); Budget the bytes fetched from one server over the
	// host's life (0 means DefaultBudget).
	Ceiling, Budget int64
	// Client makes the requests; nil means one with DefaultTimeout. Its
	// redirects are refused whatever it says.
	Client *http.Client
	Logger *slog.Logger
	Now    func() time.Time
}

// Fetcher runs fetch_reference.
type Fetcher struct {
	opts   Options
	client *http.Client
	log    *slog.Logger

	mu   sync.Mutex
	used map[string]int64 // bytes fetched, by server
}

// New returns a fetcher.
func New(opts Options) *Fetcher {
	if opts.Ceiling <= 0 {
		opts.Ceiling = DefaultCeiling
	}
	if opts.Budget <= 0 {
		opts.Budget = DefaultBudget
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := http.Client{Timeout: DefaultTimeout}
	if opts.Client != nil {
		c = *opts.Client
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Fetcher{opts: opts, client: &c, log: opts.Logger, used: map[string]int64{}}
}

// Result is a fetch that succeeded.
type Result struct {
	Path     string `json:"path"`
	Bytes    int64  `json:"bytes"`
	MimeType string `json:"mime_type"`
	// DigestVerified is true, or "no digest claimed".
	DigestVerified any `json:"digest_verified"`
}

// Refusal is a fetch refused or failed: Text is what the agent reads.
type Refusal struct {
	Text string
	// Dialed says whether a request went out.
	Dialed bool
}

func (r *Refusal) Error() string { return r.Text }

// Fetch fetches the reference with id, taking at most maxBytes (0 means
// the ceiling).
func (f *Fetcher) Fetch(ctx context.Context, id string, maxBytes int64) (Result, error) {
	if id == "" {
		return Result{}, &Refusal{Text: textMissingID()}
	}
	ref, ok := f.opts.Refs.Lookup(id)
	if !ok {
		return Result{}, &Refusal{Text: textUnknown(content.Label(id))}
	}
	t := &ref.Testimony
	switch t.ExpiryAt(f.opts.Now()) {
	case content.ExpiryPassed:
		return Result{}, &Refusal{Text: textExpired(id)}
	case content.ExpiryUnreadable:
		return Result{}, &Refusal{Text: textExpiryUnreadable(id)}
	case content.ExpiryRejected:
		return Result{}, &Refusal{Text: textExpiryRejected(id)}
	}
	if len(ref.Servers) == 0 {
		return Result{}, &Refusal{Text: textUnbound(id)}
	}
	ceiling := f.opts.Ceiling
	if maxBytes > 0 {
		ceiling = maxBytes
	}
	if t.HasSize && t.SizeBytes > ceiling {
		return Result{}, &Refusal{Text: textClaimOverCeiling(id, content.SizeText(t.SizeBytes), content.SizeText(ceiling))}
	}
	if f.opts.Dir == "" {
		return Result{}, &Refusal{Text: textNoPlace(id)}
	}
	link, err := url.Parse(t.URI)
	if err != nil || (link.Scheme != "https" && link.Scheme != "http") || link.Host == "" {
		return Result{}, &Refusal{Text: textScheme(id)}
	}
	server, srv, why := f.origin(ref, link)
	if why != "" {
		return Result{}, &Refusal{Text: why}
	}
	f.mu.Lock()
	left := f.opts.Budget - f.used[server]
	f.mu.Unlock()
	if left <= 0 {
		return Result{}, &Refusal{Text: textBudget(id, content.SizeText(f.opts.Budget))}
	}
	return f.get(ctx, ref, link, server, srv, ceiling, left)
}

// origin finds a server the reference is bound to whose dialed origin is
// the link's: server is its id; why, when not "", is the refusal.
func (f *Fetcher) origin(ref content.Ref, link *url.URL) (server string, srv Server, why string) {
	why = textNoOrigin(ref.ID)
	for _, id := range ref.Servers {
		s, ok := f.opts.Server(id)
		if !ok || s.URL == "" {
			continue
		}
		dialed, err := url.Parse(s.URL)
		if err != nil {
			continue
		}
		scheme := map[string]string{"ws": "http", "wss": "https", "http": "http", "https": "https"}[dialed.Scheme]
		switch {
		case scheme == "https" && link.Scheme == "http" && sameHost(dialed, link):
			why = textPlaintext(ref.ID)
		case scheme == link.Scheme && sameHost(dialed, link):
			return id, s, ""
		default:
			why = textCrossOrigin(ref.ID)
		}
	}
	return "", Server{}, why
}

// sameHost compares host and port, the default port filled in.
func sameHost(a, b *url.URL) bool {
	return strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch u.Scheme {
	case "https", "wss":
		return "443"
	}
	return "80"
}

// get makes the request and keeps the payload.
func (f *Fetcher) get(ctx context.Context, ref content.Ref, link *url.URL, server string, srv Server, ceiling, left int64) (Result, error) {
	id := ref.ID
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link.String(), nil)
	if err != nil {
		return Result{}, &Refusal{Text: textScheme(id)}
	}
	if srv.Token != "" {
		req.Header.Set("Authorization", "Bearer "+srv.Token)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		f.log.Warn("a reference fetch failed", "ref", id, "server", server, "error", redact(err, srv.Token))
		return Result{}, &Refusal{Text: textFailed(id), Dialed: true}
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		f.log.Warn("a reference fetch was redirected; not followed", "ref", id, "server", server, "status", resp.StatusCode)
		return Result{}, &Refusal{Text: textRedirect(id), Dialed: true}
	case resp.StatusCode != http.StatusOK:
		f.log.Warn("a reference fetch was refused", "ref", id, "server", server, "status", resp.StatusCode)
		return Result{}, &Refusal{Text: textHTTPStatus(id, resp.StatusCode), Dialed: true}
	}
	limit := min(ceiling, left)
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	f.charge(server, int64(len(body)))
	switch {
	case int64(len(body)) > limit && limit == ceiling:
		return Result{}, &Refusal{Text: textOverCeiling(id, content.SizeText(ceiling)), Dialed: true}
	case int64(len(body)) > limit:
		return Result{}, &Refusal{Text: textOverBudget(id, content.SizeText(f.opts.Budget)), Dialed: true}
	case err != nil:
		f.log.Warn("a reference fetch broke off", "ref", id, "server", server, "error", redact(err, srv.Token))
		return Result{}, &Refusal{Text: textFailed(id), Dialed: true}
	}
	verified := any("no digest claimed")
	if d := ref.Testimony.Digest; d != "" {
		sum := sha256.Sum256(body)
		if "sha256:"+base64.RawURLEncoding.EncodeToString(sum[:]) != d {
			f.log.Warn("a reference's payload does not match its digest; discarded", "ref", id, "server", server)
			return Result{}, &Refusal{Text: textDigest(id), Dialed: true}
		}
		verified = true
	}
	mimeType := observedType(body, resp.Header.Get("Content-Type"), ref.Testimony.MimeType)
	path, err := f.save(id, mimeType, body)
	if err != nil {
		f.log.Error("a fetched reference could not be saved", "ref", id, "error", err.Error())
		return Result{}, &Refusal{Text: textNotSaved(id), Dialed: true}
	}
	f.opts.Refs.Fetched(id, path)
	return Result{Path: path, Bytes: int64(len(body)), MimeType: mimeType, DigestVerified: verified}, nil
}

func (f *Fetcher) charge(server string, n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.used[server] += n
}

// observedType is the payload's type: sniffed from its bytes, else the
// response's header, else the testimony (RFC-005 §3: a claim, checked
// where it can be).
func observedType(body []byte, header, claimed string) string {
	sniffed := http.DetectContentType(body)
	if t, _, err := mime.ParseMediaType(sniffed); err == nil && t != "application/octet-stream" && t != "text/plain" {
		return canonical(t)
	}
	if t, _, err := mime.ParseMediaType(header); err == nil && t != "" {
		return canonical(t)
	}
	if t, _, err := mime.ParseMediaType(claimed); err == nil && t != "" {
		return canonical(t)
	}
	if t, _, err := mime.ParseMediaType(sniffed); err == nil {
		return t
	}
	return "application/octet-stream"
}

// canonical maps the sniffer's spellings to the common ones.
func canonical(t string) string {
	switch t {
	case "audio/wave", "audio/x-wav":
		return "audio/wav"
	}
	return t
}

// save writes the payload under a name made from the reference id (never
// the server's label), through a temporary file, readable by this user
// alone.
func (f *Fetcher) save(id, mimeType string, body []byte) (string, error) {
	if err := os.MkdirAll(f.opts.Dir, 0o700); err != nil {
		return "", err
	}
	name := safeName(id) + extension(mimeType)
	tmp, err := os.CreateTemp(f.opts.Dir, ".fetch-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(body); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	path := filepath.Join(f.opts.Dir, name)
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", err
	}
	return path, nil
}

// safeName keeps an id's letters, digits and underscores.
func safeName(id string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return -1
	}, id)
}

// extension is the file extension for a type, "" when none is known.
func extension(mimeType string) string {
	switch mimeType {
	case "audio/wav":
		return ".wav"
	case "image/png":
		return ".png"
	case "image/jpeg":
		return ".jpg"
	}
	if exts, err := mime.ExtensionsByType(mimeType); err == nil && len(exts) > 0 {
		return exts[0]
	}
	return ""
}

// redact keeps a token out of an error's words.
func redact(err error, token string) string {
	s := err.Error()
	if token != "" {
		s = strings.ReplaceAll(s, token, "[token]")
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		s = fmt.Sprintf("%s: %v", ue.Op, ue.Err)
	}
	return s
}
