package config

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The keys of the agent mappings.
var (
	agentKeys = []string{"name", "model", "system", "allowedTools", "maxTokens", "wake"}
	modelKeys = []string{"provider", "script", "echo", "model", "apiKeyEnv", "keyOptional", "baseURL", "contextWindow",
		"temperature", "topP", "streamIdleTimeout", "requestTimeout", "retry"}
	routeKeys = []string{"server", "featureSet", "agent"}

	providers         = []string{ProviderScripted, ProviderAnthropic, ProviderOpenAI}
	conversationModes = []string{string(ConversationsShared), string(ConversationsPerChannel)}
)

// modelKeyProviders names, for each of a model's keys other than
// provider, the providers it goes with.
var modelKeyProviders = map[string][]string{
	"script":        {ProviderScripted},
	"echo":          {ProviderScripted},
	"model":         {ProviderAnthropic, ProviderOpenAI},
	"apiKeyEnv":     {ProviderAnthropic, ProviderOpenAI},
	"baseURL":       {ProviderAnthropic, ProviderOpenAI},
	"contextWindow": {ProviderAnthropic, ProviderOpenAI},
	"keyOptional":   {ProviderOpenAI},
	// modelcalls.go
	"temperature":       {ProviderAnthropic, ProviderOpenAI},
	"topP":              {ProviderAnthropic, ProviderOpenAI},
	"streamIdleTimeout": {ProviderAnthropic, ProviderOpenAI},
	"requestTimeout":    {ProviderAnthropic, ProviderOpenAI},
	"retry":             {ProviderAnthropic, ProviderOpenAI},
}

// placedAgent is where a decoded agent's name is in the file, with what
// crossAgents and crossRoutes compare.
type placedAgent struct {
	name string // as given, valid or not; "" when absent
	path string
	line int  // the line of its name (0 when absent)
	ok   bool // the name is valid
}

// placedRoute is where a decoded inference route is in the file, with
// what crossRoutes checks.
type placedRoute struct {
	path                  string
	server, agent         string // as given; "" when absent or not a string
	serverLine, agentLine int
}

// agents decodes the agents list. agents: [] leaves it nil, as
// servers: [] does.
func (d *decoder) agents(n *yaml.Node, path string, line int, dir string) ([]Agent, []placedAgent) {
	if deref(n).Kind != yaml.SequenceNode {
		d.wrong(n, path, line, "a list of agents, each starting with - name:")
		return nil, nil
	}
	items := deref(n).Content
	if len(items) == 0 {
		return nil, nil
	}
	out := make([]Agent, 0, len(items))
	placed := make([]placedAgent, 0, len(items))
	for i, it := range items {
		p := placedAgent{path: fmt.Sprintf("%s[%d]", path, i)}
		d.alias(it, p.path)
		if a, ok := d.agent(it, &p, dir); ok {
			out = append(out, a)
		}
		placed = append(placed, p)
	}
	return out, placed
}

// agent decodes one agents[] item, without defaults (decodeFile applies
// them); ok is false when it is not a mapping.
func (d *decoder) agent(n *yaml.Node, p *placedAgent, dir string) (Agent, bool) {
	var a Agent
	modelLine := 0
	ok := d.fields(n, p.path, n.Line, "a mapping with name: and model:", agentKeys, func(e entry, path string) {
		line := e.key.Line
		switch e.name {
		case "name":
			p.line = line
			if v, ok := d.scalar(e.val, path, line, "a string"); ok {
				a.Name, p.name = v, v
				if msg := nameProblem(v); msg != "" {
					d.add(line, path, "%s", msg)
				} else {
					p.ok = true
				}
			}
		case "model":
			modelLine = line
			a.Model = d.model(e.val, path, line, dir)
		case "system":
			a.System, _ = d.scalar(e.val, path, line, `a string (write "" for none)`)
		case "allowedTools":
			a.AllowedTools = d.allowedTools(e.val, path, line)
		case "wake":
			a.Wake = d.wake(e.val, path, line)
		case "maxTokens":
			if v, ok := d.integer(e.val, path, line); ok {
				if v <= 0 {
					d.add(line, path, "must be more than 0, not %d (leave it out for %d)", v, DefaultMaxTokens)
				} else {
					a.MaxTokens = v
				}
			}
		}
	})
	if !ok {
		return a, false
	}
	if p.line == 0 {
		d.add(n.Line, p.path, "has no name; every agent needs one, like name: ada")
	}
	if modelLine == 0 {
		d.add(n.Line, p.path, "has no model; give one, like model: {provider: scripted, echo: true}")
	}
	return a, true
}

