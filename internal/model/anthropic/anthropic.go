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
//     model.Error.Retryable and RetryAfter.
//   - Each attempt fails fast. Options.StreamIdleTimeout (default 60 s):
//     no byte from the server for that long, waiting for the response
//     headers or for the next bytes of the stream, ends the call with a
//     retryable error saying the answer stalled (package idle, whose
//     transport wraps the HTTP client's, a given Options.HTTPClient's
//     too). It supersedes the 10-minute response-header timeout the
//     default transport had. Options.RequestTimeout (default 10 min)
//     bounds the whole call, headers and body, and ends it with a
//     retryable error saying it took too long.
//   - Errors are *model.Error with Text in plain words (what happened, the
//     provider's own message if it gave one, and whether retrying may help)
//     and Err wrapping the SDK's error (an *anthropic.Error for API errors).
//     Retryable: HTTP 408, 409, 429 and 5xx (529 "overloaded" included), the
//     rate-limit, overloaded, timeout and internal error types of an error
//     event in the middle of a stream, network failures, and a stream that
//     ends before message_stop; an x-should-retry header on an error response
//     overrides the status. Not retryable: 400, 401, 402, 403, 404, 413 and
//     other client errors, a malformed request (caught before sending, no
//     request made) and a stream this package cannot follow. A connection
//     refused or reset, and a stream cut before message_stop, are
//     retryable. RetryAfter is the error response's retry-after-ms or
//     Retry-After (package retryafter; 0 when absent, at most 10
//     minutes). The provider's message is quoted (a body that is not JSON,
//     a proxy's text, as it is), cut to 300 characters; the key's value is
//     removed from every Text, even where the provider echoes it, and so is
//     anything else key-shaped (package redact), 401 messages included.
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
//     Temperature and TopP, when set, are sent as temperature and top_p,
//     set on the JSON body (this SDK version has no fields for them, which
//     the API deprecates; a model that refuses them, or both at once,
//     answers 400, not retryable).
//   - Prompt caching: cache_control {"type":"ephemeral"} marks the system
//     block and the last tool. The API caches the prefix up to a
//     breakpoint, in the order tools, system, messages; the tools and the
//     system prompt are what an agent sends unchanged call after call, so
//     the breakpoint after the last tool caches the tools alone (reused
//     when the system prompt changes) and the one on the system block
//     caches both. Two of the API's four breakpoints are used; the
//     conversation is not marked (it changes at every turn). A prefix
//     shorter than the model's minimum is simply not cached.
//   - Response mapping: text and tool_use blocks are kept (tool_use Args is
//     the assembled input JSON); other block types (thinking, server tools)
//     are dropped. Usage is input_tokens and output_tokens as reported;
//     CacheReadTokens and CacheWriteTokens are cache_read_input_tokens and
//     cache_creation_input_tokens. Anthropic counts those apart, so
//     InputTokens does not include them: the prompt's whole size is the
//     three summed. Model is the model that answered, as the provider
//     named it.
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
	"github.com/mcpl-go/mcpl/internal/model/idle"
	"github.com/mcpl-go/mcpl/internal/model/redact"
	"github.com/mcpl-go/mcpl/internal/model/retryafter"
)

// Vendor is the Info.Vendor of an Anthropic model.
const Vendor = "anthropic"

