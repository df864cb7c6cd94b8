package openai

import (
	"encoding/json"

	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/internal/model/schema"
)

var _ model.SchemaFitter = (*Model)(nil)

// FitSchema fits a tool's input schema to what Chat Completions accepts
// as a function's parameters, non-strict, as this package sends them
// (schema.OpenAI: unchanged, repaired without loss, or refused with the
// rule). A server that speaks the API (Options.BaseURL) is held to
// OpenAI's rules too: they are the API's.
func (m *Model) FitSchema(s json.RawMessage) (json.RawMessage, error) {
	return schema.OpenAI(s)
}