// model decodes an agent's model mapping: its provider, and the fields
// that go with that provider, at line.
func (d *decoder) model(n *yaml.Node, path string, line int, dir string) ModelConfig {
	var m ModelConfig
	type keyAt struct {
		name string
		line int
	}
	var given []keyAt // every key but provider, in file order
	var provLine, scriptLine, echoLine, modelLine int
	ok := d.fields(n, path, line, "a mapping like {provider: scripted, echo: true}", modelKeys, func(e entry, path string) {
		l := e.key.Line
		if e.name != "provider" {
			given = append(given, keyAt{e.name, l})
		}
		switch e.name {
		case "provider":
			provLine = l
			if v, ok := d.scalar(e.val, path, l, "scripted, anthropic or openai"); ok {
				if slices.Contains(providers, v) {
					m.Provider = v
				} else {
					d.add(l, path, "%q is not a provider; write scripted, anthropic or openai%s", v, didYouMean(v, providers))
				}
			}
		case "script":
			// Set even when the value is wrong, which is reported, so
			// that the file is not also told it has no script.
			scriptLine = l
			if v, ok := d.scalar(e.val, path, l, "a file path"); ok {
				if msg := scriptProblem(v); msg != "" {
					d.add(l, path, "%s", msg)
				} else if filepath.IsAbs(v) {
					m.Script = filepath.Clean(v)
				} else {
					m.Script = filepath.Join(dir, v)
				}
			}
		case "echo":
			v, ok := d.boolean(e.val, path, l)
			m.Echo = v
			if v || !ok {
				echoLine = l
			}
		case "model":
			modelLine = l
			if v, ok := d.scalar(e.val, path, l, "the model's name, like claude-sonnet-4-5"); ok {
				if strings.TrimSpace(v) == "" {
					d.add(l, path, "is empty; give the model's name, as the provider knows it")
				} else {
					m.Model = v
				}
			}
		case "apiKeyEnv":
			if v, ok := d.scalar(e.val, path, l, "the name of an environment variable"); ok {
				if !envNameRE.MatchString(v) {
					// Not quoted: a key pasted here by mistake stays out of logs.
					d.add(l, path, "is not an environment variable name (letters, digits and _, not starting with a digit); write the name of the variable that holds the API key, never the key itself")
				} else {
					m.APIKeyEnv = v
				}
			}
		case "keyOptional":
			m.KeyOptional, _ = d.boolean(e.val, path, l)
		case "baseURL":
			if v, ok := d.scalar(e.val, path, l, "a URL like https://api.example.com/v1"); ok {
				if msg := baseURLProblem(v); msg != "" {
					d.add(l, path, "%s", msg)
				} else {
					m.BaseURL = v
				}
			}
		case "contextWindow":
			if v, ok := d.integer(e.val, path, l); ok {
				if v < 0 {
					d.add(l, path, "must be 0 or more, not %d (0, the default, means unknown)", v)
				} else {
					m.ContextWindow = v
				}
			}
		default:
			d.modelCall(e, path, &m)
		}
	})
	switch {
	case !ok:
		return m
	case provLine == 0:
		d.add(line, path, "has no provider; give provider: scripted, anthropic or openai")
		return m
	case m.Provider == "":
		return m // its problem is reported
	}
	for _, k := range given {
		if want := modelKeyProviders[k.name]; !slices.Contains(want, m.Provider) {
			d.add(k.line, join(path, k.name), "only goes with provider %s, and this model's provider is %s", strings.Join(want, " or "), m.Provider)
		}
	}
	switch m.Provider {
	case ProviderScripted:
		switch {
		case scriptLine > 0 && echoLine > 0:
			d.add(max(scriptLine, echoLine), path, "has both script (line %d) and echo: true (line %d); give one: script plays a file's steps, echo: true repeats each addressed message", scriptLine, echoLine)
		case scriptLine == 0 && echoLine == 0:
			d.add(line, path, "has neither script nor echo: true; give script: ./steps.yaml to play a file's steps, or echo: true to repeat each addressed message")
		}
	case ProviderAnthropic:
		if modelLine == 0 {
			d.add(line, path, "has no model; give the model's name, like model: claude-sonnet-4-5")
		}
	case ProviderOpenAI:
		if modelLine == 0 {
			d.add(line, path, "has no model; give the model's name, like model: gpt-4.1 (or a local server's model name)")
		}
	}
	return m
}

// allowedTools decodes all, or a list of tool names and patterns.
func (d *decoder) allowedTools(n *yaml.Node, path string, line int) AllowedTools {
	const want = `all, or a list of tool names and patterns like [channel_open, "chat--*"]`
	v := deref(n)
	switch {
	case v.Kind == yaml.SequenceNode:
		if ps, ok := d.list(n, path, line, "a list of tool names", agentToolPatternProblem); ok {
			return AllowedTools{Patterns: ps}
		}
	case v.Kind == yaml.ScalarNode && !isNull(v):
		if v.Value == "all" {
			return AllowedTools{All: true}
		}
		d.add(line, path, "%q is not all or a list; write %s ([] allows none)", v.Value, want)
	default:
		d.wrong(n, path, line, want)
	}
	return AllowedTools{}
}

// conversations decodes shared or per-channel; "" after a problem.
func (d *decoder) conversations(n *yaml.Node, path string, line int) ConversationsMode {
	v, ok := d.scalar(n, path, line, "shared or per-channel")
	if !ok {
		return ""
	}
	if slices.Contains(conversationModes, v) {
		return ConversationsMode(v)
	}
	d.add(line, path, "%q is not a conversations mode; write shared or per-channel%s", v, didYouMean(v, conversationModes))
	return ""
}

