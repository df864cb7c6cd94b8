// Package openai is the OpenAI model: the Chat Completions API, through
// the official SDK (github.com/openai/openai-go/v3), and any server that
// speaks it (llama.cpp, vLLM, Ollama, LM Studio) through Options.BaseURL.
//
// Decisions:
//
//   - Every call streams (SSE) with stream_options.include_usage, so the
//     usage is the provider's own count; content deltas reach
//     Request.OnText in order, as they arrive, on Generate's goroutine.
//   - The key is read from Options.APIKeyEnv (default OPENAI_API_KEY) at
//     each call, never at New, and is never put in an error. A missing or
//     empty key fails before any request with a *model.Error wrapping
//     model.ErrNoKey, unless Options.KeyOptional, when the request is sent
//     with no Authorization header (a local server). No other OPENAI_*
//     variable is read: the SDK client is built without its environment
//     defaults, so OPENAI_BASE_URL, OPENAI_ORG_ID and the like have no
//     effect and a local server is never sent an OpenAI key by accident.
//   - The SDK's retries are off: the agent layer decides, from
//     model.Error.Retryable and RetryAfter. Retryable: 429 (but not
//     insufficient_quota), 408, 409, 5xx, transport failures (a connection
//     refused or reset), an error event mid-stream, a stream cut short, a
//     stall, a call past RequestTimeout. Not: other 4xx, an answer that is
//     not Chat Completions JSON or not streamed, a context the caller
//     canceled or let expire (a *model.Error whose Err matches ctx.Err()),
//     a request this package cannot map. RetryAfter is an HTTP error's
//     retry-after-ms or Retry-After (package retryafter; 0 when absent,
//     at most 10 minutes). A Text is in plain words, names the endpoint
//     ("OpenAI" or "the model server at host:port"), may quote the
//     provider's message (cut to 500 characters; a 401's too, since the
//     redaction below takes out the part of a key it may quote) and never
//     holds the key, which is replaced wherever it appears, nor anything
//     else key-shaped (package redact).
//   - Each attempt fails fast. Options.StreamIdleTimeout (default 60 s):
//     no byte from the server for that long, waiting for the response
//     headers or for the next bytes of the stream, ends the call with a
//     retryable error saying the answer stalled (package idle, whose
//     transport wraps the HTTP client's, a given Options.HTTPClient's
//     too). It supersedes the SDK default's 10-minute wait for response
//     headers, which the default client no longer sets.
//     Options.RequestTimeout (default 10 min) bounds the whole call,
//     headers and body, and ends it with a retryable error saying it took
//     too long.
//   - Temperature and TopP, when set, are sent as temperature and top_p.
//   - The output limit (Request.MaxTokens, else Options.MaxTokens; none if
//     both are 0) is sent as max_completion_tokens, the field the SDK and
//     OpenAI recommend and the only one reasoning models accept, when the
//     endpoint is OpenAI's (no BaseURL, or a host under openai.com or
//     openai.azure.com). Any other BaseURL gets max_tokens: it is the field
//     every compatible server reads, and several (Ollama, LM Studio,
//     llama.cpp before 2026) silently ignore max_completion_tokens, which
//     would leave the answer unbounded.
//   - System is sent as a "system" message (OpenAI treats it as the
//     developer message for the models that want one; compatible servers
//     know only "system"). A user message with one text block is sent as a
//     string, otherwise as content parts; an image is an image_url part
//     holding a data: URL with the block's media type.
//   - A tool_result becomes a "tool" message with its call's id. Tool
//     messages carry text only, so its text blocks are joined by newlines
//     and each image is replaced by a line saying it follows; the images
//     are then sent in a user message right after the tool messages, each
//     call's introduced by a line naming the call. IsError prefixes the
//     content with "[tool error]". An empty result is sent as "(no output)".
//   - An assistant message's text blocks are joined by blank lines;
//     its images, which Chat Completions cannot carry, become "[image
//     omitted]" lines; its tool_use blocks are its tool_calls (Args "{}"
//     when empty).
//   - Tools are function tools whose parameters are InputSchema as given
//     (an object schema with no properties when empty), non-strict.
//   - The stream is accumulated here rather than with the SDK's
//     ChatCompletionAccumulator, which sums usage across chunks (wrong for
//     servers that report running totals) and lets a later chunk clear the
//     finish reason or model. Usage is the last usage reported; the finish
//     reason and model are the last non-empty ones. CacheReadTokens is
//     usage.prompt_tokens_details.cached_tokens; InputTokens is
//     prompt_tokens, which includes those cached tokens (OpenAI counts
//     them inside the prompt, and reports none as written, so
//     CacheWriteTokens stays 0). Tool calls are
//     accumulated by index (-1 read as 0); a delta bearing a different id
//     at an index already used starts a new call (servers that send whole
//     calls all at index 0); a call's id and name are taken from the first
//     delta that has them; argument pieces are concatenated. A call with
//     no id gets a generated one. Arguments that are not valid JSON are
//     passed on as a JSON string holding the text, so the call fails the
//     tool's schema visibly instead of corrupting the conversation.
//   - finish_reason stop ends the turn, tool_calls (or the legacy
//     function_call) asks for tools, length is MaxTokens, content_filter
//     is Refused. A "stop" with tool calls is StopToolUse (some compatible
//     servers say stop). A refusal (the refusal field) is streamed to
//     OnText like text, kept as a text block, and makes the stop Refused.
//     Reasoning text some servers add (reasoning_content) is dropped.
//     A stream that ends with no finish_reason is a retryable error.
package openai

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/internal/model/idle"
	"github.com/mcpl-go/mcpl/internal/model/redact"
)

