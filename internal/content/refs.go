package content

import (
	"crypto/rand"
	"slices"
	"strconv"
	"sync"
)

// Refs is the host's registry of references (RFC-005 §5, §6): one record
// a link, under an id this host makes. Ids are never reused; past
// MaxRefs the oldest record is evicted, and a stale id is a defined miss,
// never another record. A reference is bound to every server that
// delivered it: fetch_reference may fetch it from any of them.
type Refs struct {
	mu     sync.Mutex
	byLink map[string]*Ref
	byID   map[string]*Ref
	order  []*Ref // oldest first
	next   uint64
	max    int
}

// Ref is one reference record: host-private (its link never reaches an
// agent).
type Ref struct {
	ID         string
	Testimony  Testimony
	Servers    []string // the servers that delivered it, first first
	Provenance string
	// Fetched: fetch_reference has it; its testimony is no longer
	// refreshed.
	Fetched bool
	Path    string
}

// DefaultMaxRefs bounds the records kept.
const DefaultMaxRefs = 2000

// NewRefs returns an empty registry keeping at most max records (0 means
// DefaultMaxRefs).
func NewRefs(max int) *Refs {
	if max <= 0 {
		max = DefaultMaxRefs
	}
	return &Refs{byLink: map[string]*Ref{}, byID: map[string]*Ref{}, max: max}
}

// Register records a reference a server delivered, and returns a copy of
// its record: the same record for the same link, bound to this server
// too, its testimony refreshed until it is fetched. server "" binds none.
func (r *Refs) Register(t Testimony, server, provenance string) Ref {
	r.mu.Lock()
	defer r.mu.Unlock()
	ref := r.byLink[t.URI]
	if ref == nil {
		r.next++
		ref = &Ref{ID: "ref_" + strconv.FormatUint(r.next, 36) + "_" + suffix(), Testimony: t, Provenance: provenance}
		r.byLink[t.URI] = ref
		r.byID[ref.ID] = ref
		r.order = append(r.order, ref)
		if len(r.order) > r.max {
			old := r.order[0]
			r.order = r.order[1:]
			delete(r.byLink, old.Testimony.URI)
			delete(r.byID, old.ID)
		}
	} else if !ref.Fetched {
		ref.Testimony = t
	}
	if server != "" && !slices.Contains(ref.Servers, server) {
		ref.Servers = append(ref.Servers, server)
	}
	return ref.copy()
}

// Lookup returns the record with id, if it is still kept.
func (r *Refs) Lookup(id string) (Ref, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ref := r.byID[id]
	if ref == nil {
		return Ref{}, false
	}
	return ref.copy(), true
}

// Fetched marks the record with id fetched and saved at path.
func (r *Refs) Fetched(id, path string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ref := r.byID[id]; ref != nil {
		ref.Fetched, ref.Path = true, path
	}
}

func (ref *Ref) copy() Ref {
	c := *ref
	c.Servers = append([]string(nil), ref.Servers...)
	c.Testimony.Rejected = append([]string(nil), ref.Testimony.Rejected...)
	return c
}

// suffix is 4 random base-36 characters: ids of one run don't line up
// with another's.
func suffix() string {
	const digits = "0123456789abcdefghijklmnopqrstuvwxyz"
	var b [4]byte
	rand.Read(b[:])
	for i := range b {
		b[i] = digits[int(b[i])%len(digits)]
	}
	return string(b[:])
}
