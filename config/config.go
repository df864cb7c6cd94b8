package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mcpl-go/mcpl/protocol"
)

// Defaults.
const (
	DefaultStore            = "./data/host.db"
	DefaultRequestTimeout   = 60 * time.Second
	DefaultReconnectInitial = 5 * time.Second
	DefaultReconnectMax     = 5 * time.Minute
	// ChannelRequestTimeout is the deadline channels/open, channels/close
	// and channels/publish keep when requestTimeout is 0: a channel
	// decision must settle, so those never wait forever.
	ChannelRequestTimeout = 60 * time.Second
	// DefaultInboxRetention is how long the host keeps an inbox message
	// every agent has consumed (inboxRetention).
	DefaultInboxRetention = 7 * 24 * time.Hour
)

// DefaultSendTools returns the send tools of a server whose file does not
// give channels.sendTools (Channels.SendTools nil): a new slice each call.
func DefaultSendTools() []string {
	return []string{"send_message", "reply_message", "send_dm", "send_file"}
}

// Config is one configuration file, with defaults applied and relative
// paths resolved.
type Config struct {
	// Dir is the absolute directory relative paths in the file resolve
	// against: the file's own.
	Dir string
	// Store is the absolute path of the host's state database.
	Store string
	// InboxRetention is how long the host keeps an inbox message once
	// every agent has consumed it, counted from its receipt; older ones
	// are pruned (docs/limits.md). 0 means DefaultInboxRetention.
	InboxRetention time.Duration
	// Servers are the MCPL servers, in file order.
	Servers []Server
	// Agents are the agents, in file order; Agents[0] is the primary
	// (see Primary). None is valid: the host then runs no agents.
	Agents []Agent
	// Conversations says how channel traffic reaches the agents:
	// ConversationsShared (the default) or ConversationsPerChannel.
	Conversations ConversationsMode
	// Inference routes server-initiated inference (inference/request,
	// SPEC §11) to agents, checked in order (see InferenceAgent); nil
	// routes none.
	Inference []InferenceRoute
}

// WithDefaults returns c with every default applied, to each server
// (Server.WithDefaults), agent (Agent.WithDefaults) and route
// (InferenceRoute.WithDefaults), and to c's own fields: an empty Store
// becomes DefaultStore in Dir (when Dir is set), an empty Conversations
// ConversationsShared, a zero InboxRetention DefaultInboxRetention. It shares no slice with c whose elements it
// changes. Parse and Load return configs it has been applied to.
func (c Config) WithDefaults() Config {
	if c.Store == "" && c.Dir != "" {
		c.Store = filepath.Join(c.Dir, DefaultStore)
	}
	if c.Conversations == "" {
		c.Conversations = ConversationsShared
	}
	if c.InboxRetention <= 0 {
		c.InboxRetention = DefaultInboxRetention
	}
	if c.Servers != nil {
		servers := make([]Server, len(c.Servers))
		for i, s := range c.Servers {
			servers[i] = s.WithDefaults()
		}
		c.Servers = servers
	}
	if c.Agents != nil {
		agents := make([]Agent, len(c.Agents))
		for i, a := range c.Agents {
			agents[i] = a.WithDefaults()
		}
		c.Agents = agents
	}
	if c.Inference != nil {
		routes := make([]InferenceRoute, len(c.Inference))
		for i, r := range c.Inference {
			routes[i] = r.WithDefaults()
		}
		c.Inference = routes
	}
	return c
}

// Server is one MCPL server's entry.
type Server struct {
	ID string

	// Argv is the program and its arguments (the file's command), for a
	// server the host runs as a subprocess over stdio; empty when URL is
	// set.
	Argv []string
	// Env holds variables added to the process's environment.
	Env map[string]string
	// InheritEnv passes the host's whole environment to the process.
	InheritEnv bool
	// Dir is the process's working directory: the config file's.
	Dir string

	// URL is a ws:// or wss:// address (a WebSocket server) or an http://
	// or https:// one (a Streamable HTTP server), for a server the host
	// dials; empty when Argv is set.
	URL string
	// TokenEnv names the environment variable holding the bearer token for
	// URL; empty for none. See Token.
	TokenEnv string
	// TokenParam, for a ws:// or wss:// URL with TokenEnv, names the query
	// parameter the token is sent in instead of the Authorization header,
	// for servers that read it from the URL; empty for the header.
	TokenParam string

	// ProtocolVersion pins the MCP revision the host speaks to the server
	// (one of protocol.Versions); "" negotiates (docs/mcp.md).
	ProtocolVersion string

	// ToolPrefix namespaces the server's tools: <ToolPrefix>--<tool>.
	// It defaults to ID.
	ToolPrefix string

	// AcceptTreatment accepts the treatment rules the server's tag
	// ontology suggests (SPEC §16.5), by the pin of that ontology
	// ("sha256:" and 64 hex digits, as mcplhost run logs it): while the
	// server declares the ontology pinned, its suggestions are applied
	// to its messages, after each agent's own rules. "" accepts none.
	AcceptTreatment string
	Reconnect       Reconnect
	// RequestTimeout is the deadline of each request the host sends: 0
	// means DefaultRequestTimeout, NoTimeout none (but see TimeoutFor).
	// The file's requestTimeout: 0 is NoTimeout.
	RequestTimeout time.Duration

	Tools        ToolPolicy
	Capabilities Patterns
	FeatureSets  Patterns
	Channels     Channels
}