// DefaultAPIKeyEnv is the environment variable the key is read from when
// Options.APIKeyEnv is empty.
const DefaultAPIKeyEnv = "OPENAI_API_KEY"

// The timeouts of Options left at 0.
const (
	DefaultStreamIdleTimeout = 60 * time.Second
	DefaultRequestTimeout    = 10 * time.Minute
)

// Options configure a Model.
type Options struct {
	// Model is the model's name, as the endpoint knows it ("gpt-4.1", or
	// a local server's model name). Required.
	Model string
	// APIKeyEnv is the environment variable holding the key; empty means
	// OPENAI_API_KEY.
	APIKeyEnv string
	// KeyOptional: a missing key is not an error, the request is sent
	// without one (a local server that needs none).
	KeyOptional bool
	// LookupEnv reads the environment; nil means os.LookupEnv. It is
	// called at each Generate.
	LookupEnv func(string) (string, bool)
	// BaseURL is the endpoint ("http://localhost:8080/v1"); empty means
	// OpenAI's.
	BaseURL string
	// MaxTokens is the output limit when a request gives none; 0 sends
	// none.
	MaxTokens int
	// HTTPClient makes the requests; nil means a clone of
	// http.DefaultTransport. Either way its transport is wrapped for
	// StreamIdleTimeout.
	HTTPClient *http.Client
	// ContextWindow is the model's context window in tokens, for Info; 0
	// when unknown.
	ContextWindow int
	// StreamIdleTimeout ends a call whose server sends no byte for this
	// long, while the answer's headers or the next bytes of its stream
	// are awaited; 0 means DefaultStreamIdleTimeout.
	StreamIdleTimeout time.Duration
	// RequestTimeout bounds a whole call, headers and streamed body; 0
	// means DefaultRequestTimeout.
	RequestTimeout time.Duration
}

// Model is an OpenAI (or OpenAI-compatible) chat model. It is safe for
// concurrent use.
type Model struct {
	opts Options
	chat sdk.ChatCompletionService
	// who names the endpoint in errors: "OpenAI" or "the model server at
	// host:port".
	who string
	// legacyMaxTokens: send the limit as max_tokens, not
	// max_completion_tokens.
	legacyMaxTokens bool
}

var _ model.Model = (*Model)(nil)

