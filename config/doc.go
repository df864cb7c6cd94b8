// Package config reads the host's configuration file: where the host keeps
// its state; for each MCPL server, how to reach it and what host policy
// bounds it; and the agents, how channel traffic reaches them, and which
// serves server-initiated inference. docs/config.md is the operator's
// reference; this comment records the decisions behind it.
//
// # Reading the file
//
// The file is YAML, one document, a mapping at the top. go.yaml.in/yaml/v3
// parses it into a node tree (which keeps every key's line), and this package
// decodes that tree into typed structs itself, strictly: a key no struct
// declares is an error, and so is a value of the wrong kind. That is the rule
// yaml.v3's Decoder.KnownFields(true) enforces, but its messages name Go
// types ("field comand not found in type config.rawServer") where an
// operator needs the key's path and a suggestion, so the decoder here
// enforces it instead and words every problem as
//
//	config.yaml:7: servers[0].reconnect.initial: "5 seconds" is not a duration (write it like 5s or 2m30s)
//
// Every problem in the file is reported, one a line, in file order; Parse and
// Load return them together as an *Error. Aliases and merge keys ("<<") are
// followed. A key given twice in one mapping is an error. A key present with
// no value (null) is an error rather than a silent default, so that
// `enable:` is never mistaken for either an absent list or an empty one.
// String values accept any scalar as written (command: [sleep, 5]);
// booleans are true or false only; durations are Go durations
// (time.ParseDuration: 5s, 2m30s, 1h).
//
// Checking takes time linear in the file's size, however many problems it
// has (a file that is not YAML takes log2(lines) parses more, to find the
// line that breaks it): no check compares each server with every other, and a mapping
// merged by more than one route is walked once. Aliases could still make a
// few lines stand for far more than the file holds, so what they repeat is
// charged to a budget that grows with the file's size, and past it
// checking stops with a problem at the alias that crossed it; a file that
// merges defaults into each server stays far below it.
//
// # Decisions
//
//   - Exactly one of command (a non-empty list: the program and its
//     arguments) or url (ws://, wss://, http:// or https://) per server. env and inheritEnv go
//     with command only, tokenEnv with url only. A url carrying a credential
//     (user:password@ or a token= query parameter) is refused: tokens are
//     never written in the file. tokenEnv names an environment variable; the
//     token is read only at connect time, by Server.Token, whose error names
//     the variable and never a value.
//   - id is required, unique, and matches ^[A-Za-z0-9][A-Za-z0-9_.-]*$.
//     toolPrefix defaults to the id and matches ^[A-Za-z0-9][A-Za-z0-9_-]*$,
//     without "--" and not ending in "-". It allows no "." (an id may have
//     one) because tools are exposed as <prefix>--<tool>, and the model APIs
//     accept only letters, digits, "_" and "-" in a tool name; a server whose
//     id has a "." needs an explicit toolPrefix.
//   - Two prefixes meet when one tool name could resolve to both servers
//     (PrefixesMeet). With the character rules above two valid prefixes
//     meet only when equal; CheckPrefix applies the general rule at runtime,
//     where names may come from elsewhere. Comparison is case-sensitive, as
//     tool dispatch is.
//   - reconnect.enabled defaults to false here, initial to 5s, max to 5m;
//     both must be more than 0 and max at least initial. Reconnect.EnabledSet
//     says whether the file wrote enabled, for a command whose default is
//     another: mcplhost run redials a server whose file says nothing.
//   - requestTimeout defaults to 60s. 0 disables it (Server.RequestTimeout
//     NoTimeout), except for channels/open, channels/close and
//     channels/publish, which keep a deadline of ChannelRequestTimeout
//     (Server.TimeoutFor). Negative durations are errors everywhere.
//   - Defaults are applied in one place, Server.WithDefaults (and
//     Agent.WithDefaults, InferenceRoute.WithDefaults, and
//     Config.WithDefaults, which applies all of them), by the decoder and
//     by the host alike, so a server or agent configured in code gets what
//     one from a file gets.
//   - store is the SQLite file holding channel decisions and the inbox of
//     inbound messages; it is created if missing, and the host replays it
//     at start.
//   - inboxRetention (default DefaultInboxRetention, 168h) is how long
//     the host keeps an inbox message every agent has consumed, from its
//     receipt; more than 0.
//   - tools.enable and tools.disable hold bare tool names, where * matches
//     any run of characters (including "--" and nothing). Deny wins. An
//     absent enable allows every tool; a present one, even [], is an
//     allowlist.
//   - capabilities and featureSets are kept as written, absent (nil, no
//     constraint) apart from [] (an allowlist of nothing); the host maps
//     them onto its grant policy. A
//     capability pattern is dot-separated segments, each letters and digits
//     or *; a well-formed path this host does not know is accepted, since a
//     newer server may advertise it. A feature-set pattern is a
//     dot-separated name, "*", or a name ending in ".*".
//   - channels.subscription is manual (the default), auto, or a list of
//     channel ids ([] admits none, as manual does); Subscription.Admits
//     applies it, ids compared exactly. It selects channels for opening
//     when the server registers them and the agent has not decided
//     (source subscription-policy); a channel the agent closed stays
//     closed.
//   - channels.sendTools lists the server's tools that post into a
//     channel, by bare name: a successful call of one into a closed
//     channel opens that channel (source opened-by-reply). Names match
//     exactly, so * is refused rather than never matching. Absent (nil)
//     means DefaultSendTools(), which WithDefaults fills in; [] means none,
//     and stays an empty, non-nil list, as with enable lists.
//   - Relative paths are relative to the config file's directory: store
//     (default ./data/host.db) is made absolute against it, and a command
//     server runs in it (Server.Dir), so command: [go, run, ../echo] names a
//     directory next to the file's. "~" is not expanded.
//   - An empty file is an error (it is more often a wrong path than a
//     wish); a file with servers: [] is valid.
//   - agents is a list, not a mapping of names, so that its order is
//     plain: the first agent is the primary (Config.Primary), the
//     template of per-channel forks and the agent told by name what
//     another can't act on. No agents (absent or []) is valid: the host
//     runs none. name is required, unique (compared exactly) and matches
//     ^[A-Za-z0-9_-]{1,64}$, the participant name model APIs accept.
//   - model.provider is scripted, anthropic or openai, and selects the
//     keys that go with it: script and echo (scripted); model, apiKeyEnv,
//     baseURL and contextWindow (anthropic, openai); keyOptional (openai).
//     A key of another provider is an error naming the providers it goes
//     with, rather than a silent no-op. A scripted model has exactly one
//     of script or echo: true (echo: false counts as absent); script is
//     made absolute against the file's directory, as store is, and is not
//     opened here (the package reads no file but the config). A hosted
//     model needs model. apiKeyEnv defaults to ANTHROPIC_API_KEY or
//     OPENAI_API_KEY; the provider reads the variable at each call, so no
//     key is ever in a Config. baseURL is http:// or https://, refused
//     with a user, password, or a credential or key parameter, as url is.
//   - allowedTools is all (the default) or a list of patterns over the
//     names agents see (channel_open, chat--send_message), matched as
//     tools patterns are (AllowedTools.Allows). [] allows none; "all" in
//     a list is refused, since it would name a tool called all. Nil
//     Patterns means not given, which WithDefaults makes All.
//   - maxTokens is more than 0 (default DefaultMaxTokens, 1024);
//     contextWindow is 0 or more, 0 meaning unknown. Whole numbers are
//     YAML integers, unquoted (200_000 and 0x400 included).
//   - conversations is shared (the default) or per-channel; per-channel
//     forks the primary for each channel, so it needs an agent.
//   - inference lists routes, first match wins (Config.InferenceAgent);
//     a request no route matches is refused. server is a configured id,
//     compared exactly, or *; featureSet is a featureSets pattern; both
//     default to *. agent must name a configured agent. A name or id given
//     with a problem of its own counts as configured here, so each mistake
//     is reported once. Suggestions for a misspelt name or id are made
//     among at most 16 candidates, so that checking routes stays linear.
//
// Load reads only a regular file of at most MaxFileSize bytes, opened
// without blocking (see readFile). Check is Load and a look at what the
// file names on this machine: each command's program and the store's
// place (see programProblem and storeMachineProblem); those are facts of
// the machine, not the file, so Load and run leave them to the moment
// they start the server or open the store. A URL's host and port are the
// file's: an empty port (ws://h:/) is refused by Load.
//
// The package is data: pure apart from Load and Check reading the file
// and looking at the paths it names, and Server.Token reading the
// environment (no goroutines, no clocks), and it imports none of the
// host's machinery; package host maps it.
package config
