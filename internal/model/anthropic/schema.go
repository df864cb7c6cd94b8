package anthropic

import (
	"encoding/json"

	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/internal/model/schema"
)

var _ model.SchemaFitter = (*Model)(nil)

// FitSchema fits a tool's input schema to what the Messages API accepts
// as a custom tool's input_schema (schema.Anthropic: unchanged, repaired
// without loss, or refused with the rule).
func (m *Model) FitSchema(s json.RawMessage) (json.RawMessage, error) {
	return schema.Anthropic(s)
}
