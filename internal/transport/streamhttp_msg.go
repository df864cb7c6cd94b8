package transport

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// What the Streamable HTTP transport reads of the messages it carries.

// metaVersionKey is the _meta field of a stateless-era (2026-07-28)
// message that names its protocol version.
const metaVersionKey = "io.modelcontextprotocol/protocolVersion"

// outgoing is what the transport needs of a message it sends.
type outgoing struct {
	method        string
	id            json.RawMessage // nil for a notification
	modernVersion string          // params._meta's protocol version
	nameValue     string          // params.name or params.uri, for Mcp-Name
}

func (m outgoing) isRequest() bool {
	return m.method != "" && len(m.id) > 0 && string(m.id) != "null"
}

// sniffOutgoing reads msg's method, id and the params the headers mirror.
// What does not parse is left zero: the message is sent as it is.
func sniffOutgoing(msg []byte) outgoing {
	var env struct {
		Method string          `json:"method"`
		ID     json.RawMessage `json:"id"`
		Params json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(msg, &env)
	m := outgoing{method: env.Method, id: bytes.TrimSpace(env.ID)}
	if len(env.Params) == 0 || env.Params[0] != '{' {
		return m
	}
	var params struct {
		Meta map[string]json.RawMessage `json:"_meta"`
		Name json.RawMessage            `json:"name"`
		URI  json.RawMessage            `json:"uri"`
	}
	if json.Unmarshal(env.Params, &params) != nil {
		return m
	}
	if raw, ok := params.Meta[metaVersionKey]; ok {
		_ = json.Unmarshal(raw, &m.modernVersion)
	}
	switch m.method {
	case "tools/call", "prompts/get":
		_ = json.Unmarshal(params.Name, &m.nameValue)
	case "resources/read":
		_ = json.Unmarshal(params.URI, &m.nameValue)
	}
	return m
}

// headerSafe returns v as a header value: as it is when it is plain
// visible ASCII (spaces and tabs inside), and otherwise in the
// "=?base64?...?=" form the 2026-07-28 transport defines.
func headerSafe(v string) string {
	plain := v == strings.TrimSpace(v) && !(strings.HasPrefix(v, "=?base64?") && strings.HasSuffix(v, "?="))
	for i := 0; plain && i < len(v); i++ {
		c := v[i]
		plain = c == '\t' || (c >= 0x20 && c <= 0x7e)
	}
	if plain {
		return v
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
}

// sameID reports whether two JSON-RPC ids are the same: byte for byte,
// or as numbers of the same value.
func sameID(a, b json.RawMessage) bool {
	a, b = bytes.TrimSpace(a), bytes.TrimSpace(b)
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	if bytes.Equal(a, b) {
		return true
	}
	fa, ea := strconv.ParseFloat(string(a), 64)
	fb, eb := strconv.ParseFloat(string(b), 64)
	return ea == nil && eb == nil && fa == fb
}

// isResponseFor reports whether msg is a response (a result or an error,
// no method) to the request with id.
func isResponseFor(msg []byte, id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	var env struct {
		Method *string         `json:"method"`
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(msg, &env) != nil {
		return false
	}
	return env.Method == nil && sameID(env.ID, id) && (env.Result != nil || env.Error != nil)
}

// initializeVersion returns result.protocolVersion of an initialize
// response, or "".
func initializeVersion(msg []byte) string {
	var env struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	_ = json.Unmarshal(msg, &env)
	return env.Result.ProtocolVersion
}

// codeInternal is the JSON-RPC code of the error responses the transport
// makes up for requests it could not get answered.
const codeInternal = -32603

// errorAnswer is a JSON-RPC error response to the request with id. A
// status other than 0 goes into its data as httpStatus.
func errorAnswer(id json.RawMessage, message string, status int) []byte {
	type errObj struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    any    `json:"data,omitempty"`
	}
	e := errObj{Code: codeInternal, Message: message}
	if status != 0 {
		e.Data = map[string]int{"httpStatus": status}
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   errObj          `json:"error"`
	}{"2.0", id, e})
	return b
}

// refusalAnswer is the answer, for Read, to a request the server refused
// with an HTTP error status: its body when that is a JSON-RPC error
// response to the request, as it is; its error object under the request's
// id when it is one with no id; otherwise an error naming the status and
// quoting the body (shown: sanitized).
func refusalAnswer(id json.RawMessage, status int, body []byte, shown string) []byte {
	body = bytes.TrimSpace(body)
	var env struct {
		Method *string         `json:"method"`
		ID     json.RawMessage `json:"id"`
		Error  json.RawMessage `json:"error"`
	}
	if len(body) < snippetMax && json.Unmarshal(body, &env) == nil && env.Method == nil {
		e := bytes.TrimSpace(env.Error)
		if len(e) > 0 && e[0] == '{' {
			if sameID(env.ID, id) {
				return body
			}
			if len(env.ID) == 0 || string(bytes.TrimSpace(env.ID)) == "null" {
				b, _ := json.Marshal(struct {
					JSONRPC string          `json:"jsonrpc"`
					ID      json.RawMessage `json:"id"`
					Error   json.RawMessage `json:"error"`
				}{"2.0", id, e})
				return b
			}
		}
	}
	return errorAnswer(id, statusWords(status, shown), status)
}

// sanitizeSnippet returns the first bytes of body fit to quote: valid
// UTF-8, control characters as spaces, runs of space as one, secrets
// scrubbed.
func sanitizeSnippet(body []byte, sec *secrets) string {
	if len(body) > snippetShown {
		body = body[:snippetShown]
		for len(body) > 0 && !utf8.Valid(body) {
			body = body[:len(body)-1]
		}
	}
	text := strings.ToValidUTF8(string(body), "\uFFFD")
	text = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return ' '
		}
		return r
	}, text)
	text = strings.Join(strings.Fields(text), " ")
	return sec.scrub(text)
}

