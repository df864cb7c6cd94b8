package server

// ServeIO exposes serveIO, ServeStdio's body, to tests over pipes.
var ServeIO = (*Server).serveIO

// ServeStream exposes serve, every transport's body, to tests over
// in-memory message streams.
var ServeStream = (*Server).serve
