package server

// ServeIO exposes serveIO, ServeStdio's body, to tests over pipes.
var ServeIO = (*Server).serveIO