// routes decodes the inference list, without defaults (decodeFile
// applies them). inference: [] leaves it nil.
func (d *decoder) routes(n *yaml.Node, path string, line int) ([]InferenceRoute, []placedRoute) {
	if deref(n).Kind != yaml.SequenceNode {
		d.wrong(n, path, line, `a list of routes, each like {server: "*", featureSet: memory.*, agent: ada}`)
		return nil, nil
	}
	items := deref(n).Content
	if len(items) == 0 {
		return nil, nil
	}
	out := make([]InferenceRoute, 0, len(items))
	placed := make([]placedRoute, 0, len(items))
	for i, it := range items {
		p := placedRoute{path: fmt.Sprintf("%s[%d]", path, i)}
		d.alias(it, p.path)
		var r InferenceRoute
		agentKey := false
		ok := d.fields(it, p.path, it.Line, `a mapping like {server: "*", featureSet: memory.*, agent: ada}`, routeKeys, func(e entry, path string) {
			l := e.key.Line
			switch e.name {
			case "server":
				if v, ok := d.scalar(e.val, path, l, "a server's id, or * for any"); ok {
					if v == "" {
						d.add(l, path, "is empty; give a server's id, or * for any server")
					} else {
						r.Server, p.server, p.serverLine = v, v, l
					}
				}
			case "featureSet":
				if v, ok := d.scalar(e.val, path, l, "a feature-set name, or * for any"); ok {
					if msg := featureSetPatternProblem(v); msg != "" {
						d.add(l, path, "%s", msg)
					} else {
						r.FeatureSet = v
					}
				}
			case "agent":
				agentKey = true
				if v, ok := d.scalar(e.val, path, l, "an agent's name"); ok {
					if v == "" {
						d.add(l, path, "is empty; give the name of the agent whose model serves these requests")
					} else {
						r.Agent, p.agent, p.agentLine = v, v, l
					}
				}
			}
		})
		if !ok {
			continue
		}
		if !agentKey {
			d.add(it.Line, p.path, "has no agent; every route names the agent whose model serves it, like agent: ada")
		}
		out = append(out, r)
		placed = append(placed, p)
	}
	return out, placed
}

// crossAgents checks that agents' names are unique, reporting each
// repeat at the later agent, naming the first with that name.
func (d *decoder) crossAgents(agents []placedAgent) {
	first := make(map[string]int, len(agents))
	for i, a := range agents {
		if !a.ok {
			continue
		}
		j, dup := first[a.name]
		if !dup {
			first[a.name] = i
			continue
		}
		o := agents[j]
		d.add(a.line, join(a.path, "name"), "%q is also the name of %s (line %d); names must be unique", a.name, o.path, o.line)
	}
}

// crossRoutes checks that each route names a server and an agent the
// file configures. A name given with a problem of its own counts as
// configured, so the problem is reported once.
func (d *decoder) crossRoutes(routes []placedRoute, servers []placed, agents []placedAgent) {
	if len(routes) == 0 {
		return
	}
	ids := make(map[string]bool, len(servers))
	var idList []string
	for _, s := range servers {
		if s.ID != "" && !ids[s.ID] {
			ids[s.ID] = true
			idList = append(idList, s.ID)
		}
	}
	names := make(map[string]bool, len(agents))
	var nameList []string
	for _, a := range agents {
		if a.name != "" && !names[a.name] {
			names[a.name] = true
			nameList = append(nameList, a.name)
		}
	}
	idHints, nameHints := hintable(idList), hintable(nameList)
	for _, r := range routes {
		if r.server != "" && r.server != "*" && !ids[r.server] {
			if len(ids) == 0 {
				d.add(r.serverLine, join(r.path, "server"), "%q is not the id of a server: the file configures none (write * for any server)", r.server)
			} else {
				d.add(r.serverLine, join(r.path, "server"), "%q is not the id of a server in servers:%s", r.server, didYouMean(r.server, idHints))
			}
		}
		if r.agent != "" && !names[r.agent] {
			if len(names) == 0 {
				d.add(r.agentLine, join(r.path, "agent"), "%q is not the name of an agent: the file configures none", r.agent)
			} else {
				d.add(r.agentLine, join(r.path, "agent"), "%q is not the name of an agent in agents:%s", r.agent, didYouMean(r.agent, nameHints))
			}
		}
	}
}

// hintable returns the names, of those given in file order, that a
// misspelt reference to one of them may be told about: none when there
// are too many to compare each reference with in little time, and none
// too long to be misspelt.
func hintable(names []string) []string {
	const most, longest = 16, 64
	if len(names) > most {
		return nil
	}
	var out []string
	for _, name := range names {
		if len(name) <= longest {
			out = append(out, name)
		}
	}
	return out
}

func scriptProblem(s string) string {
	switch {
	case s == "":
		return "is empty; give the path of the script file, relative to this file"
	case strings.HasPrefix(s, "~"):
		return fmt.Sprintf("%q starts with ~, which is not expanded; write the full path, or one relative to this file", s)
	}
	return ""
}
