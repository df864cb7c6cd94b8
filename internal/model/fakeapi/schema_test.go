package fakeapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/internal/model/fakeapi"
)

// TestSchemaRefusedThroughProvider: a request whose tool schema the API
// refuses as it is (here one the schema package would repair) is refused
// with HTTP 400 in the provider's words, recorded, listed by
// SchemaRefusals, takes no Reply and is not answered; the same tool with
// its schema fitted by the provider's FitSchema is taken.
func TestSchemaRefusedThroughProvider(t *testing.T) {
	cases := map[string]struct {
		schema string
		want   string
		quoted string // what the error quotes (the key, "k", is redacted from it)
	}{
		"openai":    {`{"type":"object","properties":{"content":{"type":"array"}}}`, "Invalid schema for function 'pub': In context=('properties', 'content'), array schema missing items.", "array schema missing items"},
		"anthropic": {`{"properties":{"a":{"type":"string"}}}`, "tools.0.custom.input_schema: JSON schema is invalid. It must match JSON Schema draft 2020-12 (the input schema breaks the rule top-type at the top level: the schema has no type; it must be object).", "tools.0.custom.input_schema: JSON schema is invalid"},
	}
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			c := cases[p.name]
			s := p.serve(t, fakeapi.Reply{Text: "taken"})
			m := p.model(t, s.URL)
			tool := model.Tool{Name: "pub", Description: "Posts.", InputSchema: json.RawMessage(c.schema)}
			req := model.Request{Messages: []model.Message{user("hi")}, Tools: []model.Tool{tool}}
			_, err := m.Generate(context.Background(), req)
			var me *model.Error
			if !errors.As(err, &me) || me.Retryable || !strings.Contains(me.Text, c.quoted) {
				t.Errorf("Generate: %v, want a *model.Error, not retryable, quoting %q", err, c.quoted)
			}
			if got := s.SchemaRefusals(); !reflect.DeepEqual(got, []string{c.want}) {
				t.Errorf("SchemaRefusals() = %q, want %q", got, c.want)
			}
			if n := s.Answered(); n != 0 {
				t.Errorf("Answered() = %d, want 0", n)
			}

			fitted, err := m.(model.SchemaFitter).FitSchema(tool.InputSchema)
			if err != nil {
				t.Fatal(err)
			}
			tool.InputSchema = fitted
			req.Tools = []model.Tool{tool}
			resp, err := m.Generate(context.Background(), req)
			if err != nil || resp.Text() != "taken" {
				t.Errorf("with the schema fitted: %q, %v; want the first Reply, taken", resp.Text(), err)
			}
			if n := len(s.Requests()); n != 2 {
				t.Errorf("%d requests recorded, want 2 (the refused one too)", n)
			}
			if n := len(s.SchemaRefusals()); n != 1 {
				t.Errorf("%d refusals, want still 1", n)
			}
		})
	}
}

// TestSchemaRefusalWire: the refusals' bodies are the APIs' error shapes,
// for the tool that breaks a rule (not the first tool), and a tool the
// API takes as it is, or one with no schema where the API allows that,
// passes.
func TestSchemaRefusalWire(t *testing.T) {
	cases := []struct {
		name  string
		serve func(testing.TB, ...fakeapi.Reply) *fakeapi.Server
		path  string
		body  string
		want  string // the response's JSON; "" for taken
	}{
		{"openai refused", fakeapi.NewOpenAI, "/v1/chat/completions",
			`{"model":"m","stream":true,"tools":[{"type":"function","function":{"name":"ok","parameters":{"type":"object","properties":{}}}},` +
				`{"type":"function","function":{"name":"bad","parameters":{"type":"object","properties":{"n":{"type":"int"}}}}}]}`,
			`{"error":{"message":"Invalid schema for function 'bad': In context=('properties', 'n', 'type'), \"int\" is not a JSON Schema type (string, number, integer, boolean, object, array, null) (rule type-name).","type":"invalid_request_error","param":"tools[1].function.parameters","code":"invalid_function_parameters"}}`},
		{"openai no parameters taken", fakeapi.NewOpenAI, "/v1/chat/completions",
			`{"model":"m","stream":true,"tools":[{"type":"function","function":{"name":"ok"}}]}`, ""},
		{"openai top without properties", fakeapi.NewOpenAI, "/v1/chat/completions",
			`{"model":"m","stream":true,"tools":[{"type":"function","function":{"name":"t","parameters":{"type":"object"}}}]}`,
			`{"error":{"message":"Invalid schema for function 't': In context=(), object schema missing properties.","type":"invalid_request_error","param":"tools[0].function.parameters","code":"invalid_function_parameters"}}`},
		{"anthropic refused", fakeapi.NewAnthropic, "/v1/messages",
			`{"model":"m","stream":true,"tools":[{"name":"ok","input_schema":{"type":"object"}},{"name":"u","input_schema":{"type":"object","anyOf":[{"required":["a"]}]}}]}`,
			`{"type":"error","error":{"type":"invalid_request_error","message":"tools.1.custom.input_schema: input_schema does not support oneOf, allOf, or anyOf at the top level"},"request_id":"req_fake"}`},
		{"anthropic missing schema", fakeapi.NewAnthropic, "/v1/messages",
			`{"model":"m","stream":true,"tools":[{"name":"ok"}]}`,
			`{"type":"error","error":{"type":"invalid_request_error","message":"tools.0.custom.input_schema: Field required"},"request_id":"req_fake"}`},
		{"anthropic server tool taken", fakeapi.NewAnthropic, "/v1/messages",
			`{"model":"m","stream":true,"tools":[{"type":"web_search_20250305","name":"web_search"},{"name":"ok","input_schema":{"type":"object","properties":{"l":{"type":"array"}}}}]}`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.serve(t)
			base := strings.TrimSuffix(s.URL, "/v1")
			resp, err := http.Post(base+c.path, "application/json", strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if c.want == "" {
				if resp.StatusCode != http.StatusOK || len(s.SchemaRefusals()) != 0 {
					t.Errorf("HTTP %d %s, refusals %q; want it taken", resp.StatusCode, raw, s.SchemaRefusals())
				}
				return
			}
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("HTTP %d, want 400", resp.StatusCode)
			}
			var got, want any
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatalf("the answer %s is not JSON: %v", raw, err)
			}
			json.Unmarshal([]byte(c.want), &want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %s\nwant %s", raw, c.want)
			}
			if n := s.Answered(); n != 0 || len(s.Requests()) != 1 {
				t.Errorf("Answered() = %d, %d recorded; want 0 and 1", n, len(s.Requests()))
			}
		})
	}
}
