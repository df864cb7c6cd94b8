// Package anthropic is the Anthropic provider of model.Model: it calls the
// Messages API through the official SDK (github.com/anthropics/anthropic-sdk-go/v2).
//
// Decisions:
//
//   - Every call streams (server-sent events). Text deltas reach
//     Request.OnText in order as they arrive, and the events are
//     accumulated into the final message, which becomes the Response.
//   - The API key is read from Options.APIKeyEnv (default
//     ANTHROPIC_API_KEY) through Options.LookupEnv at each call, surrounding
//     white space trimmed, and sent in the x-api-key header, the header the
//     Messages API documents. It is never kept in the Model, an error or a
//     log. An unset or empty variable fails the call before any request with
//     a *model.Error wrapping model.ErrNoKey whose Text names the variable.
//   - The SDK's environment defaults are off (option.WithoutEnvironmentDefaults):
//     ANTHROPIC_BASE_URL, ANTHROPIC_AUTH_TOKEN, profiles and custom headers
//     from the environment do not apply; Options alone configure the client.
//   - The SDK does not retry (max retries 0): one Generate is one HTTP
//     request, and the agent layer decides about retrying from
//     model.Error.Retryable.
//   - Errors are *model.Error with Text in plain words (what happened, the
//     provider's own message if it gave one, and whether retrying may help)
//     and Err wrapping the SDK's error (an *anthropic.Error for API errors).
//     Retryable: HTTP 408, 409, 429 and 5xx (529 "overloaded" included), the
//     rate-limit, overloaded, timeout and internal error types of an error
//     event in the middle of a stream, network failures, and a stream that
//     ends before message_stop; an x-should-retry header on an error response
//     overrides the status. Not retryable: 400, 401, 402, 403, 404, 413 and
//     other client errors, a malformed request (caught before sending, no
//     request made) and a stream this package cannot follow. The key's value
//     is removed from every Text, even where the provider echoes it.
//   - Cancellation: when ctx is done, Generate returns ctx.Err() as it is
//     (context.Canceled or context.DeadlineExceeded, not a *model.Error),
//     since it is the caller's decision, not a provider failure; the partial
//     answer is dropped (its deltas have already reached OnText).
//   - Stop reasons: end_turn → EndTurn, tool_use → StopToolUse, max_tokens and
//     model_context_window_exceeded → MaxTokens, refusal → Refused;
//     stop_sequence and pause_turn (neither is asked for here) → EndTurn; an
//     absent or unknown reason → StopToolUse when the answer holds tool calls,
//     else EndTurn.
//   - Request mapping: System becomes one system text block; empty text
//     blocks are left out (the API rejects them); images are base64 sources
//     with their media type; tool_use Args and tool InputSchema are sent as
//     the raw JSON given ("{}" and {"type":"object"} when empty) and must be
//     JSON objects; a tool result holds text and images and always carries
//     is_error. MaxTokens is the request's, else Options.MaxTokens.
//   - Response mapping: text and tool_use blocks are kept (tool_use Args is
//     the assembled input JSON); other block types (thinking, server tools)
//     are dropped. Usage is input_tokens and output_tokens as reported
//     (cache tokens are not added in). Model is the model that answered, as
//     the provider named it.
package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/mcpl-go/mcpl/internal/model"
)

// Vendor is the Info.Vendor of an Anthropic model.
const Vendor = "anthropic"

// Defaults of Options.
const (
	DefaultAPIKeyEnv = "ANTHROPIC_API_KEY"
	DefaultMaxTokens = 1024
)

// Options configure a Model.
type Options struct {
	// Model is the API's model name, e.g. "claude-sonnet-4-5"; required.
	Model string
	// APIKeyEnv is the environment variable holding the API key;
	// DefaultAPIKeyEnv when empty.
	APIKeyEnv string
	// LookupEnv reads the key at each call; os.LookupEnv when nil.
	LookupEnv func(string) (string, bool)
	// BaseURL is the API's base URL; the SDK's default when empty.
	BaseURL string
	// MaxTokens is used when a request gives none; DefaultMaxTokens when 0.
	MaxTokens int
	// HTTPClient, if set, makes the requests; else a clone of
	// http.DefaultTransport with a 10-minute response-header timeout.
	HTTPClient *http.Client
	// ContextWindow is reported by Info; 0 when unknown.
	ContextWindow int
}

// Model is an Anthropic model. It is safe for concurrent use.
type Model struct {
	opts   Options
	client sdk.Client
}

var _ model.Model = (*Model)(nil)

