// Package ordered is a JSON object that keeps its members in insertion
// order, for documents a person reads (an advertisement, a schema) where
// encoding/json's sorted map keys would scramble what the author wrote.
package ordered

import (
	"bytes"
	"encoding/json"
)

// Object is a JSON object whose members marshal in the order first set.
// The zero value is an empty object.
type Object struct {
	keys []string
	vals []any
}

// Get returns k's value, or nil.
func (o *Object) Get(k string) any {
	for i, key := range o.keys {
		if key == k {
			return o.vals[i]
		}
	}
	return nil
}

// Set adds k with v, or replaces k's value where it stands.
func (o *Object) Set(k string, v any) {
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
func (o *Object) MarshalJSON() ([]byte, error) {
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
