package server

import (
	"encoding/json"
	"reflect"
	"strings"
	"time"

	"github.com/mcpl-go/mcpl/internal/ordered"
)

// SchemaFor returns a JSON Schema for the arguments a value of type T
// decodes from, as encoding/json would decode them. It is a simple schema,
// enough for a model to call a tool right:
//
//   - a struct is an object whose properties are its exported fields, named
//     by their json tags ("-" leaves a field out; embedded structs are
//     flattened, as encoding/json does), in field order; a field is
//     required unless its tag says omitempty or omitzero, or it is a
//     pointer; a `jsonschema:"..."` tag is the property's description;
//   - strings (and time.Time, and []byte) are "string", bools "boolean",
//     integers "integer", floats "number";
//   - slices and arrays are "array" with their element's items;
//   - maps are "object"; interfaces and json.RawMessage are any value ({}).
//
// The top level is always an object: a T that is not a struct gives
// {"type":"object"}.
func SchemaFor[T any]() json.RawMessage {
	t := reflect.TypeFor[T]()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var s any = typed("object")
	if t.Kind() == reflect.Struct && t != timeType {
		s = schemaOf(t, map[reflect.Type]bool{})
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic("server: encoding a schema: " + err.Error()) // strings, bools and objects only
	}
	return b
}

// typed is the schema {"type": name}, to which more may be added.
func typed(name string) *ordered.Object {
	o := &ordered.Object{}
	o.Set("type", name)
	return o
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

// schemaOf is t's schema; seen guards against recursive types, which get
// {} where they recur.
func schemaOf(t reflect.Type, seen map[reflect.Type]bool) any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType:
		return typed("string")
	case t == rawType:
		return &ordered.Object{}
	}
	switch t.Kind() {
	case reflect.String:
		return typed("string")
	case reflect.Bool:
		return typed("boolean")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return typed("integer")
	case reflect.Float32, reflect.Float64:
		return typed("number")
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			return typed("string") // base64, as encoding/json writes []byte
		}
		o := typed("array")
		o.Set("items", schemaOf(t.Elem(), seen))
		return o
	case reflect.Map:
		return typed("object")
	case reflect.Struct:
		if seen[t] {
			return &ordered.Object{}
		}
		seen[t] = true
		defer delete(seen, t)
		o := typed("object")
		props := &ordered.Object{}
		var required []string
		structFields(t, props, &required, seen)
		o.Set("properties", props)
		if len(required) > 0 {
			o.Set("required", required)
		}
		return o
	}
	return &ordered.Object{} // interfaces, and anything else: any value
}

// structFields adds t's fields to props, flattening embedded structs.
func structFields(t reflect.Type, props *ordered.Object, required *[]string, seen map[reflect.Type]bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				structFields(ft, props, required, seen)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		ps := schemaOf(ft, seen)
		if d := f.Tag.Get("jsonschema"); d != "" {
			if o, ok := ps.(*ordered.Object); ok {
				o.Set("description", d)
			}
		}
		props.Set(name, ps)
		optional := ft.Kind() == reflect.Pointer
		for _, opt := range strings.Split(opts, ",") {
			optional = optional || opt == "omitempty" || opt == "omitzero"
		}
		if !optional {
			*required = append(*required, name)
		}
	}
}