// New returns the model that opts describe.
func New(opts Options) (*Model, error) {
	if strings.TrimSpace(opts.Model) == "" {
		return nil, errors.New("anthropic: Options.Model is required")
	}
	if opts.MaxTokens < 0 {
		return nil, fmt.Errorf("anthropic: Options.MaxTokens is %d, want 0 (the default) or more", opts.MaxTokens)
	}
	if opts.ContextWindow < 0 {
		return nil, fmt.Errorf("anthropic: Options.ContextWindow is %d, want 0 (unknown) or more", opts.ContextWindow)
	}
	if opts.APIKeyEnv == "" {
		opts.APIKeyEnv = DefaultAPIKeyEnv
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	if opts.MaxTokens == 0 {
		opts.MaxTokens = DefaultMaxTokens
	}
	ro := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithMaxRetries(0),
	}
	if opts.BaseURL != "" {
		u, err := url.Parse(opts.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("anthropic: Options.BaseURL %q is not an http or https URL", opts.BaseURL)
		}
		ro = append(ro, option.WithBaseURL(opts.BaseURL))
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = defaultHTTPClient()
	}
	ro = append(ro, option.WithHTTPClient(hc))
	return &Model{opts: opts, client: sdk.NewClient(ro...)}, nil
}

// defaultHTTPClient is the client of a Model given none, like the SDK's own
// default (which option.WithoutEnvironmentDefaults leaves out): a clone of
// http.DefaultTransport that gives up on a server sending no response
// headers for 10 minutes. The body of a long answer is not limited.
func defaultHTTPClient() *http.Client {
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		t = t.Clone()
		t.ResponseHeaderTimeout = 10 * time.Minute
		return &http.Client{Transport: t}
	}
	return &http.Client{Transport: http.DefaultTransport}
}

// Info describes the model.
func (m *Model) Info() model.Info {
	return model.Info{ID: m.opts.Model, Vendor: Vendor, ContextWindow: m.opts.ContextWindow}
}

// Generate makes one streamed Messages API call.
func (m *Model) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	if err := ctx.Err(); err != nil {
		return model.Response{}, err
	}
	key, ok := m.opts.LookupEnv(m.opts.APIKeyEnv)
	key = strings.TrimSpace(key)
	if !ok || key == "" {
		return model.Response{}, &model.Error{
			Text: fmt.Sprintf("The model provider %q has no API key: set the environment variable %s.", Vendor, m.opts.APIKeyEnv),
			Err:  model.ErrNoKey,
		}
	}
	params, err := m.params(req)
	if err != nil {
		return model.Response{}, &model.Error{
			Text: fmt.Sprintf("The request to the model provider %q is malformed, so it was not sent: %v.", Vendor, err),
			Err:  err,
		}
	}

	stream := m.client.Messages.NewStreaming(ctx, params, option.WithHeader("x-api-key", key))
	defer stream.Close()
	var msg sdk.Message
	complete := false
	for !complete && stream.Next() {
		ev := stream.Current()
		if err := msg.Accumulate(ev); err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return model.Response{}, ctxErr
			}
			return model.Response{}, &model.Error{
				Text: redact(fmt.Sprintf("The model provider %q sent a stream this host could not follow (%v); retrying may not help.", Vendor, err), key),
				Err:  err,
			}
		}
		switch ev.Type {
		case "content_block_delta":
			if ev.Delta.Type == "text_delta" && ev.Delta.Text != "" && req.OnText != nil {
				req.OnText(ev.Delta.Text)
			}
		case "message_stop":
			complete = true
		}
	}
	if err := stream.Err(); err != nil {
		return model.Response{}, m.callError(ctx, err, key)
	}
	if err := ctx.Err(); err != nil {
		return model.Response{}, err
	}
	if !complete {
		err := errors.New("anthropic: stream ended before message_stop")
		return model.Response{}, &model.Error{
			Text:      fmt.Sprintf("The model provider %q ended its answer before it was complete; retrying may work.", Vendor),
			Retryable: true,
			Err:       err,
		}
	}
	return m.response(&msg), nil
}

// params maps a request to the Messages API's.
func (m *Model) params(req model.Request) (sdk.MessageNewParams, error) {
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = m.opts.MaxTokens
	}
	p := sdk.MessageNewParams{
		Model:     m.opts.Model,
		MaxTokens: int64(maxTokens),
		Messages:  make([]sdk.MessageParam, 0, len(req.Messages)),
	}
	if req.System != "" {
		p.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	for i, msg := range req.Messages {
		blocks, err := contentParams(msg.Content)
		if err != nil {
			return p, fmt.Errorf("message %d: %w", i, err)
		}
		switch msg.Role {
		case model.User:
			p.Messages = append(p.Messages, sdk.NewUserMessage(blocks...))
		case model.Assistant:
			p.Messages = append(p.Messages, sdk.NewAssistantMessage(blocks...))
		default:
			return p, fmt.Errorf("message %d has role %q, want %q or %q", i, msg.Role, model.User, model.Assistant)
		}
	}
	for _, t := range req.Tools {
		if t.Name == "" {
			return p, errors.New("a tool has no name")
		}
		schema, err := object(t.InputSchema, `{"type":"object"}`)
		if err != nil {
			return p, fmt.Errorf("tool %q has an input schema that %w", t.Name, err)
		}
		tp := &sdk.ToolParam{
			Name:        t.Name,
			InputSchema: param.Override[sdk.ToolInputSchemaParam](schema),
		}
		if t.Description != "" {
			tp.Description = sdk.String(t.Description)
		}
		p.Tools = append(p.Tools, sdk.ToolUnionParam{OfTool: tp})
	}
	return p, nil
}

