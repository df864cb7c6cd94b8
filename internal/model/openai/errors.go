package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/internal/model/idle"
	"github.com/mcpl-go/mcpl/internal/model/redact"
	"github.com/mcpl-go/mcpl/internal/model/retryafter"
)

// errIncomplete is a stream that ended with no finish_reason.
var errIncomplete = errors.New("openai: the stream ended with no finish_reason")

// errNotStreamed is a 200 answer that is not an event stream.
var errNotStreamed = errors.New("openai: the answer was not streamed")

// errRequestTimeout is the cause of an attempt's context when its
// RequestTimeout passed.
var errRequestTimeout = errors.New("openai: the call took longer than Options.RequestTimeout")

// maxDetail caps how much of a provider's error message goes in a Text.
const maxDetail = 500

// failure words a failed call. ctx is the caller's, actx the attempt's
// (which ends at RequestTimeout); res is the HTTP response when one was
// received. The Text holds neither key nor anything key-shaped.
func (m *Model) failure(ctx, actx context.Context, err error, res *http.Response, key string) *model.Error {
	e := m.classify(ctx, actx, err, res, key)
	e.Text = redact.Key(e.Text, key)
	return e
}

func (m *Model) classify(ctx, actx context.Context, err error, res *http.Response, key string) *model.Error {
	if cerr := ctx.Err(); cerr != nil {
		if !errors.Is(err, cerr) {
			err = fmt.Errorf("%w: %w", cerr, err)
		}
		if errors.Is(cerr, context.DeadlineExceeded) {
			return &model.Error{Text: "the call to " + m.who + " ran out of time", Err: err}
		}
		return &model.Error{Text: "the call to " + m.who + " was canceled", Err: err}
	}
	var stall *idle.StallError
	if errors.As(err, &stall) {
		return &model.Error{
			Text: fmt.Sprintf("the answer from %s stalled: no data came for %s (the model's streamIdleTimeout), so the call was stopped; retrying may work",
				m.who, idle.Words(stall.Idle)),
			Retryable: true,
			Err:       err,
		}
	}
	if errors.Is(context.Cause(actx), errRequestTimeout) {
		return &model.Error{
			Text: fmt.Sprintf("the call to %s took longer than %s (the model's requestTimeout), so it was stopped; retrying may work",
				m.who, idle.Words(m.opts.RequestTimeout)),
			Retryable: true,
			Err:       fmt.Errorf("%w: %w", errRequestTimeout, err),
		}
	}
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		msg := apiErr.Message
		if msg == "" {
			msg = bodyMessage(apiErr.Response)
		}
		e := m.statusFailure(apiErr.StatusCode, apiErr.Code, apiErr.Type, msg, err, key)
		if apiErr.Response != nil {
			e.RetryAfter = retryafter.Parse(apiErr.Response.Header, time.Now())
		}
		return e
	}
	if res != nil && res.StatusCode >= 400 { // an error body the SDK could not read
		e := m.statusFailure(res.StatusCode, "", "", bodyMessage(res), err, key)
		e.RetryAfter = retryafter.Parse(res.Header, time.Now())
		return e
	}
	var streamErr *ssestream.StreamError
	if errors.As(err, &streamErr) {
		return &model.Error{
			Text:      m.who + " reported an error while answering" + detail(errorMessage(streamErr.Event.Data), key),
			Retryable: true,
			Err:       err,
		}
	}
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &syntaxErr) || errors.As(err, &typeErr) {
		return &model.Error{Text: m.who + " sent an answer that is not Chat Completions JSON: " + err.Error(), Err: err}
	}
	// The transport: unreachable, reset, cut short.
	inner := err
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		inner = urlErr.Err // its URL is left out
	}
	return &model.Error{Text: "could not get an answer from " + m.who + ": " + inner.Error(), Retryable: true, Err: err}
}

// statusFailure words an HTTP error status.
func (m *Model) statusFailure(status int, code, typ, msg string, err error, key string) *model.Error {
	st := strings.TrimSpace(fmt.Sprintf("%d %s", status, http.StatusText(status)))
	d := detail(msg, key)
	e := &model.Error{Err: err}
	switch {
	case status == http.StatusUnauthorized && key == "":
		e.Text = fmt.Sprintf("%s wants an API key (%s): set %s to one", m.who, st, m.opts.APIKeyEnv)
	case status == http.StatusUnauthorized:
		// The message may quote part of the key: detail redacts it.
		e.Text = fmt.Sprintf("%s rejected the API key in %s (%s); check that it is a valid, current key%s", m.who, m.opts.APIKeyEnv, st, d)
	case status == http.StatusForbidden:
		e.Text = fmt.Sprintf("%s refused the request (%s)%s", m.who, st, d)
	case status == http.StatusNotFound:
		e.Text = fmt.Sprintf("%s has no model %q or no chat completions endpoint (%s)%s", m.who, m.opts.Model, st, d)
	case status == http.StatusTooManyRequests && (code == "insufficient_quota" || typ == "insufficient_quota"):
		e.Text = fmt.Sprintf("%s: the account is out of quota (%s)%s", m.who, st, d)
	case status == http.StatusTooManyRequests:
		e.Text = fmt.Sprintf("%s is limiting the rate of requests (%s)%s", m.who, st, d)
		e.Retryable = true
	case status == http.StatusRequestTimeout || status == http.StatusConflict || status >= 500:
		e.Text = fmt.Sprintf("%s failed (%s)%s", m.who, st, d)
		e.Retryable = true
	default:
		e.Text = fmt.Sprintf("%s rejected the request (%s)%s", m.who, st, d)
	}
	return e
}

// errorMessage is the message in a JSON error: {"error": {"message":
// ...}} (OpenAI, llama.cpp, Ollama), {"error": "..."}, {"message": ...}
// (vLLM) or {"detail": "..."}; "" when there is none.
func errorMessage(data []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(data, &v) != nil {
		return ""
	}
	var obj struct {
		Message string `json:"message"`
	}
	var s string
	switch {
	case json.Unmarshal(v.Error, &obj) == nil && obj.Message != "":
		return obj.Message
	case json.Unmarshal(v.Error, &s) == nil && s != "":
		return s
	case v.Message != "":
		return v.Message
	case json.Unmarshal(v.Detail, &s) == nil:
		return s
	}
	return ""
}

// bodyMessage is the message of an error response's body, JSON or
// text/plain; "" when there is none.
func bodyMessage(res *http.Response) string {
	if res == nil || res.Body == nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(res.Body, 16<<10))
	if msg := errorMessage(b); msg != "" {
		return msg
	}
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt == "text/plain" {
		return string(b)
	}
	return ""
}

// detail is ": msg", whitespace collapsed, cut to maxDetail runes, with
// the key and anything key-shaped redacted; "" when msg is empty.
func detail(msg, key string) string {
	msg = strings.Join(strings.Fields(redact.Key(msg, key)), " ")
	if msg == "" {
		return ""
	}
	if r := []rune(msg); len(r) > maxDetail {
		msg = string(r[:maxDetail]) + "…"
	}
	return ": " + msg
}
