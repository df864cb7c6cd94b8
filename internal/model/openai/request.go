package openai

import (
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/mcpl-go/mcpl/internal/model"
)

// params maps a model.Request to the Chat Completions request.
func (m *Model) params(req model.Request) (sdk.ChatCompletionNewParams, error) {
	p := sdk.ChatCompletionNewParams{Model: m.opts.Model}
	p.StreamOptions.IncludeUsage = sdk.Bool(true)
	if req.System != "" {
		p.Messages = append(p.Messages, sdk.SystemMessage(req.System))
	}
	for i, msg := range req.Messages {
		var (
			msgs []sdk.ChatCompletionMessageParamUnion
			err  error
		)
		switch msg.Role {
		case model.User:
			msgs, err = userMessages(msg.Content)
		case model.Assistant:
			msgs, err = assistantMessages(msg.Content)
		default:
			err = fmt.Errorf("unknown role %q", msg.Role)
		}
		if err != nil {
			return p, fmt.Errorf("message %d: %w", i, err)
		}
		p.Messages = append(p.Messages, msgs...)
	}
	for _, t := range req.Tools {
		params, err := toolParameters(t.InputSchema)
		if err != nil {
			return p, fmt.Errorf("tool %q: %w", t.Name, err)
		}
		def := shared.FunctionDefinitionParam{Name: t.Name, Parameters: params}
		if t.Description != "" {
			def.Description = sdk.String(t.Description)
		}
		p.Tools = append(p.Tools, sdk.ChatCompletionFunctionTool(def))
	}
	if req.Temperature != nil {
		p.Temperature = sdk.Float(*req.Temperature)
	}
	if req.TopP != nil {
		p.TopP = sdk.Float(*req.TopP)
	}
	limit := req.MaxTokens
	if limit <= 0 {
		limit = m.opts.MaxTokens
	}
	if limit > 0 {
		if m.legacyMaxTokens {
			p.MaxTokens = sdk.Int(int64(limit))
		} else {
			p.MaxCompletionTokens = sdk.Int(int64(limit))
		}
	}
	return p, nil
}

// userMessages maps a user message: its tool results first, as tool
// messages (which must follow the assistant's tool calls directly), then
// one user message with the results' images and the message's own text
// and images.
func userMessages(blocks []model.Block) ([]sdk.ChatCompletionMessageParamUnion, error) {
	var (
		out        []sdk.ChatCompletionMessageParamUnion
		toolImages []sdk.ChatCompletionContentPartUnionParam
		parts      []sdk.ChatCompletionContentPartUnionParam
		textOnly   = true
	)
	for i, b := range blocks {
		switch b.Type {
		case model.Text:
			parts = append(parts, sdk.TextContentPart(b.Text))
		case model.Image:
			part, err := imagePart(b)
			if err != nil {
				return nil, fmt.Errorf("block %d: %w", i, err)
			}
			parts = append(parts, part)
			textOnly = false
		case model.ToolResult:
			if b.Result == nil {
				return nil, fmt.Errorf("block %d: a tool_result block with no result", i)
			}
			text, images, err := toolResult(b.Result)
			if err != nil {
				return nil, fmt.Errorf("block %d: %w", i, err)
			}
			out = append(out, sdk.ToolMessage(text, b.Result.CallID))
			if len(images) > 0 {
				toolImages = append(toolImages, sdk.TextContentPart(
					fmt.Sprintf("The images from the result of tool call %s:", b.Result.CallID)))
				toolImages = append(toolImages, images...)
			}
		default:
			return nil, fmt.Errorf("block %d: a %q block cannot be in a user message", i, b.Type)
		}
	}
	if len(toolImages) > 0 {
		parts = append(toolImages, parts...)
		textOnly = false
	}
	switch {
	case len(parts) == 0:
	case textOnly && len(parts) == 1:
		out = append(out, sdk.UserMessage(parts[0].OfText.Text))
	default:
		out = append(out, sdk.UserMessage(parts))
	}
	return out, nil
}