// contentParams maps a message's blocks.
func contentParams(blocks []model.Block) ([]sdk.ContentBlockParamUnion, error) {
	out := make([]sdk.ContentBlockParamUnion, 0, len(blocks))
	for j, b := range blocks {
		switch b.Type {
		case model.Text:
			if b.Text != "" {
				out = append(out, sdk.NewTextBlock(b.Text))
			}
		case model.Image:
			img, err := imageParam(b)
			if err != nil {
				return nil, fmt.Errorf("block %d: %w", j, err)
			}
			out = append(out, sdk.ContentBlockParamUnion{OfImage: img})
		case model.ToolUse:
			if b.ToolCall == nil {
				return nil, fmt.Errorf("block %d is a tool_use without its call", j)
			}
			args, err := object(b.ToolCall.Args, `{}`)
			if err != nil {
				return nil, fmt.Errorf("block %d: the arguments of tool call %q %w", j, b.ToolCall.ID, err)
			}
			out = append(out, sdk.ContentBlockParamUnion{OfToolUse: &sdk.ToolUseBlockParam{
				ID:    b.ToolCall.ID,
				Name:  b.ToolCall.Name,
				Input: args,
			}})
		case model.ToolResult:
			if b.Result == nil {
				return nil, fmt.Errorf("block %d is a tool_result without its result", j)
			}
			tr := &sdk.ToolResultBlockParam{
				ToolUseID: b.Result.CallID,
				IsError:   sdk.Bool(b.Result.IsError),
			}
			for k, c := range b.Result.Content {
				switch c.Type {
				case model.Text:
					if c.Text != "" {
						tr.Content = append(tr.Content, sdk.ToolResultBlockParamContentUnion{OfText: &sdk.TextBlockParam{Text: c.Text}})
					}
				case model.Image:
					img, err := imageParam(c)
					if err != nil {
						return nil, fmt.Errorf("block %d, result block %d: %w", j, k, err)
					}
					tr.Content = append(tr.Content, sdk.ToolResultBlockParamContentUnion{OfImage: img})
				default:
					return nil, fmt.Errorf("block %d: a tool result holds a %q block, but only text and images are allowed", j, c.Type)
				}
			}
			out = append(out, sdk.ContentBlockParamUnion{OfToolResult: tr})
		default:
			return nil, fmt.Errorf("block %d has unknown type %q", j, b.Type)
		}
	}
	return out, nil
}

func imageParam(b model.Block) (*sdk.ImageBlockParam, error) {
	if b.MimeType == "" || b.Data == "" {
		return nil, errors.New("an image needs both its media type and its base64 data")
	}
	return &sdk.ImageBlockParam{Source: sdk.ImageBlockParamSourceUnion{
		OfBase64: &sdk.Base64ImageSourceParam{
			Data:      b.Data,
			MediaType: sdk.Base64ImageSourceMediaType(b.MimeType),
		},
	}}, nil
}

// object checks that raw is a JSON object, returning empty when raw is
// empty. Its error completes a sentence.
func object(raw json.RawMessage, empty string) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 {
		return json.RawMessage(empty), nil
	}
	if !json.Valid(trimmed) {
		return nil, errors.New("is not valid JSON")
	}
	if trimmed[0] != '{' {
		return nil, errors.New("is not a JSON object")
	}
	return json.RawMessage(trimmed), nil
}

// response maps the accumulated message.
func (m *Model) response(msg *sdk.Message) model.Response {
	r := model.Response{
		Usage: model.Usage{
			InputTokens:  int(msg.Usage.InputTokens),
			OutputTokens: int(msg.Usage.OutputTokens),
		},
		Model: msg.Model,
	}
	if r.Model == "" {
		r.Model = m.opts.Model
	}
	calls := false
	for _, c := range msg.Content {
		switch c.Type {
		case "text":
			r.Content = append(r.Content, model.Block{Type: model.Text, Text: c.Text})
		case "tool_use":
			args := json.RawMessage(bytes.Clone(bytes.TrimSpace(c.Input)))
			if len(args) == 0 || !json.Valid(args) {
				args = json.RawMessage(`{}`)
			}
			r.Content = append(r.Content, model.Block{
				Type:     model.ToolUse,
				ToolCall: &model.ToolCall{ID: c.ID, Name: c.Name, Args: args},
			})
			calls = true
		}
	}
	r.Stop = stopReason(msg.StopReason, calls)
	return r
}