// Defaults of Options.
const (
	DefaultAPIKeyEnv         = "ANTHROPIC_API_KEY"
	DefaultMaxTokens         = 1024
	DefaultStreamIdleTimeout = 60 * time.Second
	DefaultRequestTimeout    = 10 * time.Minute
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
	// http.DefaultTransport. Either way its transport is wrapped for
	// StreamIdleTimeout.
	HTTPClient *http.Client
	// ContextWindow is reported by Info; 0 when unknown.
	ContextWindow int
	// StreamIdleTimeout ends a call whose server sends no byte for this
	// long, while the answer's headers or the next bytes of its stream
	// are awaited; DefaultStreamIdleTimeout when 0.
	StreamIdleTimeout time.Duration
	// RequestTimeout bounds a whole call, headers and streamed body;
	// DefaultRequestTimeout when 0.
	RequestTimeout time.Duration
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
	if opts.StreamIdleTimeout < 0 || opts.RequestTimeout < 0 {
		return nil, fmt.Errorf("anthropic: Options.StreamIdleTimeout %v and RequestTimeout %v must not be negative (0 is the default)", opts.StreamIdleTimeout, opts.RequestTimeout)
	}
	if opts.StreamIdleTimeout == 0 {
		opts.StreamIdleTimeout = DefaultStreamIdleTimeout
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = DefaultRequestTimeout
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
	ro = append(ro, option.WithHTTPClient(idle.Client(opts.HTTPClient, opts.StreamIdleTimeout)))
	return &Model{opts: opts, client: sdk.NewClient(ro...)}, nil
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

	// The attempt's own context carries RequestTimeout, so that its end
	// is told from the caller's.
	actx, cancel := context.WithTimeoutCause(ctx, m.opts.RequestTimeout, errRequestTimeout)
	defer cancel()
	stream := m.client.Messages.NewStreaming(actx, params, append(sampling(req), option.WithHeader("x-api-key", key))...)
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
				Text: redact.Key(fmt.Sprintf("The model provider %q sent a stream this host could not follow (%v); retrying may not help.", Vendor, err), key),
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
		return model.Response{}, m.callError(ctx, actx, err, key)
	}
	if err := actx.Err(); err != nil {
		return model.Response{}, m.callError(ctx, actx, err, key)
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
		p.System = []sdk.TextBlockParam{{Text: req.System, CacheControl: sdk.NewCacheControlEphemeralParam()}}
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
	if n := len(p.Tools); n > 0 {
		p.Tools[n-1].OfTool.CacheControl = sdk.NewCacheControlEphemeralParam()
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
			InputTokens:      int(msg.Usage.InputTokens),
			OutputTokens:     int(msg.Usage.OutputTokens),
			CacheReadTokens:  int(msg.Usage.CacheReadInputTokens),
			CacheWriteTokens: int(msg.Usage.CacheCreationInputTokens),
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

// callError maps a failed call: ctx.Err() when the caller's ctx is done,
// else a *model.Error (actx is the attempt's context, which ends at
// RequestTimeout).
func (m *Model) callError(ctx, actx context.Context, err error, key string) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	var stall *idle.StallError
	if errors.As(err, &stall) {
		return &model.Error{
			Text: fmt.Sprintf("The answer of the model provider %q stalled: no data came for %s (the model's streamIdleTimeout), so the call was stopped; retrying may work.",
				Vendor, idle.Words(stall.Idle)),
			Retryable: true,
			Err:       err,
		}
	}
	if errors.Is(context.Cause(actx), errRequestTimeout) {
		return &model.Error{
			Text: fmt.Sprintf("The call to the model provider %q took longer than %s (the model's requestTimeout), so it was stopped; retrying may work.",
				Vendor, idle.Words(m.opts.RequestTimeout)),
			Retryable: true,
			Err:       fmt.Errorf("%w: %w", errRequestTimeout, err),
		}
	}
	var aerr *sdk.Error
	if !errors.As(err, &aerr) {
		return &model.Error{
			Text:      redact.Key(fmt.Sprintf("The model provider %q could not be reached or the connection failed (%v); retrying later may work.", Vendor, err), key),
			Retryable: true,
			Err:       err,
		}
	}
	typ := string(aerr.Type())
	what, retryable := m.classify(aerr.StatusCode, typ)
	var after time.Duration
	if aerr.Response != nil && aerr.StatusCode >= 400 {
		switch aerr.Response.Header.Get("x-should-retry") {
		case "true":
			retryable = true
		case "false":
			retryable = false
		}
		after = retryafter.Parse(aerr.Response.Header, time.Now())
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
	msg := aerr.Message
	if raw := aerr.RawJSON(); msg == "" && !json.Valid([]byte(raw)) {
		msg = raw // a body that is not JSON: a proxy's text
	}
	if msg = strings.Join(strings.Fields(msg), " "); msg != "" {
		fmt.Fprintf(&b, ": %s", truncate(redact.Key(msg, key), 300))
	}
	if retryable {
		b.WriteString("; retrying later may work.")
	} else {
		b.WriteString("; retrying the same request will not help.")
	}
	return &model.Error{Text: redact.Key(b.String(), key), Retryable: retryable, RetryAfter: after, Err: err}
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

// errRequestTimeout is the cause of an attempt's context when its
// RequestTimeout passed.
var errRequestTimeout = errors.New("anthropic: the call took longer than Options.RequestTimeout")

// sampling is the request's sampling parameters as body fields: the SDK
// no longer has fields for them.
func sampling(req model.Request) []option.RequestOption {
	var ro []option.RequestOption
	if req.Temperature != nil {
		ro = append(ro, option.WithJSONSet("temperature", *req.Temperature))
	}
	if req.TopP != nil {
		ro = append(ro, option.WithJSONSet("top_p", *req.TopP))
	}
	return ro
}

// truncate shortens s to at most n runes.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}
