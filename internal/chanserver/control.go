package chanserver

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// The control listener: for a test whose host is a subprocess (mcplhost
// run), so that it can't call the server's tools through the host, the
// server serves its tools over HTTP on 127.0.0.1 too. POST
// /tools/{name}, with the tool's arguments as the body, answers 200 with
// a ControlAnswer: the tool's text and whether it is an error result.
// The calls go through the same handler as the host's tools/call.

// ControlAnswer is a control call's answer.
type ControlAnswer struct {
	Text    string `json:"text"`
	IsError bool   `json:"isError"`
}

// ControlFile is what Config.Control's file holds.
type ControlFile struct {
	URL string `json:"url"` // http://127.0.0.1:PORT
	Pid int    `json:"pid"` // the server's process
}

// control serves the control listener until the connection ends.
type control struct {
	ln     net.Listener
	http   *http.Server
	client *wire.Peer // calls the server's handler over an in-memory pipe
	served *wire.Peer
}

// startControl starts the listener and the pipe it calls the tools over.
func (srv *server) startControl() (*control, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	a, b := transport.Pipe(0)
	c := &control{ln: ln}
	c.served = wire.NewPeer(a, wire.Options{Name: "control", Handler: wire.HandlerFunc(srv.serve), Logger: log})
	c.client = wire.NewPeer(b, wire.Options{Name: "chanserver", Logger: log})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /tools/{name}", c.call)
	c.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	srv.work.Go(func() {
		if err := c.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("chanserver: the control listener failed", "error", err)
		}
	})
	return c, nil
}

func (c *control) call(w http.ResponseWriter, r *http.Request) {
	var args json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
		http.Error(w, "the body is not JSON: "+err.Error(), http.StatusBadRequest)
		return
	}
	var res protocol.CallToolResult
	if err := c.client.Call(r.Context(), protocol.MethodToolsCall, protocol.CallToolParams{Name: r.PathValue("name"), Arguments: args}, &res); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(ControlAnswer{Text: res.Text(), IsError: res.IsError})
}

// publish writes the control file: to a temporary name, then renamed, so
// that a reader never sees half of it.
func (c *control) publish(path string) error {
	b, _ := json.Marshal(ControlFile{URL: "http://" + c.ln.Addr().String(), Pid: os.Getpid()})
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// stop ends the listener, the calls under way, and the pipe.
func (c *control) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c.client.Close()
	c.served.Close()
	if c.http.Shutdown(ctx) != nil {
		c.http.Close()
	}
	<-c.client.Done()
	<-c.served.Done()
}