// New returns the model opts describe. It reads no key: that is done at
// each call.
func New(opts Options) (*Model, error) {
	if strings.TrimSpace(opts.Model) == "" {
		return nil, errors.New("openai: no model name")
	}
	if opts.MaxTokens < 0 {
		return nil, fmt.Errorf("openai: max tokens %d is negative", opts.MaxTokens)
	}
	if opts.ContextWindow < 0 {
		return nil, fmt.Errorf("openai: context window %d is negative", opts.ContextWindow)
	}
	if opts.APIKeyEnv == "" {
		opts.APIKeyEnv = DefaultAPIKeyEnv
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	if opts.StreamIdleTimeout < 0 || opts.RequestTimeout < 0 {
		return nil, fmt.Errorf("openai: a negative timeout (stream idle %v, request %v); 0 means the default", opts.StreamIdleTimeout, opts.RequestTimeout)
	}
	if opts.StreamIdleTimeout == 0 {
		opts.StreamIdleTimeout = DefaultStreamIdleTimeout
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	opts.HTTPClient = idle.Client(opts.HTTPClient, opts.StreamIdleTimeout)
	m := &Model{opts: opts, who: "OpenAI"}
	// The service, unlike sdk.NewClient, reads nothing from the
	// environment: every setting is one of these.
	sdkOpts := []option.RequestOption{
		option.WithEnvironmentProduction(),
		option.WithHTTPClient(opts.HTTPClient),
		option.WithMaxRetries(0),
	}
	if opts.BaseURL != "" {
		u, err := url.Parse(opts.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, errors.New("openai: the base URL is not an http or https URL")
		}
		if !isOpenAIHost(u.Hostname()) {
			m.who = "the model server at " + u.Host
			m.legacyMaxTokens = true
		}
		sdkOpts = append(sdkOpts, option.WithBaseURL(opts.BaseURL))
	}
	m.chat = sdk.NewChatCompletionService(sdkOpts...)
	return m, nil
}

// isOpenAIHost reports whether host is OpenAI's own (or Azure OpenAI's),
// which take max_completion_tokens.
func isOpenAIHost(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, d := range []string{"openai.com", "openai.azure.com"} {
		if host == d || strings.HasSuffix(host, "."+d) {
			return true
		}
	}
	return false
}

// Info describes the model.
func (m *Model) Info() model.Info {
	return model.Info{ID: m.opts.Model, Vendor: "openai", ContextWindow: m.opts.ContextWindow}
}

// Generate makes one streamed Chat Completions call. Its errors are
// *model.Error.
func (m *Model) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	key, err := m.key()
	if err != nil {
		return model.Response{}, err
	}
	params, err := m.params(req)
	if err != nil {
		text := err.Error() // the request's own content: only the key is removed
		if key != "" {
			text = strings.ReplaceAll(text, key, redact.Mark)
		}
		return model.Response{}, &model.Error{Text: "openai: cannot send the request: " + text, Err: err}
	}
	var httpResp *http.Response
	reqOpts := []option.RequestOption{option.WithResponseInto(&httpResp)}
	if key != "" {
		reqOpts = append(reqOpts, option.WithAPIKey(key))
	}
	// The attempt's own context carries RequestTimeout, so that its end
	// is told from the caller's.
	actx, cancel := context.WithTimeoutCause(ctx, m.opts.RequestTimeout, errRequestTimeout)
	defer cancel()
	stream := m.chat.NewStreaming(actx, params, reqOpts...)
	defer func() { _ = stream.Close() }()
	var acc accumulator
	for stream.Next() {
		acc.add(stream.Current(), req.OnText)
	}
	if err := stream.Err(); err != nil {
		return model.Response{}, m.failure(ctx, actx, err, httpResp, key)
	}
	resp, ok := acc.response(m.opts.Model)
	if !ok {
		if err := actx.Err(); err != nil {
			return model.Response{}, m.failure(ctx, actx, err, nil, key)
		}
		if httpResp != nil && !isEventStream(httpResp.Header.Get("Content-Type")) {
			return model.Response{}, &model.Error{
				Text: fmt.Sprintf("%s did not stream its answer (Content-Type %q, not text/event-stream); it must support \"stream\": true",
					m.who, httpResp.Header.Get("Content-Type")),
				Err: errNotStreamed,
			}
		}
		return model.Response{}, &model.Error{
			Text:      "the answer from " + m.who + " ended before the model finished (no finish_reason)",
			Retryable: true,
			Err:       errIncomplete,
		}
	}
	return resp, nil
}

// isEventStream reports whether a Content-Type is SSE's.
func isEventStream(contentType string) bool {
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt == "text/event-stream"
}

// key returns the API key, "" when it is optional and missing.
func (m *Model) key() (string, error) {
	v, ok := m.opts.LookupEnv(m.opts.APIKeyEnv)
	v = strings.TrimSpace(v)
	if ok && v != "" {
		return v, nil
	}
	if m.opts.KeyOptional {
		return "", nil
	}
	what := "an OpenAI API key"
	if m.who != "OpenAI" {
		what = "the key " + m.who + " expects"
	}
	return "", &model.Error{
		Text: fmt.Sprintf("no API key for model %q: the environment variable %s is unset or empty; set it to %s and try again",
			m.opts.Model, m.opts.APIKeyEnv, what),
		Err: model.ErrNoKey,
	}
}
