package config

import (
	"fmt"
	"github.com/mcpl-go/mcpl/protocol"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The keys each mapping accepts.
var (
	topKeys       = []string{"store", "inboxRetention", "servers", "agents", "conversations", "inference"}
	serverKeys    = []string{"id", "command", "env", "inheritEnv", "url", "tokenEnv", "tokenParam", "toolPrefix", "reconnect", "requestTimeout", "tools", "capabilities", "featureSets", "channels", "acceptTreatment", "protocolVersion"}
	reconnectKeys = []string{"enabled", "initial", "max"}
	policyKeys    = []string{"enable", "disable"}
	channelsKeys  = []string{"subscription", "sendTools", "acknowledgeSeen", "maxDescriptorBytes", "maxTotalDescriptorBytes", "bots"}
	botsKeys      = []string{"wake", "channels", "maxReplies"}
)

// decodeFile decodes a whole file; it returns nil when the file is not a
// YAML mapping at all.
func (d *decoder) decodeFile(data []byte, dir string) (cfg *Config) {
	d.budget = aliasBudgetBase + len(data)/aliasBudgetBytes
	defer func() {
		switch r := recover().(type) {
		case nil:
		case overBudget:
			d.add(r.line, r.path, "checking stopped here: the file's aliases repeat too much of it to check in reasonable time; alias fewer or smaller values")
			cfg = nil
		default:
			panic(r)
		}
	}()
	root := d.parse(data)
	if root == nil {
		return nil
	}
	if deref(root).Kind != yaml.MappingNode {
		d.add(root.Line, "", "the file must be a mapping of keys (store:, servers:, agents:, ...), not %s", describe(root))
		return nil
	}
	// Defaults are applied at the end, by Config.WithDefaults.
	cfg = &Config{Dir: dir}
	var (
		seen     []placed
		agents   []placedAgent
		routes   []placedRoute
		convLine int
		// storeLine is the store key's line, storeOK whether its value
		// was taken (for Check).
		storeLine int
		storeOK   bool
	)
	d.fields(root, "", root.Line, "", topKeys, func(e entry, path string) {
		switch e.name {
		case "store":
			storeLine = e.key.Line
			if s, ok := d.scalar(e.val, path, e.key.Line, "a file path"); ok {
				if msg := storeProblem(s); msg != "" {
					d.add(e.key.Line, path, "%s", msg)
				} else if filepath.IsAbs(s) {
					cfg.Store, storeOK = filepath.Clean(s), true
				} else {
					cfg.Store, storeOK = filepath.Join(dir, s), true
				}
			}
		case "inboxRetention":
			cfg.InboxRetention = d.positive(e.val, path, e.key.Line)
		case "servers":
			if deref(e.val).Kind != yaml.SequenceNode {
				d.wrong(e.val, path, e.key.Line, "a list of servers, each starting with - id:")
				return
			}
			items := deref(e.val).Content
			if len(items) > 0 { // servers: [] leaves Servers nil
				cfg.Servers = make([]Server, 0, len(items))
				seen = make([]placed, 0, len(items))
			}
			for i, it := range items {
				p := placed{path: fmt.Sprintf("%s[%d]", path, i)}
				d.alias(it, p.path)
				s, ok := d.server(it, &p, dir)
				if ok {
					cfg.Servers = append(cfg.Servers, s)
				}
				p.ID, p.ToolPrefix = s.ID, s.ToolPrefix
				seen = append(seen, p)
			}
		case "agents":
			cfg.Agents, agents = d.agents(e.val, path, e.key.Line, dir)
		case "conversations":
			convLine = e.key.Line
			cfg.Conversations = d.conversations(e.val, path, e.key.Line)
		case "inference":
			cfg.Inference, routes = d.routes(e.val, path, e.key.Line)
		}
	})
	d.crossServers(seen)
	d.crossAgents(agents)
	d.crossRoutes(routes, seen, agents)
	if cfg.Conversations == ConversationsPerChannel && len(agents) == 0 {
		d.add(convLine, "conversations", "per-channel gives each channel a fork of the primary agent, and the file configures no agent; add one under agents:, or leave conversations out")
	}
	*cfg = cfg.WithDefaults()
	if d.machine && (storeOK || storeLine == 0) {
		d.checkStore(cfg.Store, storeLine)
	}
	return cfg
}

// placed is where a decoded server's parts are in the file, with what
// crossServers compares.
type placed struct {
	ID, ToolPrefix  string
	path            string
	idLine, preLine int // the lines of its id and its tool prefix (0 when absent)
	idOK, preOK     bool
}

// server decodes one servers[] item; ok is false when it is not a mapping.
func (d *decoder) server(n *yaml.Node, p *placed, dir string) (Server, bool) {
	path := p.path
	// Defaults first (the ID is not known yet, so no prefix); what the
	// file gives replaces them.
	s := Server{Dir: dir}.WithDefaults()
	var cmdLine, progLine, urlLine, envLine, inheritLine, tokenLine, paramLine, initialLine, maxLine int
	ok := d.fields(n, path, n.Line, "a mapping with id: and command: or url:", serverKeys, func(e entry, path string) {
		line := e.key.Line
		switch e.name {
		case "id":
			p.idLine = line
			if v, ok := d.scalar(e.val, path, line, "a string"); ok {
				s.ID = v
				if msg := idProblem(v); msg != "" {
					d.add(line, path, "%q %s", v, msg)
				} else {
					p.idOK = true
				}
			}
		case "command":
			cmdLine = line
			if s.Argv = d.command(e.val, path, line); s.Argv != nil {
				progLine = deref(e.val).Content[0].Line
			}
		case "env":
			envLine = line
			s.Env = d.env(e.val, path, line)
		case "inheritEnv":
			inheritLine = line
			s.InheritEnv, _ = d.boolean(e.val, path, line)
		case "url":
			urlLine = line
			if v, ok := d.scalar(e.val, path, line, "a URL like ws://host:port/path"); ok {
				if msg := urlProblem(v); msg != "" {
					d.add(line, path, "%s", msg)
				} else {
					s.URL = v
				}
			}
		case "tokenEnv":
			tokenLine = line
			if v, ok := d.scalar(e.val, path, line, "the name of an environment variable"); ok {
				if !envNameRE.MatchString(v) {
					// Not quoted: a token pasted here by mistake stays out of logs.
					d.add(line, path, "is not an environment variable name (letters, digits and _, not starting with a digit); write the name of the variable that holds the token, never the token itself")
				} else {
					s.TokenEnv = v
				}
			}
		case "protocolVersion":
			if v, ok := d.scalar(e.val, path, line, "an MCP revision like 2025-11-25"); ok {
				if !protocol.Speaks(v) {
					d.add(line, path, "%q is not an MCP revision this host speaks (%s); leave it out to negotiate", v, strings.Join(protocol.Versions, ", "))
				} else {
					s.ProtocolVersion = v
				}
			}
		case "tokenParam":
			paramLine = line
			if v, ok := d.scalar(e.val, path, line, "the name of a URL query parameter, like token"); ok {
				if !paramNameRE.MatchString(v) {
					// Not quoted: a token pasted here by mistake stays out of logs.
					d.add(line, path, "is not a query parameter name (letters, digits, _, - and .); write the name of the parameter the server reads the token from, like token, never the token itself")
				} else {
					s.TokenParam = v
				}
			}
		case "acceptTreatment":
			if v, ok := d.scalar(e.val, path, line, "the pin of the server's tag ontology, like sha256:1f0c…"); ok {
				if !pinRE.MatchString(v) {
					d.add(line, path, "%q is not a pin: write the sha256:… that mcplhost run logs for this server's suggested treatment", v)
				} else {
					s.AcceptTreatment = v
				}
			}
		case "toolPrefix":
			p.preLine = line
			if v, ok := d.scalar(e.val, path, line, "a string"); ok {
				s.ToolPrefix = v
				if msg := prefixProblem(v); msg != "" {
					d.add(line, path, "%q is not a valid tool prefix: %s", v, msg)
				} else {
					p.preOK = true
				}
			}
		case "reconnect":
			d.fields(e.val, path, line, "a mapping like {enabled: true, initial: 5s, max: 5m}", reconnectKeys, func(e entry, path string) {
				switch e.name {
				case "enabled":
					s.Reconnect.Enabled, s.Reconnect.EnabledSet = d.boolean(e.val, path, e.key.Line)
				case "initial":
					initialLine = e.key.Line
					s.Reconnect.Initial = d.positive(e.val, path, e.key.Line)
				case "max":
					maxLine = e.key.Line
					s.Reconnect.Max = d.positive(e.val, path, e.key.Line)
				}
			})
		case "requestTimeout":
			if v, ok := d.duration(e.val, path, line); ok {
				s.RequestTimeout = v
				if v == 0 {
					s.RequestTimeout = NoTimeout
				}
			}
		case "tools":
			s.Tools.Enable, s.Tools.Disable = d.patterns(e.val, path, line, "tool names", toolPatternProblem)
		case "capabilities":
			s.Capabilities.Enable, s.Capabilities.Disable = d.patterns(e.val, path, line, "capability patterns", capabilityPatternProblem)
		case "featureSets":
			s.FeatureSets.Enable, s.FeatureSets.Disable = d.patterns(e.val, path, line, "feature-set names", featureSetPatternProblem)
		case "channels":
			d.fields(e.val, path, line, "a mapping like {subscription: manual, sendTools: [...]}", channelsKeys, func(e entry, path string) {
				switch e.name {
				case "subscription":
					s.Channels.Subscription = d.subscription(e.val, path, e.key.Line)
				case "sendTools":
					// Absent leaves the defaults WithDefaults put in s;
					// [] is an empty, non-nil list: no send tools.
					if v, ok := d.list(e.val, path, e.key.Line, "a list of tool names", sendToolProblem); ok {
						s.Channels.SendTools = v
					}
				case "acknowledgeSeen":
					if v, ok := d.scalar(e.val, path, e.key.Line, "a short value, like an emoji"); ok {
						switch {
						case strings.TrimSpace(v) == "":
							d.add(e.key.Line, path, "is empty; give a short value like \"👀\", or leave the key out to send no acknowledgment")
						case len(v) > 64:
							d.add(e.key.Line, path, "is %d bytes; an acknowledgment is a short value like an emoji, at most 64 bytes", len(v))
						default:
							s.Channels.AcknowledgeSeen = v
						}
					}
				case "maxDescriptorBytes":
					s.Channels.MaxDescriptorBytes = d.byteBound(e.val, path, e.key.Line, DefaultMaxDescriptorBytes)
				case "maxTotalDescriptorBytes":
					s.Channels.MaxTotalDescriptorBytes = d.byteBound(e.val, path, e.key.Line, DefaultMaxTotalDescriptorBytes)
				case "bots":
					s.Channels.Bots = d.bots(e.val, path, e.key.Line)
				}
			})
		}
	})
	if !ok {
		return s, false
	}
	if p.idLine == 0 {
		d.add(n.Line, path, "has no id; every server needs one, like id: chat")
	}
	switch {
	case cmdLine > 0 && urlLine > 0:
		d.add(max(cmdLine, urlLine), path, "has both command (line %d) and url (line %d); give one: command runs the server, url dials it", cmdLine, urlLine)
	case cmdLine == 0 && urlLine == 0:
		d.add(n.Line, path, "has neither command nor url; give command: [program, args...] to run the server, or url: ws://host:port/path to dial it")
	case urlLine > 0:
		if envLine > 0 {
			d.add(envLine, join(path, "env"), "only goes with command: it sets the environment of a server the host runs, and this one is dialed at url")
		}
		if inheritLine > 0 {
			d.add(inheritLine, join(path, "inheritEnv"), "only goes with command: it passes the host's environment to a server the host runs, and this one is dialed at url")
		}
	case cmdLine > 0 && tokenLine > 0:
		d.add(tokenLine, join(path, "tokenEnv"), "only goes with url: it names the variable holding the token the host sends when it dials; a server run by command gets its environment from env")
	}
	if paramLine > 0 {
		switch {
		case tokenLine == 0:
			d.add(paramLine, join(path, "tokenParam"), "only goes with tokenEnv: it names the URL parameter that carries the token tokenEnv's variable holds; add tokenEnv, or leave tokenParam out")
		case cmdLine > 0 || (s.URL != "" && !isWebSocketURL(s.URL)):
			d.add(paramLine, join(path, "tokenParam"), "only goes with a ws:// or wss:// url: it puts the token in the WebSocket URL's query; a Streamable HTTP (http:// or https://) server gets the token in the Authorization header")
		case s.TokenParam != "" && s.URL != "" && urlHasParam(s.URL, s.TokenParam):
			d.add(paramLine, join(path, "tokenParam"), "names %s, which the url already has; the host adds the token under that name, so take it out of the url or name another parameter", s.TokenParam)
		}
	}
	r := s.Reconnect
	switch {
	case r.Initial == 0 || r.Max == 0:
		// Already reported.
	case r.Max < r.Initial && maxLine > 0:
		d.add(maxLine, join(path, "reconnect.max"), "%s is less than initial (%s); max is the longest wait, so it must be at least initial", r.Max, r.Initial)
	case r.Max < r.Initial:
		d.add(initialLine, join(path, "reconnect.initial"), "%s is more than max (%s, the default); set max too", r.Initial, r.Max)
	}
	if d.machine && s.Argv != nil && urlLine == 0 {
		d.checkProgram(s, progLine, join(path, "command[0]"))
	}
	if p.preLine == 0 && p.idOK {
		s.ToolPrefix = s.ID
		if msg := prefixProblem(s.ID); msg != "" {
			d.add(p.idLine, join(path, "id"), "%q can't be the tool prefix, which defaults to the id: %s; set toolPrefix", s.ID, msg)
		} else {
			p.preOK, p.preLine = true, p.idLine
		}
	}
	return s, true
}

// positive parses a duration that must be more than 0; it returns 0 after
// a problem, which later checks take as already reported.
func (d *decoder) positive(n *yaml.Node, path string, line int) time.Duration {
	v, ok := d.duration(n, path, line)
	if !ok {
		return 0
	}
	if v == 0 {
		d.add(line, path, "must be more than 0")
		return 0
	}
	return v
}

// command decodes a server's command list.
func (d *decoder) command(n *yaml.Node, path string, line int) []string {
	argv, ok := d.list(n, path, line, "a list: the program and its arguments, like [go, run, ./server]", nil)
	switch {
	case !ok:
		return nil
	case len(argv) == 0:
		d.add(line, path, "is empty; give the program and its arguments, like [go, run, ./server]")
		return nil
	case argv[0] == "":
		d.add(deref(n).Content[0].Line, path+"[0]", "the program's name is empty")
		return nil
	}
	return argv
}

// env decodes NAME: value pairs. A value is never quoted in a message: it
// may be a secret.
func (d *decoder) env(n *yaml.Node, path string, line int) map[string]string {
	if deref(n).Kind != yaml.MappingNode {
		d.wrong(n, path, line, "a mapping of NAME: value")
		return nil
	}
	env := map[string]string{}
	for _, e := range d.entries(deref(n), path) {
		if !envNameRE.MatchString(e.name) {
			d.add(e.key.Line, path, "%q is not an environment variable name (letters, digits and _, not starting with a digit)", e.name)
			continue
		}
		d.alias(e.val, join(path, e.name))
		if v := deref(e.val); v.Kind != yaml.ScalarNode || isNull(v) {
			d.wrong(e.val, join(path, e.name), e.key.Line, `a string (write "" for an empty one)`)
			continue
		}
		env[e.name] = deref(e.val).Value
	}
	return env
}

// patterns decodes an {enable, disable} pair, keeping an absent list nil.
func (d *decoder) patterns(n *yaml.Node, path string, line int, what string, check func(string) string) (enable, disable []string) {
	d.fields(n, path, line, "a mapping like {enable: [...], disable: [...]}", policyKeys, func(e entry, path string) {
		v, _ := d.list(e.val, path, e.key.Line, "a list of "+what, check)
		if e.name == "enable" {
			enable = v
		} else {
			disable = v
		}
	})
	return enable, disable
}

// subscription decodes manual, auto, or a list of channel ids.
func (d *decoder) subscription(n *yaml.Node, path string, line int) Subscription {
	const want = "manual, auto, or a list of channel ids"
	v := deref(n)
	switch {
	case v.Kind == yaml.SequenceNode:
		ids, ok := d.list(n, path, line, "a list of channel ids", func(s string) string {
			if s == "" {
				return "is empty; give a channel id"
			}
			return ""
		})
		if ok {
			return Subscription{Mode: SubscriptionList, Channels: ids}
		}
	case v.Kind == yaml.ScalarNode && !isNull(v):
		switch m := SubscriptionMode(v.Value); m {
		case SubscriptionManual, SubscriptionAuto:
			return Subscription{Mode: m}
		}
		d.add(line, path, "%q is not a subscription; write %s", v.Value, want)
	default:
		d.wrong(n, path, line, want)
	}
	return Subscription{Mode: SubscriptionManual}
}

// crossServers checks what no one server can: unique ids, and prefixes
// that do not meet. Each pair is reported once, at the later server,
// naming the first earlier server it clashes with. Maps of what earlier
// servers hold answer each server in time linear in its id and prefix.
func (d *decoder) crossServers(servers []placed) {
	firstID := make(map[string]int, len(servers)) // id: the first server with it
	for i, s := range servers {
		if !s.idOK {
			continue
		}
		j, dup := firstID[s.ID]
		if !dup {
			firstID[s.ID] = i
			continue
		}
		o := servers[j]
		d.add(s.idLine, join(s.path, "id"), "%q is also the id of %s (line %d); ids must be unique", s.ID, o.path, o.idLine)
	}
	// An earlier server's prefix meets s's when it equals s's, when it is
	// a stem of s's, or when s's is a stem of it (see stems).
	var exact, stemOf prefixIndex
	for i, s := range servers {
		if !s.preOK || !s.idOK {
			continue
		}
		o := exact.first(servers, s.ID, s.ToolPrefix, -1)
		o = stemOf.first(servers, s.ID, s.ToolPrefix, o)
		for _, stem := range stems(s.ToolPrefix) {
			o = exact.first(servers, s.ID, stem, o)
		}
		if o >= 0 {
			// Any number of servers may name this other one: only so much
			// of its id is quoted each time.
			other := servers[o].ID
			if len(other) > maxQuotedID {
				other = other[:maxQuotedID] + "..."
			}
			err := &PrefixConflictError{ID: s.ID, Prefix: s.ToolPrefix, OtherID: other, OtherPrefix: servers[o].ToolPrefix}
			d.add(s.preLine, join(s.path, "toolPrefix"), "%v", err)
		}
		exact.add(servers, s.ToolPrefix, i)
		for _, stem := range stems(s.ToolPrefix) {
			stemOf.add(servers, stem, i)
		}
	}
}

// maxQuotedID is the most of another server's id a problem quotes.
const maxQuotedID = 256

// stems returns the prefixes that p meets while longer than them: each
// s with p == s+"-" or p starting with s+"--" (PrefixesMeet). A prefix
// that passes prefixProblem has none, so for the servers of a valid file
// this is always empty and two prefixes meet only when they are equal.
func stems(p string) []string {
	var out []string
	for k := range len(p) {
		if p[k:] == "-" || strings.HasPrefix(p[k:], "--") {
			out = append(out, p[:k])
		}
	}
	return out
}

// prefixIndex files servers, by index, under strings. Among the servers
// filed under one string, the first whose id is not a given one is either
// the first filed or, when that has the given id, the first filed with
// another id than it: those two are all it keeps.
type prefixIndex map[string]*filed

type filed struct {
	first, other int // other is -1 until a server with another id is filed
}

func (x *prefixIndex) add(servers []placed, key string, i int) {
	if *x == nil {
		*x = prefixIndex{}
	}
	switch f, ok := (*x)[key]; {
	case !ok:
		(*x)[key] = &filed{first: i, other: -1}
	case f.other < 0 && servers[f.first].ID != servers[i].ID:
		f.other = i
	}
}

// first returns the earlier of best (-1 for none) and the first server
// filed under key whose id is not id.
func (x prefixIndex) first(servers []placed, id, key string, best int) int {
	f, ok := x[key]
	if !ok {
		return best
	}
	o := f.first
	if servers[o].ID == id {
		o = f.other
	}
	if o >= 0 && (best < 0 || o < best) {
		return o
	}
	return best
}

func storeProblem(s string) string {
	switch {
	case s == "":
		return "is empty; give a file path, or leave the key out for " + DefaultStore
	case strings.HasPrefix(s, "~"):
		return fmt.Sprintf("%q starts with ~, which is not expanded; write the full path, or one relative to this file", s)
	}
	return ""
}

// bots decodes channels.bots.
func (d *decoder) bots(n *yaml.Node, path string, line int) Bots {
	var b Bots
	d.fields(n, path, line, "a mapping like {wake: true, maxReplies: 3}", botsKeys, func(e entry, path string) {
		switch e.name {
		case "wake":
			b.Wake, _ = d.boolean(e.val, path, e.key.Line)
		case "channels":
			if v, ok := d.list(e.val, path, e.key.Line, "a list of channel ids", nil); ok {
				b.Channels = v
			}
		case "maxReplies":
			v, ok := d.integer(e.val, path, e.key.Line)
			switch {
			case !ok:
			case v <= 0:
				d.add(e.key.Line, path, "must be a number of turns more than 0, not %d (leave it out for %d)", v, DefaultBotReplies)
			default:
				b.MaxReplies = v
			}
		}
	})
	return b
}

// byteBound parses a bound in bytes: a whole number more than 0 (0, when
// it is not one: the default).
func (d *decoder) byteBound(n *yaml.Node, path string, line, def int) int {
	v, ok := d.integer(n, path, line)
	if !ok {
		return 0
	}
	if v <= 0 {
		d.add(line, path, "must be a number of bytes more than 0, not %d (leave it out for %d)", v, def)
		return 0
	}
	return v
}
