// Package grant is the capability grant of MCPL (SPEC §5, §6; RFC-002):
// the capability paths and their vocabulary, the reading of a server's
// advertisement (every shape real servers send), the effective grant a host
// computes from it and host policy, each declared feature set's state, and
// the outcome of the policy exchange that establishes the grant.
//
// It is pure: no I/O, no clocks, no goroutines, so every rule is tested
// exhaustively as a table. It is public because the grant is part of what
// an embedder reads (host.ServerState) and what a server author declares
// (server.Options.Capabilities takes its paths), and its rules are the
// specification's, pinned: they change only with the specification.
//
// Its tables are functions that return copies (Vocabulary, DeniedByDefault):
// what is grantable is not a variable anyone can change.
package grant