// NoTimeout, as Server.RequestTimeout, sets no deadline.
const NoTimeout time.Duration = -1

// Reconnect is the redial policy: Initial and Max of 0 mean
// DefaultReconnectInitial and DefaultReconnectMax.
type Reconnect struct {
	Enabled bool
	// EnabledSet is whether the file wrote reconnect.enabled, so that a
	// command with a default of its own (mcplhost run redials unless
	// told not to) applies it only where the file said nothing, and an
	// explicit enabled: false still wins.
	EnabledSet   bool
	Initial, Max time.Duration
}

// Patterns is an enable/disable pair. A nil Enable constrains nothing;
// a non-nil one, even empty, is an allowlist. Disable wins.
type Patterns struct {
	Enable, Disable []string
}

// Channels is the server's channel settings.
type Channels struct {
	Subscription Subscription
	// SendTools names, bare, the server's tools that post into a channel:
	// a successful call of one into a closed channel opens that channel
	// (source opened-by-reply). Nil means not given, which WithDefaults
	// makes DefaultSendTools(); empty (the file's sendTools: [])
	// means none.
	SendTools []string
	// AcknowledgeSeen, when not "", is the value (an emoji, like 👀) of
	// the acknowledgment sent for each message addressing an agent when a
	// turn picks it up: channels/acknowledge with intent "seen", so that
	// its author sees the agent has it. "" sends none.
	AcknowledgeSeen string
	// MaxDescriptorBytes bounds one channel descriptor's JSON as received,
	// MaxTotalDescriptorBytes those of all the server's registered
	// channels together; a descriptor over either is refused, itemized.
	// 0 means the host's defaults, DefaultMaxDescriptorBytes and
	// DefaultMaxTotalDescriptorBytes (docs/limits.md).
	MaxDescriptorBytes, MaxTotalDescriptorBytes int
	// Bots says whether messages from bots and agents (chat:from-bot,
	// chat:from-agent) may wake an agent: by default they don't, even
	// when they address it, so that two bots can't talk forever.
	Bots Bots
}

// Bots is channels.bots: Wake lets bots' messages wake an agent in every
// channel of the server, Channels in those named only. Where they may,
// at most MaxReplies turns in a row in one channel are woken by bots
// alone (0: DefaultBotReplies); then bots don't wake the agent there
// until a person writes there.
type Bots struct {
	Wake       bool
	Channels   []string
	MaxReplies int
}

// DefaultBotReplies is channels.bots.maxReplies when it is not given:
// agent.DefaultBotBound, which the agent layer applies.
const DefaultBotReplies = 3

// The defaults of channels.maxDescriptorBytes and
// channels.maxTotalDescriptorBytes: channels.MaxDescriptorBytes and
// channels.MaxTotalDescriptorBytes, which the registry applies (host's
// tests hold the two equal).
const (
	DefaultMaxDescriptorBytes      = 64 << 10
	DefaultMaxTotalDescriptorBytes = 16 << 20
)

// SubscriptionMode says which channels host policy opens: none, all, or a
// list.
type SubscriptionMode string

// Subscription modes.
const (
	SubscriptionManual SubscriptionMode = "manual"
	SubscriptionAuto   SubscriptionMode = "auto"
	SubscriptionList   SubscriptionMode = "list"
)

// Subscription says which of the server's channels host policy opens
// without the agent deciding: none (manual), all (auto), or those listed.
type Subscription struct {
	Mode SubscriptionMode
	// Channels are the channel ids, for SubscriptionList.
	Channels []string
}

// Admits reports whether the subscription selects the channel with id
// channelID for opening: SubscriptionManual admits none, SubscriptionAuto
// every one, and SubscriptionList those in Channels, compared exactly
// (case and all). Any other mode, the empty one included, admits none.
func (s Subscription) Admits(channelID string) bool {
	switch s.Mode {
	case SubscriptionAuto:
		return true
	case SubscriptionList:
		return slices.Contains(s.Channels, channelID)
	}
	return false
}

