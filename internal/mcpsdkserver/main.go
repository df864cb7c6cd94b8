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
// With -more, also:
//
//	measure {n}    declares outputSchema {value: integer}; answers {value: n}
//	bad_measure {} declares the same schema; answers {value: "high"}, breaking it
//	grow {}        adds the tool "grown" (the SDK announces the list change)
//	grown {}       answers "grown"
//	progress {steps}  reports progress 1..steps of steps ("step N"), then waits
//	               until its context ends
//	block {}       waits until its context ends, then appends "cancelled: <cause>"
//	               to the -cancel-log file, and answers nothing
//
// With -http ADDR it serves MCP's Streamable HTTP on ADDR (127.0.0.1:0 picks
// a port) at /mcp instead of stdio, and prints "listening on URL" to stdout
// once it accepts; -json-response answers each POST with one JSON body
// rather than an event stream; -stateless serves without sessions, which
// is how the SDK serves 2026-07-28 over HTTP.
//
// Nothing but this program imports the SDK; keep it that way, so the SDK
// stays a test dependency in spirit.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
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
	more := flag.Bool("more", false, "serve the structured, list-change and cancellation tools too")
	cancelLog := flag.String("cancel-log", "", "file block appends to when its context ends")
	httpAddr := flag.String("http", "", "serve Streamable HTTP on this address (127.0.0.1:0) instead of stdio")
	jsonResponse := flag.Bool("json-response", false, "with -http, answer each POST with one JSON body")
	stateless := flag.Bool("stateless", false, "with -http, serve statelessly: no sessions, 2026-07-28 (and initialize per request)")
	flag.Parse()
	server := mcp.NewServer(&mcp.Implementation{Name: "mcpsdkserver", Version: "1.0.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "add", Description: "Answers the sum of a and b."},
		func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
			return text(strconv.FormatFloat(in.A+in.B, 'f', -1, 64)), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "shout", Description: "Answers the text upper-cased."},
		func(ctx context.Context, req *mcp.CallToolRequest, in shoutIn) (*mcp.CallToolResult, any, error) {
			return text(strings.ToUpper(in.Text)), nil, nil
		})
	if *more {
		addMore(server, *cancelLog)
	}
	if *httpAddr != "" {
		serveHTTP(server, *httpAddr, &mcp.StreamableHTTPOptions{JSONResponse: *jsonResponse, Stateless: *stateless})
		return
	}
	if err := server.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		// The host closing stdin ends the run; anything else is worth a line.
		log.Printf("mcpsdkserver: %v", err)
	}
}

type progressIn struct {
	Steps int `json:"steps" jsonschema:"how many steps to report"`
}

type measureIn struct {
	N int `json:"n" jsonschema:"the value to answer"`
}

type measureOut struct {
	Value int `json:"value" jsonschema:"the value"`
}

var valueSchema = json.RawMessage(`{"type":"object","properties":{"value":{"type":"integer"}},"required":["value"]}`)

func addMore(server *mcp.Server, cancelLog string) {
	mcp.AddTool(server, &mcp.Tool{Name: "measure", Description: "Answers {value: n}, structured."},
		func(ctx context.Context, req *mcp.CallToolRequest, in measureIn) (*mcp.CallToolResult, measureOut, error) {
			return nil, measureOut{Value: in.N}, nil
		})
	server.AddTool(&mcp.Tool{Name: "bad_measure", Description: "Answers a value that breaks its output schema.",
		InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: valueSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"value":"high"}`}},
				StructuredContent: map[string]any{"value": "high"}}, nil
		})
	server.AddTool(&mcp.Tool{Name: "grow", Description: "Adds the tool grown.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			server.AddTool(&mcp.Tool{Name: "grown", Description: "Answers grown.", InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("grown"), nil })
			return text("grew"), nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "progress", Description: "Reports progress, then waits until cancelled."},
		func(ctx context.Context, req *mcp.CallToolRequest, in progressIn) (*mcp.CallToolResult, any, error) {
			for i := 1; i <= in.Steps; i++ {
				req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(),
					Progress: float64(i), Total: float64(in.Steps), Message: fmt.Sprintf("step %d", i)})
			}
			<-ctx.Done()
			return nil, nil, ctx.Err()
		})
	server.AddTool(&mcp.Tool{Name: "block", Description: "Waits until cancelled.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			<-ctx.Done()
			if cancelLog != "" {
				if f, err := os.OpenFile(cancelLog, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
					fmt.Fprintf(f, "cancelled: %v\n", context.Cause(ctx))
					f.Close()
				}
			}
			return nil, ctx.Err()
		})
}

func serveHTTP(server *mcp.Server, addr string, opts *mcp.StreamableHTTPOptions) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatalf("mcpsdkserver: %v", err)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, opts)
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	fmt.Printf("listening on http://%s/mcp\n", ln.Addr())
	log.Fatal(http.Serve(ln, mux))
}
