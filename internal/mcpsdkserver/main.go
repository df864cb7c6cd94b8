// Command mcpsdkserver is a plain MCP server (no MCPL) built with the
// official Go MCP SDK, for tests only: package host's tests run it as a real
// subprocess over stdio to show that a server which knows nothing of MCPL
// works for tools.
//
// Tools:
//
//	add {a, b}     answers the sum, as text
//	shout {text}   answers the text upper-cased
//
// Nothing but this program imports the SDK; keep it that way, so the SDK
// stays a test dependency in spirit.
package main

import (
	"context"
	"log"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type addIn struct {
	A float64 `json:"a" jsonschema:"the first addend"`
	B float64 `json:"b" jsonschema:"the second addend"`
}

type shoutIn struct {
	Text string `json:"text" jsonschema:"the text to upper-case"`
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func main() {
	server := mcp.NewServer(&mcp.Implementation{Name: "mcpsdkserver", Version: "1.0.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "add", Description: "Answers the sum of a and b."},
		func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
			return text(strconv.FormatFloat(in.A+in.B, 'f', -1, 64)), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "shout", Description: "Answers the text upper-cased."},
		func(ctx context.Context, req *mcp.CallToolRequest, in shoutIn) (*mcp.CallToolResult, any, error) {
			return text(strings.ToUpper(in.Text)), nil, nil
		})
	if err := server.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		// The host closing stdin ends the run; anything else is worth a line.
		log.Printf("mcpsdkserver: %v", err)
	}
}