// Load reads and decodes the file at path. Problems in the file come back
// together as an *Error; a file that cannot be read gives the os error,
// and one that is not a regular file (a directory, a named pipe, a
// device) or is larger than MaxFileSize an error wrapping ErrNotRegular
// or ErrTooLarge. Load never blocks on what path names: a named pipe is
// refused, not read. It checks the file alone; Check checks the machine
// too.
func Load(path string) (*Config, error) {
	return load(path, false)
}

// Check is Load, and also checks what the file names on this machine, the
// facts a file can be right about on one machine and wrong about on
// another: that each command server's program exists and is executable
// (found as the host will start it: a name with a "/" relative to the
// file's directory, a bare name in the PATH the server gets), and that the
// store can be opened (it is not a directory, it is a regular file if it
// exists, and the directory it goes in is, or can be created in, a
// writable directory). What it finds is reported with the file's problems,
// each at the line of the key it is about, in one *Error. `mcplhost check`
// uses it; run uses Load, and fails on these same things when it starts
// the server or opens the store, naming them there.
func Check(path string) (*Config, error) {
	return load(path, true)
}

func load(path string, machine bool) (*Config, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	return parse(data, path, filepath.Dir(abs), machine)
}

// Parse decodes a configuration file's contents. name is the file's name in
// messages; dir is the directory its relative paths resolve against (made
// absolute against the working directory if it is not).
func Parse(data []byte, name, dir string) (*Config, error) {
	return parse(data, name, dir, false)
}

func parse(data []byte, name, dir string, machine bool) (*Config, error) {
	if name == "" {
		name = "config"
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	d := &decoder{file: name, machine: machine}
	cfg := d.decodeFile(data, abs)
	if len(d.problems) > 0 {
		return nil, d.err()
	}
	return cfg, nil
}

// WithDefaults returns s with every default applied: the one place they
// are, for a server from a file and one configured in code alike. ToolPrefix
// defaults to ID; RequestTimeout 0 to DefaultRequestTimeout; Reconnect's
// Initial and Max of 0 to DefaultReconnectInitial and DefaultReconnectMax;
// an empty subscription mode to SubscriptionManual; nil Channels.SendTools
// to DefaultSendTools() (an empty, non-nil list stays empty).
func (s Server) WithDefaults() Server {
	if s.ToolPrefix == "" {
		s.ToolPrefix = s.ID
	}
	if s.RequestTimeout == 0 {
		s.RequestTimeout = DefaultRequestTimeout
	}
	if s.Reconnect.Initial == 0 {
		s.Reconnect.Initial = DefaultReconnectInitial
	}
	if s.Reconnect.Max == 0 {
		s.Reconnect.Max = DefaultReconnectMax
	}
	if s.Channels.Subscription.Mode == "" {
		s.Channels.Subscription.Mode = SubscriptionManual
	}
	if s.Channels.SendTools == nil {
		s.Channels.SendTools = DefaultSendTools()
	}
	return s
}

// Timeout returns the deadline of the server's requests: RequestTimeout
// (DefaultRequestTimeout when 0), or 0 for none when it is NoTimeout.
func (s Server) Timeout() time.Duration {
	switch {
	case s.RequestTimeout == 0:
		return DefaultRequestTimeout
	case s.RequestTimeout < 0:
		return 0
	}
	return s.RequestTimeout
}

// TimeoutFor returns the deadline of a request for method: Timeout, except
// that with no deadline channels/open, channels/close and channels/publish
// keep ChannelRequestTimeout, since a channel decision must settle. 0
// means no deadline.
func (s Server) TimeoutFor(method string) time.Duration {
	if d := s.Timeout(); d > 0 {
		return d
	}
	switch method {
	case protocol.MethodChannelsOpen, protocol.MethodChannelsClose, protocol.MethodChannelsPublish:
		return ChannelRequestTimeout
	}
	return 0
}

// Token returns the bearer token for a URL server, read at call time from
// the environment variable TokenEnv names; "" with no error when TokenEnv is
// empty. lookup reads a variable (nil means os.LookupEnv). An unset or
// empty variable is an error that names it; no error ever holds the token.
func (s Server) Token(lookup func(string) (string, bool)) (string, error) {
	if s.TokenEnv == "" {
		return "", nil
	}
	if lookup == nil {
		lookup = os.LookupEnv
	}
	tok, ok := lookup(s.TokenEnv)
	if !ok || tok == "" {
		return "", fmt.Errorf("server %q: environment variable %s, named by its tokenEnv, is not set", s.ID, s.TokenEnv)
	}
	return tok, nil
}

// Problem is one thing wrong in a configuration file.
type Problem struct {
	File string
	Line int    // 0 when the problem has no line
	Key  string // the key's full path, like servers[0].reconnect.initial; "" for none
	Msg  string
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	b.WriteString(": ")
	if p.Key != "" {
		b.WriteString(p.Key + ": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Error holds every problem found in a file, in file order.
type Error struct {
	Problems []Problem
}

// Error returns the problems one a line.
func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}
