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
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
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
	// shown. NoToken says it has one this host can't read now.
	Token   string
	NoToken bool
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
// the fetcher's ceiling). maxBytes may be above that ceiling: the
// per-server budget bounds what an agent can ask for.
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
	if err != nil || (link.Scheme != "https" && link.Scheme != "http") || link.Host == "" || link.User != nil {
		// A link with credentials in it is refused too (RFC-005 §6.1):
		// credentials are the host's to attach.
		return Result{}, &Refusal{Text: textScheme(id)}
	}
	server, srv, why := f.origin(ref, link)
	if why != "" {
		return Result{}, &Refusal{Text: why}
	}
	// The budget is reserved before the request and settled after it, so
	// fetches at once can't together go past it.
	f.mu.Lock()
	left := f.opts.Budget - f.used[server]
	reserve := min(ceiling, left)
	if left > 0 {
		f.used[server] += reserve
	}
	f.mu.Unlock()
	if left <= 0 {
		return Result{}, &Refusal{Text: textBudget(id, content.SizeText(f.opts.Budget))}
	}
	res, n, err := f.get(ctx, ref, link, server, srv, ceiling, reserve)
	f.mu.Lock()
	f.used[server] -= reserve - n
	f.mu.Unlock()
	return res, err
}

// origin finds a server the reference is bound to whose dialed origin is
// the link's: server is its id; why, when not "", is the refusal.
func (f *Fetcher) origin(ref content.Ref, link *url.URL) (server string, srv Server, why string) {
	why = textNoOrigin(ref.ID)
	for _, id := range ref.Servers {
		s, ok := f.opts.Server(id)
		if !ok {
			why = textServerGone(ref.ID)
			continue
		}
		if s.URL == "" {
			continue
		}
		dialed, err := url.Parse(s.URL)
		if err != nil {
			continue
		}
		scheme := map[string]string{"ws": "http", "wss": "https", "http": "http", "https": "https"}[dialed.Scheme]
		switch {
		case scheme == "https" && link.Scheme == "http" && strings.EqualFold(dialed.Hostname(), link.Hostname()):
			why = textPlaintext(ref.ID)
		case scheme == link.Scheme && sameHost(dialed, link) && s.NoToken:
			why = textNoCredentials(ref.ID)
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

// get makes the request and keeps the payload, streamed to a temporary
// file and hashed as it comes, taking at most limit bytes (the ceiling,
// or less where the budget is nearer); n is the bytes it took.
func (f *Fetcher) get(ctx context.Context, ref content.Ref, link *url.URL, server string, srv Server, ceiling, limit int64) (res Result, n int64, err error) {
	id := ref.ID
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link.String(), nil)
	if err != nil {
		return Result{}, 0, &Refusal{Text: textScheme(id)}
	}
	if srv.Token != "" {
		req.Header.Set("Authorization", "Bearer "+srv.Token)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		f.log.Warn("a reference fetch failed", "ref", id, "server", server, "error", redact(err, srv.Token))
		return Result{}, 0, &Refusal{Text: textFailed(id), Dialed: true}
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		f.log.Warn("a reference fetch was redirected; not followed", "ref", id, "server", server, "status", resp.StatusCode)
		return Result{}, 0, &Refusal{Text: textRedirect(id), Dialed: true}
	case resp.StatusCode != http.StatusOK:
		f.log.Warn("a reference fetch was refused", "ref", id, "server", server, "status", resp.StatusCode)
		return Result{}, 0, &Refusal{Text: textHTTPStatus(id, resp.StatusCode), Dialed: true}
	}
	if err := os.MkdirAll(f.opts.Dir, 0o700); err != nil {
		f.log.Error("no place to save a fetched reference", "dir", f.opts.Dir, "error", err.Error())
		return Result{}, 0, &Refusal{Text: textNotSaved(id), Dialed: true}
	}
	tmp, err := os.CreateTemp(f.opts.Dir, ".fetch-*")
	if err != nil {
		f.log.Error("no place to save a fetched reference", "dir", f.opts.Dir, "error", err.Error())
		return Result{}, 0, &Refusal{Text: textNotSaved(id), Dialed: true}
	}
	defer os.Remove(tmp.Name()) // gone once renamed; gone whatever failed
	hash := sha256.New()
	head := &prefix{max: 512}
	n, err = io.Copy(io.MultiWriter(tmp, hash, head), io.LimitReader(resp.Body, limit+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	switch {
	case n > limit && limit == ceiling:
		return Result{}, n, &Refusal{Text: textOverCeiling(id, content.SizeText(ceiling)), Dialed: true}
	case n > limit:
		return Result{}, n, &Refusal{Text: textOverBudget(id, content.SizeText(f.opts.Budget)), Dialed: true}
	case err != nil:
		f.log.Warn("a reference fetch broke off", "ref", id, "server", server, "error", redact(err, srv.Token))
		return Result{}, n, &Refusal{Text: textFailed(id), Dialed: true}
	}
	verified := any("no digest claimed")
	if d := ref.Testimony.Digest; d != "" {
		if "sha256:"+base64.RawURLEncoding.EncodeToString(hash.Sum(nil)) != d {
			f.log.Warn("a reference's payload does not match its digest; discarded", "ref", id, "server", server)
			return Result{}, n, &Refusal{Text: textDigest(id), Dialed: true}
		}
		verified = true
	}
	sniffed, mimeType := observedType(head.b, resp.Header.Get("Content-Type"), ref.Testimony.MimeType)
	path, err := f.place(id, extension(sniffed), tmp.Name())
	if err != nil {
		f.log.Error("a fetched reference could not be saved", "ref", id, "error", err.Error())
		return Result{}, n, &Refusal{Text: textNotSaved(id), Dialed: true}
	}
	f.opts.Refs.Fetched(id, path)
	return Result{Path: path, Bytes: n, MimeType: mimeType, DigestVerified: verified}, n, nil
}

// prefix keeps the first max bytes written to it, for sniffing.
type prefix struct {
	b   []byte
	max int
}

func (p *prefix) Write(b []byte) (int, error) {
	if room := p.max - len(p.b); room > 0 {
		p.b = append(p.b, b[:min(room, len(b))]...)
	}
	return len(b), nil
}

// observedType reads the payload's type: sniffed is what its bytes show
// ("" when they show nothing specific), reported is that, else the
// response's header, else the testimony (RFC-005 §3: a claim, checked
// where it can be). Only the sniffed type names the saved file.
func observedType(head []byte, header, claimed string) (sniffed, reported string) {
	if t, _, err := mime.ParseMediaType(http.DetectContentType(head)); err == nil && t != "application/octet-stream" && t != "text/plain" {
		sniffed = canonical(t)
		return sniffed, sniffed
	}
	for _, c := range []string{header, claimed} {
		if t, _, err := mime.ParseMediaType(c); err == nil && t != "" {
			return "", canonical(t)
		}
	}
	return "", "application/octet-stream"
}

// canonical maps the sniffer's spellings to the common ones.
func canonical(t string) string {
	switch t {
	case "audio/wave", "audio/x-wav":
		return "audio/wav"
	}
	return t
}

// place moves the fetched file to a name made from the reference id
// (never the server's label). A name already taken (ids start again with
// each run of the host) gets a random tail rather than replacing it.
func (f *Fetcher) place(id, ext, tmp string) (string, error) {
	path := filepath.Join(f.opts.Dir, safeName(id)+ext)
	if _, err := os.Lstat(path); err == nil {
		var b [6]byte
		rand.Read(b[:])
		path = filepath.Join(f.opts.Dir, safeName(id)+"_"+hex.EncodeToString(b[:])+ext)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return "", err
	}
	return path, os.Rename(tmp, path)
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

// extension is the file extension for a sniffed type, "" when none is
// known.
func extension(mimeType string) string {
	switch mimeType {
	case "":
		return ""
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
