// Command echoserver is the far end of the benchmark: an MCP server on
// stdin and stdout, one JSON-RPC message a line, that costs as little as
// it can, so that a round trip measures the client.
//
// A tools/call is answered without parsing it: the request's id is found
// by scanning and spliced between a fixed prefix and a fixed suffix. The
// handshake (initialize, tools/list, MCPL's featureSets/update, ping) is
// answered by decoding the request with encoding/json, as it happens once
// a connection. A line that does not begin with '{' is not JSON-RPC: it is
// written back unchanged (the raw floor). Notifications, and answers to
// requests it never made, get no answer. Any other request is answered
// "method not found" (the Go SDK's server/discover, say).
//
// With -mcpl it advertises MCPL (experimental.mcpl, version 0.5, asking
// for nothing), so a host runs its policy exchange as with a real MCPL
// server, and accepts whatever policy the host sends. Without it, it is a
// plain MCP server.
//
// It exits when stdin ends.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/mcpl-go/mcpl/bench/internal/canned"
)

func main() {
	mcpl := flag.Bool("mcpl", false, "advertise MCPL (experimental.mcpl) and accept the host's policy")
	pidfile := flag.String("pidfile", "", "write this process's id to this file at start (for the benchmark's CPU accounting)")
	flag.Parse()
	if *pidfile != "" {
		if err := os.WriteFile(*pidfile, []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, "echoserver:", err)
			os.Exit(1)
		}
	}
	if err := serve(os.Stdin, os.Stdout, *mcpl); err != nil {
		fmt.Fprintln(os.Stderr, "echoserver:", err)
		os.Exit(1)
	}
}

// serve answers each line of r on w until r ends, flushing after each
// answer. It returns nil at the end of r.
func serve(r io.Reader, w io.Writer, mcpl bool) error {
	in := bufio.NewReaderSize(r, 64<<10)
	out := bufio.NewWriterSize(w, 64<<10)
	a := answerer{mcpl: mcpl}
	var long []byte // a line longer than in's buffer, gathered
	for {
		line, err := in.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = in.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil {
			// A last line without its newline is not a whole message.
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if !a.answer(out, line) {
			continue
		}
		if err := out.Flush(); err != nil {
			return err
		}
	}
}

// The canned answer to tools/call, around the request's id.
var (
	answerPrefix = []byte(`{"jsonrpc":"2.0","id":`)
	callResult   = []byte(`,"result":{"content":[{"type":"text","text":"` + canned.Text + `"}]}}` + "\n")
)

// What the fast path looks for.
var (
	toolsCallMember = []byte(`"method":"tools/call"`)
	idMember        = []byte(`"id":`)
	paramsMember    = []byte(`"params"`)
)

// answerer answers one line at a time.
type answerer struct {
	mcpl bool
}

// answer writes the answer to line, if it has one, and says whether it
// wrote anything. line ends with its newline.
func (a answerer) answer(out *bufio.Writer, line []byte) bool {
	body := bytes.TrimRight(line, "\r\n")
	if len(body) == 0 {
		return false
	}
	if body[0] != '{' {
		out.Write(body)
		out.WriteByte('\n')
		return true
	}
	if id, ok := fastToolsCall(body); ok {
		writeAnswer(out, id, callResult)
		return true
	}
	return a.slow(out, body)
}

// fastToolsCall finds the id of a tools/call request without parsing it:
// the first "id" member, when it comes before "params" (so it is not one
// inside the arguments). It declines anything else, which the slow path
// then decodes.
func fastToolsCall(body []byte) (id []byte, ok bool) {
	if !bytes.Contains(body, toolsCallMember) {
		return nil, false
	}
	i := bytes.Index(body, idMember)
	if i < 0 {
		return nil, false
	}
	if p := bytes.Index(body, paramsMember); p >= 0 && p < i {
		return nil, false
	}
	rest := body[i+len(idMember):]
	for len(rest) > 0 && (rest[0] == ' ' || rest[0] == '\t') {
		rest = rest[1:]
	}
	switch {
	case len(rest) == 0:
		return nil, false
	case rest[0] == '"':
		for j := 1; j < len(rest); j++ {
			switch rest[j] {
			case '\\':
				return nil, false // an escaped id: leave it to the slow path
			case '"':
				return rest[:j+1], true
			}
		}
		return nil, false
	default:
		j := 0
		for j < len(rest) && (rest[j] == '-' || rest[j] >= '0' && rest[j] <= '9') {
			j++
		}
		if j == 0 || j == len(rest) || (rest[j] != ',' && rest[j] != '}' && rest[j] != ' ') {
			return nil, false
		}
		return rest[:j], true
	}
}

// message is what the slow path reads of a line.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

// slow decodes a line and answers it: the handshake's requests, and a
// tools/call the fast path declined.
func (a answerer) slow(out *bufio.Writer, body []byte) bool {
	var m message
	if json.Unmarshal(body, &m) != nil {
		// Not JSON-RPC after all: echo it, as any other raw line.
		out.Write(body)
		out.WriteByte('\n')
		return true
	}
	if len(m.ID) == 0 || bytes.Equal(m.ID, []byte("null")) || m.Method == "" {
		return false // a notification, or an answer to nothing we asked
	}
	var result string
	switch m.Method {
	case "initialize":
		caps := `{"tools":{}}`
		if a.mcpl {
			caps = `{"tools":{},"experimental":{"mcpl":{"version":"0.5"}}}`
		}
		result = `{"protocolVersion":"2024-11-05","capabilities":` + caps +
			`,"serverInfo":{"name":"` + canned.ServerName + `","version":"0.1.0"}}`
	case "tools/list":
		result = `{"tools":[{"name":"` + canned.Tool + `","description":"Answers every call with the same text.",` +
			`"inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}}]}`
	case "tools/call":
		writeAnswer(out, m.ID, callResult)
		return true
	case "featureSets/update":
		result = `{"accepted":true}`
	case "ping":
		result = `{}`
	default:
		msg, _ := json.Marshal("method not found: " + m.Method)
		writeAnswer(out, m.ID, []byte(`,"error":{"code":-32601,"message":`+string(msg)+"}}\n"))
		return true
	}
	writeAnswer(out, m.ID, []byte(`,"result":`+result+"}\n"))
	return true
}

// writeAnswer writes a JSON-RPC answer to id: the envelope's start, the
// id, and rest (the result or error member, the closing brace and the
// newline).
func writeAnswer(out *bufio.Writer, id, rest []byte) {
	out.Write(answerPrefix)
	out.Write(id)
	out.Write(rest)
}
