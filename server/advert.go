package server

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/protocol"
)

// advertisement builds experimental.mcpl (SPEC §5.1): version 0.5, each
// capability path as a nested member, then featureSets in the 0.5 record
// form when any is declared. Members appear in the order declared, so the
// advertisement reads as the server's author wrote it.
//
// The walk is generic over dot paths: no member name is special. A path
// with sub-capabilities in the vocabulary is written as an object (its
// declared children, or none), never as true, because true is shorthand
// for every leaf beneath it and would claim leaves the server did not
// declare.
func advertisement(caps []string, sets []FeatureSet) json.RawMessage {
	root := &object{}
	root.set("version", protocol.MCPLVersion05)
	for _, p := range caps {
		if p == "tools" {
			continue // MCP's own capability, advertised as capabilities.tools
		}
		setPath(root, p)
	}
	if len(sets) > 0 {
		fs := &object{}
		for _, s := range sets {
			decl := &object{}
			decl.set("description", s.Description)
			decl.set("uses", s.Uses)
			fs.set(s.Name, decl)
		}
		root.set("featureSets", fs)
	}
	b, err := json.Marshal(root)
	if err != nil {
		panic("server: encoding the advertisement: " + err.Error()) // strings and bools only
	}
	return b
}

// setPath marks a dotted path in a nested object.
func setPath(root *object, path string) {
	segs := strings.Split(path, ".")
	n := root
	for i, seg := range segs {
		last := i == len(segs)-1
		sub := strings.Join(segs[:i+1], ".")
		if last && !hasChildren(sub) {
			if _, isObj := n.get(seg).(*object); !isObj {
				n.set(seg, true)
			}
			return
		}
		next, ok := n.get(seg).(*object)
		if !ok {
			next = &object{}
			n.set(seg, next)
		}
		n = next
	}
}

// hasChildren reports whether the vocabulary has paths beneath path.
func hasChildren(path string) bool {
	for _, p := range grant.Vocabulary {
		if strings.HasPrefix(p, path+".") {
			return true
		}
	}
	return false
}

// object is a JSON object that keeps its members in insertion order.
type object struct {
	keys []string
	vals []any
}

func (o *object) get(k string) any {
	for i, key := range o.keys {
		if key == k {
			return o.vals[i]
		}
	}
	return nil
}

// set adds k, or replaces its value in place.
func (o *object) set(k string, v any) {
	for i, key := range o.keys {
		if key == k {
			o.vals[i] = v
			return
		}
	}
	o.keys = append(o.keys, k)
	o.vals = append(o.vals, v)
}

// MarshalJSON implements json.Marshaler.
func (o *object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		vb, err := json.Marshal(o.vals[i])
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
