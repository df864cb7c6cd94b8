// Package model is how an agent thinks: one Model interface over the
// providers (model/anthropic, model/openai, model/scripted). A request is
// a system prompt, a conversation of messages whose content is blocks
// (text, images, tool calls, tool results), and the tools the agent may
// call; the answer is the model's blocks, why it stopped, and the tokens
// it used. Text can be streamed as it is generated.
//
// It is internal while the agent layer settles its shape; an embedder's
// own model plugs in here once it is public.
package model

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/mcpl-go/mcpl/protocol"
)

// Role is who a message is from.
type Role string

// Roles.
const (
	User      Role = "user"
	Assistant Role = "assistant"
)

// BlockType says what a block is.
type BlockType string

// Block types.
const (
	Text       BlockType = "text"
	Image      BlockType = "image"
	ToolUse    BlockType = "tool_use"
	ToolResult BlockType = "tool_result"
)

// Block is one piece of a message.
type Block struct {
	Type BlockType `json:"type"`
	// Text is a text block's text.
	Text string `json:"text,omitempty"`
	// MimeType and Data (base64) are an image's.
	MimeType string `json:"mimeType,omitempty"`
	Data     string `json:"data,omitempty"`
	// ToolCall is a tool_use block's (an assistant's).
	ToolCall *ToolCall `json:"toolCall,omitempty"`
	// Result is a tool_result block's (a user message's, answering a
	// tool_use by its id).
	Result *Result `json:"result,omitempty"`
}

// ToolCall is the model asking for a tool.
type ToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Args is the arguments, a JSON object.
	Args json.RawMessage `json:"args"`
}

// Result is a tool's answer to a call.
type Result struct {
	CallID  string  `json:"callId"`
	Content []Block `json:"content"` // text and images
	IsError bool    `json:"isError,omitempty"`
}

// Message is one turn of the conversation.
type Message struct {
	Role    Role    `json:"role"`
	Content []Block `json:"content"`
}

// Tool is a tool the model may call.
type Tool struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of its arguments.
	InputSchema json.RawMessage
}

// Request is one model call.
type Request struct {
	System    string
	Messages  []Message
	Tools     []Tool
	MaxTokens int
	// Temperature and TopP, when set, are sent as the provider's
	// sampling parameters of the same names; nil leaves the provider's
	// default.
	Temperature, TopP *float64
	// OnText, if set, is given each piece of text as it is generated
	// (streaming); the Response still holds all of it.
	OnText func(delta string)
}

// StopReason is why the model stopped.
type StopReason string

// Stop reasons.
const (
	// EndTurn: the model finished its turn.
	EndTurn StopReason = "end_turn"
	// StopToolUse: the model asks for tools; the loop goes on with their
	// results.
	StopToolUse StopReason = "tool_use"
	// MaxTokens: it ran out of tokens.
	MaxTokens StopReason = "max_tokens"
	// Refused: the provider declined to answer.
	Refused StopReason = "refusal"
)

// Usage is the tokens a call used, as the provider reported them.
type Usage struct {
	InputTokens, OutputTokens int
	// CacheReadTokens and CacheWriteTokens are the input tokens read from
	// and written to the provider's prompt cache, where it reports them
	// (Anthropic's cache_read_input_tokens and
	// cache_creation_input_tokens, OpenAI's cached_tokens as reads).
	CacheReadTokens, CacheWriteTokens int
}

// Response is a model call's answer.
type Response struct {
	Content []Block
	Stop    StopReason
	Usage   Usage
	// Model is the provider's name for the model that answered.
	Model string
}

// Text returns the response's text blocks joined.
func (r Response) Text() string {
	var s string
	for _, b := range r.Content {
		if b.Type == Text {
			s += b.Text
		}
	}
	return s
}

// Calls returns the response's tool calls.
func (r Response) Calls() []ToolCall {
	var out []ToolCall
	for _, b := range r.Content {
		if b.Type == ToolUse && b.ToolCall != nil {
			out = append(out, *b.ToolCall)
		}
	}
	return out
}

// Info describes a model, for model/info (SPEC §12.2).
type Info struct {
	ID     string
	Vendor string
	// ContextWindow is its context window in tokens; 0 when unknown.
	ContextWindow int
}

// Wire is the info as SPEC §12.2's ModelInfo (model/info's answer, and
// the model of context hooks and the inference lifecycle).
func (i Info) Wire() protocol.ModelInfoResult {
	return protocol.ModelInfoResult{ID: i.ID, Vendor: i.Vendor, ContextWindow: i.ContextWindow}
}

// Model is a model the host can call. A failed call is a *Error, except
// one that ctx ended, whose error matches ctx.Err() (errors.Is).
type Model interface {
	Generate(ctx context.Context, req Request) (Response, error)
	Info() Info
}

// Error is a provider's failure: Text says what happened in an agent's
// and an operator's words (never a key), and whether trying again may
// work.
type Error struct {
	Text string
	// Retryable: a later call may succeed (a rate limit, an overloaded
	// or unreachable provider).
	Retryable bool
	// RetryAfter is how long the provider asked the caller to wait
	// before trying again (a Retry-After header, in seconds or as a
	// date); 0 when it said nothing.
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string { return e.Text }
func (e *Error) Unwrap() error { return e.Err }

// A SchemaFitter is a Model that knows what its provider accepts as a
// tool's input schema. FitSchema returns schema as the provider takes it:
// unchanged, or repaired where the repair loses nothing (a missing items
// becomes {}); or an error, naming the rule broken, when the provider
// would reject it and no lossless repair exists: the tool can't be
// offered to this model.
type SchemaFitter interface {
	FitSchema(schema json.RawMessage) (json.RawMessage, error)
}

// ErrNoKey is wrapped by a provider's error when its API key is unset.
var ErrNoKey = errors.New("model: no API key")
