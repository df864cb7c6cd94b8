package server

// ServeIO exposes serveIO, ServeStdio's body, to tests over pipes.
var ServeIO = (*Server).serveIO

// ServeStream exposes serve, every transport's body, to tests over
// in-memory message streams.
var ServeStream = (*Server).serve

// Running counts the requests of c whose handlers run and the host can
// cancel.
func Running(c *Conn) int {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	return len(c.running)
}
