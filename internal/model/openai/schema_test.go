package openai

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/mcpl-go/mcpl/internal/model/schema"
)

// FitSchema is the schema package's rules for this provider: a bad type
// name is refused with its rule, a good schema comes back as it was.
func TestFitSchema(t *testing.T) {
	var m *Model
	good := json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`)
	if got, err := m.FitSchema(good); err != nil || string(got) != string(good) {
		t.Errorf("a good schema: got %s, %v", got, err)
	}
	_, err := m.FitSchema(json.RawMessage(`{"type":"object","properties":{"a":{"type":"str"}}}`))
	var se *schema.Error
	if !errors.As(err, &se) || se.Rule != schema.RuleTypeName {
		t.Errorf("a bad type name: got %v, want rule %s", err, schema.RuleTypeName)
	}
}

// OpenAI's own rule: an array needs items.
func TestFitSchemaArrayItems(t *testing.T) {
	var m *Model
	got, err := m.FitSchema(json.RawMessage(`{"type":"object","properties":{"c":{"type":"array"}}}`))
	if err != nil || string(got) != `{"properties":{"c":{"items":{},"type":"array"}},"type":"object"}` {
		t.Errorf("got %s, %v", got, err)
	}
}