// netCauses are the errors in err's chain whose text holds no URL: the
// context's, and the network's.
func netCauses(err error) []error {
	var causes []error
	for _, target := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, target) {
			causes = append(causes, target)
		}
	}
	var op *net.OpError
	if errors.As(err, &op) {
		causes = append(causes, op)
	}
	return causes
}

// msgQueue holds the messages received for Read, bounded in bytes: put
// waits while the bound is reached (one message is always taken when none
// waits), which stops the body reader that calls it.
type msgQueue struct {
	mu      sync.Mutex
	items   [][]byte
	bytes   int
	limit   int
	err     error // the end, once what is queued has been read
	closed  bool
	changed chan struct{} // closed and replaced at every change
}

func newMsgQueue(limit int) *msgQueue {
	return &msgQueue{limit: limit, changed: make(chan struct{})}
}

func (q *msgQueue) notifyLocked() {
	close(q.changed)
	q.changed = make(chan struct{})
}

var errQueueEnded = errors.New("transport: stream ended")

// put queues msg, waiting for room until ctx ends.
func (q *msgQueue) put(ctx context.Context, msg []byte) error {
	for {
		q.mu.Lock()
		if q.closed || q.err != nil {
			q.mu.Unlock()
			return errQueueEnded
		}
		if len(q.items) == 0 || q.bytes+len(msg) <= q.limit {
			q.items = append(q.items, msg)
			q.bytes += len(msg)
			q.notifyLocked()
			q.mu.Unlock()
			return nil
		}
		ch := q.changed
		q.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// get returns the next message, waiting for one; the end once the queue
// is empty; ErrClosed once closed.
func (q *msgQueue) get() ([]byte, error) {
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return nil, ErrClosed
		}
		if len(q.items) > 0 {
			msg := q.items[0]
			q.items[0] = nil
			q.items = q.items[1:]
			q.bytes -= len(msg)
			q.notifyLocked()
			q.mu.Unlock()
			return msg, nil
		}
		if q.err != nil {
			err := q.err
			q.mu.Unlock()
			return nil, err
		}
		ch := q.changed
		q.mu.Unlock()
		<-ch
	}
}

// fail ends the queue with err, after what it holds; the first stands.
func (q *msgQueue) fail(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err == nil {
		q.err = err
		q.notifyLocked()
	}
}

// close ends the queue now, dropping what it holds.
func (q *msgQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.items, q.bytes = nil, 0
	q.notifyLocked()
}