// toolResult is a tool message's text and the result's images.
func toolResult(r *model.Result) (string, []sdk.ChatCompletionContentPartUnionParam, error) {
	var (
		lines  []string
		images []sdk.ChatCompletionContentPartUnionParam
	)
	if r.IsError {
		lines = append(lines, "[tool error]")
	}
	for i, b := range r.Content {
		switch b.Type {
		case model.Text:
			lines = append(lines, b.Text)
		case model.Image:
			part, err := imagePart(b)
			if err != nil {
				return "", nil, fmt.Errorf("result block %d: %w", i, err)
			}
			images = append(images, part)
			lines = append(lines, fmt.Sprintf("[image %d (%s): sent in the user message that follows]", len(images), b.MimeType))
		default:
			return "", nil, fmt.Errorf("result block %d: a %q block cannot be in a tool result", i, b.Type)
		}
	}
	text := strings.Join(lines, "\n")
	if strings.TrimSpace(text) == "" {
		text = "(no output)"
	} else if r.IsError && len(lines) == 1 {
		text += "\n(no output)"
	}
	return text, images, nil
}

// imagePart is an image block as an image_url part with a data: URL.
func imagePart(b model.Block) (sdk.ChatCompletionContentPartUnionParam, error) {
	if b.MimeType == "" {
		return sdk.ChatCompletionContentPartUnionParam{}, fmt.Errorf("an image with no media type")
	}
	if b.Data == "" {
		return sdk.ChatCompletionContentPartUnionParam{}, fmt.Errorf("an image with no data")
	}
	return sdk.ImageContentPart(sdk.ChatCompletionContentPartImageImageURLParam{
		URL: "data:" + b.MimeType + ";base64," + b.Data,
	}), nil
}

// assistantMessages maps an assistant message: its text as the content
// and its tool uses as tool_calls.
func assistantMessages(blocks []model.Block) ([]sdk.ChatCompletionMessageParamUnion, error) {
	var (
		texts []string
		calls []sdk.ChatCompletionMessageToolCallUnionParam
	)
	for i, b := range blocks {
		switch b.Type {
		case model.Text:
			texts = append(texts, b.Text)
		case model.Image:
			texts = append(texts, "[image omitted]")
		case model.ToolUse:
			if b.ToolCall == nil {
				return nil, fmt.Errorf("block %d: a tool_use block with no call", i)
			}
			args := strings.TrimSpace(string(b.ToolCall.Args))
			if args == "" || args == "null" {
				args = "{}"
			}
			calls = append(calls, sdk.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
					ID: b.ToolCall.ID,
					Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{
						Name:      b.ToolCall.Name,
						Arguments: args,
					},
				},
			})
		default:
			return nil, fmt.Errorf("block %d: a %q block cannot be in an assistant message", i, b.Type)
		}
	}
	text := strings.Join(texts, "\n\n")
	if text == "" && len(calls) == 0 {
		return nil, nil
	}
	a := sdk.ChatCompletionAssistantMessageParam{ToolCalls: calls}
	if text != "" {
		a.Content.OfString = sdk.String(text)
	}
	return []sdk.ChatCompletionMessageParamUnion{{OfAssistant: &a}}, nil
}

// toolParameters is a tool's JSON Schema as the SDK's parameters, each
// value kept as the raw JSON it was (numbers are not rounded through
// float64).
func toolParameters(schema json.RawMessage) (shared.FunctionParameters, error) {
	var raw map[string]json.RawMessage
	if len(strings.TrimSpace(string(schema))) > 0 {
		if err := json.Unmarshal(schema, &raw); err != nil {
			return nil, fmt.Errorf("its input schema is not a JSON object: %w", err)
		}
	}
	if raw == nil { // none, or null
		return shared.FunctionParameters{"type": "object", "properties": map[string]any{}}, nil
	}
	params := make(shared.FunctionParameters, len(raw))
	for k, v := range raw {
		params[k] = v
	}
	return params, nil
}