// stopReason maps the API's stop reason; calls says whether the answer
// holds tool calls.
func stopReason(s sdk.StopReason, calls bool) model.StopReason {
	switch s {
	case sdk.StopReasonEndTurn, sdk.StopReasonStopSequence, sdk.StopReasonPauseTurn:
		return model.EndTurn
	case sdk.StopReasonToolUse:
		return model.StopToolUse
	case sdk.StopReasonMaxTokens, sdk.StopReasonModelContextWindowExceeded:
		return model.MaxTokens
	case sdk.StopReasonRefusal:
		return model.Refused
	}
	if calls {
		return model.StopToolUse
	}
	return model.EndTurn
}

// callError maps a failed call: ctx.Err() when ctx is done, else a
// *model.Error.
func (m *Model) callError(ctx context.Context, err error, key string) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	var aerr *sdk.Error
	if !errors.As(err, &aerr) {
		return &model.Error{
			Text:      redact(fmt.Sprintf("The model provider %q could not be reached or the connection failed (%v); retrying later may work.", Vendor, err), key),
			Retryable: true,
			Err:       err,
		}
	}
	typ := string(aerr.Type())
	what, retryable := m.classify(aerr.StatusCode, typ)
	if aerr.Response != nil && aerr.StatusCode >= 400 {
		switch aerr.Response.Header.Get("x-should-retry") {
		case "true":
			retryable = true
		case "false":
			retryable = false
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The model provider %q %s (", Vendor, what)
	if aerr.StatusCode >= 400 {
		fmt.Fprintf(&b, "HTTP %d", aerr.StatusCode)
		if typ != "" {
			b.WriteString(", ")
		}
	} else {
		b.WriteString("an error event in the stream")
		if typ != "" {
			b.WriteString(": ")
		}
	}
	b.WriteString(typ)
	b.WriteString(")")
	if msg := strings.TrimSpace(aerr.Message); msg != "" {
		fmt.Fprintf(&b, ": %s", truncate(redact(msg, key), 300))
	}
	if retryable {
		b.WriteString("; retrying later may work.")
	} else {
		b.WriteString("; retrying the same request will not help.")
	}
	return &model.Error{Text: redact(b.String(), key), Retryable: retryable, Err: err}
}

// classify says what an API error means, by its type when known (an error
// event inside a stream comes with status 200), else by its status.
func (m *Model) classify(status int, typ string) (what string, retryable bool) {
	switch typ {
	case "invalid_request_error":
		status = http.StatusBadRequest
	case "authentication_error":
		status = http.StatusUnauthorized
	case "billing_error":
		status = http.StatusPaymentRequired
	case "permission_error":
		status = http.StatusForbidden
	case "not_found_error":
		status = http.StatusNotFound
	case "request_too_large":
		status = http.StatusRequestEntityTooLarge
	case "rate_limit_error":
		status = http.StatusTooManyRequests
	case "timeout_error":
		status = http.StatusGatewayTimeout
	case "api_error":
		status = http.StatusInternalServerError
	case "overloaded_error":
		status = 529
	}
	switch {
	case status == http.StatusBadRequest:
		return "rejected the request as invalid", false
	case status == http.StatusUnauthorized:
		return fmt.Sprintf("rejected the API key from the environment variable %s", m.opts.APIKeyEnv), false
	case status == http.StatusPaymentRequired:
		return "refused the request for a billing reason", false
	case status == http.StatusForbidden:
		return "denied the API key permission for this request", false
	case status == http.StatusNotFound:
		return fmt.Sprintf("does not know the model %q or the endpoint", m.opts.Model), false
	case status == http.StatusRequestTimeout:
		return "timed out waiting for the request", true
	case status == http.StatusConflict:
		return "reported a conflict", true
	case status == http.StatusRequestEntityTooLarge:
		return "rejected the request as too large", false
	case status == http.StatusTooManyRequests:
		return "is rate-limiting requests", true
	case status == 529:
		return "is overloaded", true
	case status == http.StatusGatewayTimeout:
		return "timed out", true
	case status >= 500:
		return "had an internal error", true
	case status >= 400:
		return "refused the request", false
	}
	// An error event of an unknown type in a stream.
	return "failed while answering", true
}

// redact removes key from s.
func redact(s, key string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, "[redacted]")
}

// truncate shortens s to at most n runes.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}
