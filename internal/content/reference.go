package content

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Testimony is what a server says of a reference (RFC-005 §3): testimony,
// none of it verified. An optional field that breaks its schema rule (a
// label over its maximum length included) is rejected as a field, treated
// as absent, and named in Rejected (RFC-005 §8's one invalid-field rule:
// the block stays, a valid disposition stays in force). Labels within
// their schema bounds are cut further to display bounds in a stub, marked
// with "…".
type Testimony struct {
	URI       string
	MimeType  string
	Name      string
	SizeBytes int64
	HasSize   bool
	Digest    string
	ExpiresAt string
	// Disposition is "never", "ref", or "" (no testimony).
	Disposition string
	Rejected    []string
}

// Schema bounds of RFC-005 §8, in characters (JSON Schema's maxLength):
// the outer fence. Stubs apply tighter display bounds of their own.
const (
	maxLabelChars   = 255
	maxExpiresChars = 64
	maxSafeInteger  = 1<<53 - 1
)

var digestRule = regexp.MustCompile(`^sha256:[A-Za-z0-9_-]{43}$`)

func readTestimony(fields map[string]json.RawMessage) Testimony {
	var t Testimony
	t.URI, _ = stringField(fields, "uri")
	label := func(key string) string {
		if _, present := fields[key]; !present {
			return ""
		}
		s, ok := stringField(fields, key)
		if !ok || utf8.RuneCountInString(s) > maxLabelChars {
			t.Rejected = append(t.Rejected, key)
			return ""
		}
		return s
	}
	t.MimeType = label("mimeType")
	t.Name = label("name")
	if _, present := fields["expiresAt"]; present {
		s, ok := stringField(fields, "expiresAt")
		if ok && utf8.RuneCountInString(s) <= maxExpiresChars {
			t.ExpiresAt = s
		} else {
			t.Rejected = append(t.Rejected, "expiresAt")
		}
	}
	if v, present := fields["sizeBytes"]; present {
		if n, ok := safeInteger(v); ok {
			t.SizeBytes, t.HasSize = n, true
		} else {
			t.Rejected = append(t.Rejected, "sizeBytes")
		}
	}
	if _, present := fields["digest"]; present {
		if s, ok := stringField(fields, "digest"); ok && digestRule.MatchString(s) {
			t.Digest = s
		} else {
			t.Rejected = append(t.Rejected, "digest")
		}
	}
	if _, present := fields["disposition"]; present {
		if s, ok := stringField(fields, "disposition"); ok && (s == "never" || s == "ref") {
			t.Disposition = s
		} else {
			t.Rejected = append(t.Rejected, "disposition")
		}
	}
	return t
}

// safeInteger reads a JSON number that is an integer from 0 to 2^53-1.
func safeInteger(v json.RawMessage) (int64, bool) {
	var num json.Number
	// json.Number would take a quoted number too; the schema says integer.
	if len(v) == 0 || v[0] == '"' || json.Unmarshal(v, &num) != nil {
		return 0, false
	}
	if n, err := strconv.ParseInt(string(num), 10, 64); err == nil {
		return n, n >= 0 && n <= maxSafeInteger
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil || f != math.Trunc(f) || f < 0 || f > maxSafeInteger {
		return 0, false
	}
	return int64(f), true
}

// Expiry is what a reference's expiresAt says now.
type Expiry int

// Expiry states.
const (
	// ExpiryNone: no expiry claimed, or one still ahead.
	ExpiryNone Expiry = iota
	// ExpiryPassed: its expiresAt has passed.
	ExpiryPassed
	// ExpiryUnreadable: its expiresAt does not parse (fail closed).
	ExpiryUnreadable
	// ExpiryRejected: its expiresAt was rejected as a field, over 64
	// bytes or not a string (fail closed).
	ExpiryRejected
)

// ExpiryAt reads the testimony's expiry against now.
func (t *Testimony) ExpiryAt(now time.Time) Expiry {
	for _, f := range t.Rejected {
		if f == "expiresAt" {
			return ExpiryRejected
		}
	}
	if t.ExpiresAt == "" {
		return ExpiryNone
	}
	at, err := time.Parse(time.RFC3339Nano, t.ExpiresAt)
	if err != nil {
		return ExpiryUnreadable
	}
	if !now.Before(at) {
		return ExpiryPassed
	}
	return ExpiryNone
}

// Provenance: where a reference came from, as its stub says.
const (
	ProvenanceChannelMessage = "attachment on channel message"
	ProvenancePushEvent      = "attachment on push event"
	ProvenanceToolResult     = "from tool result"
)

// The last part of a stub: what the agent can do with the reference, or
// why it can't.
const (
	TailFetch            = "fetch with fetch_reference"
	TailExpired          = "expired"
	TailExpiryUnreadable = "treated as expired, since its expiry time can't be read"
	TailExpiryRejected   = "treated as expired, since its expiry time isn't in a form this host accepts"
	TailUnbound          = "not tied to any server, so there's nowhere to fetch it from"
)

// Tail is the stub's last part for a reference with t, bound to a server
// or not, at now.
func Tail(t *Testimony, bound bool, now time.Time) string {
	switch t.ExpiryAt(now) {
	case ExpiryPassed:
		return TailExpired
	case ExpiryUnreadable:
		return TailExpiryUnreadable
	case ExpiryRejected:
		return TailExpiryRejected
	}
	if !bound {
		return TailUnbound
	}
	return TailFetch
}

// Display bounds of a stub's parts, in runes: the stub's length is
// bounded whatever the server sent (RFC-005 §5).
const (
	stubNameRunes       = 80
	stubMimeRunes       = 60
	stubProvenanceRunes = 80
	stubTailRunes       = 160
	// MaxStubRunes bounds a whole stub.
	MaxStubRunes = 32 + stubNameRunes + stubMimeRunes + 40 + stubProvenanceRunes + stubTailRunes
)

// Stub is a reference's model-visible form (RFC-005 §5), one uniform
// shape:
//
//	[<refId>] <name> — <mime>, ~<size> claimed — <provenance> — <tail>
//
// The link never appears in it, whatever the disposition. Every server
// string is cleaned of control and bidirectional characters and cut to
// its display bound, marked with "…".
func Stub(refID string, t *Testimony, provenance, tail string) string {
	name := bound(withhold(clean(t.Name), t.URI), stubNameRunes)
	if name == "" {
		name = "unnamed"
	}
	mime := bound(withhold(clean(t.MimeType), t.URI), stubMimeRunes)
	if mime == "" {
		mime = "type not given"
	}
	size := "size not claimed"
	if t.HasSize {
		size = "~" + SizeText(t.SizeBytes) + " claimed"
	}
	return fmt.Sprintf("[%s] %s — %s, %s — %s — %s", bound(clean(refID), 32), name, mime, size,
		bound(clean(provenance), stubProvenanceRunes), bound(clean(tail), stubTailRunes))
}

// withhold replaces each part of label that repeats minWithheldLink or
// more bytes of the link (the link whole, a cut of it, its signed query)
// with "(link withheld)": a server that put its link in a label doesn't
// get it shown.
func withhold(label, link string) string {
	if len(link) < minWithheldLink || len(label) < minWithheldLink {
		return label
	}
	grams := make(map[string]bool, len(link))
	for i := 0; i+minWithheldLink <= len(link); i++ {
		grams[link[i:i+minWithheldLink]] = true
	}
	covered := make([]bool, len(label))
	hit := false
	for i := 0; i+minWithheldLink <= len(label); i++ {
		if grams[label[i:i+minWithheldLink]] {
			hit = true
			for j := i; j < i+minWithheldLink; j++ {
				covered[j] = true
			}
		}
	}
	if !hit {
		return label
	}
	var b strings.Builder
	for i := 0; i < len(label); {
		if !covered[i] {
			j := i
			for j < len(label) && !covered[j] {
				j++
			}
			b.WriteString(strings.ToValidUTF8(label[i:j], ""))
			i = j
			continue
		}
		for i < len(label) && covered[i] {
			i++
		}
		b.WriteString("(link withheld)")
	}
	return b.String()
}

// minWithheldLink is the shortest piece of a link a stub looks for in its
// labels: shorter ones are too common to mean a leak.
const minWithheldLink = 8

// SizeText renders a byte count: "12 bytes", "4.0 MiB".
func SizeText(n int64) string {
	if n < 1024 {
		if n == 1 {
			return "1 byte"
		}
		return fmt.Sprintf("%d bytes", n)
	}
	f := float64(n)
	for _, unit := range []string{"KiB", "MiB", "GiB", "TiB", "PiB"} {
		f /= 1024
		if f < 1024 || unit == "PiB" {
			return fmt.Sprintf("%.1f %s", f, unit)
		}
	}
	return ""
}
