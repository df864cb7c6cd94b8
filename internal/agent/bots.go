package agent

import (
	"slices"

	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/internal/treat"
)

// No bot-to-bot loops (docs/conversations.md). A message whose author is
// a bot or an agent (chat:from-bot, chat:from-agent) does not wake an
// agent, even when it addresses it, unless its server's channels.bots
// allows it there (BotRule). Where it does, at most Bound turns in a row
// in one channel are woken by bots alone; then bots don't wake the agent
// there until a person writes there (a message tagged neither as a bot's
// or agent's nor as the agent's own, chat:from-self). A message that
// doesn't wake the agent is still shown: it goes into the conversation
// between turns, with no model call, so the agent reads it with the next
// turn something else wakes. The count is the runner's, in memory: a
// restart starts it again at 0. A message its server tags as the agent's
// own (chat:from-self, its post echoed back) never wakes it: answering
// itself is the shortest loop of all.

// BotRule is whether bots' messages may wake an agent in a channel, and
// how many turns in a row they may there (0: DefaultBotBound).
type BotRule struct {
	Wake  bool
	Bound int
}

// DefaultBotBound is how many turns in a row bots may wake an agent in a
// channel where they may wake it at all.
const DefaultBotBound = 3

// maxBotRuns bounds the channels a runner counts bots' turns for.
const maxBotRuns = 4096

// Tags of a message's author (SPEC §16.2).
const (
	tagFromBot   = "chat:from-bot"
	tagFromAgent = "chat:from-agent"
	tagFromSelf  = "chat:from-self"
)

// fromBot reports whether tags say a bot or an agent wrote the message.
func fromBot(tags []string) bool {
	return slices.Contains(tags, tagFromBot) || slices.Contains(tags, tagFromAgent)
}

// fromPerson reports whether tags say a person wrote it: neither a bot or
// an agent, nor the agent itself. Untagged authorship counts as a person.
func fromPerson(tags []string) bool { return !fromBot(tags) && !slices.Contains(tags, tagFromSelf) }

// heard notes a message r read: a person's ends the run of bots' turns in
// its channel.
func (r *runner) heard(server, channel string, tags []string) {
	if fromPerson(tags) {
		delete(r.botRuns, forkKey{server, channel})
	}
}

// rule is the bot rule of an item's channel, its bound defaulted.
func (r *runner) rule(k forkKey) BotRule {
	rule := r.rt.opts.Env.Bots(k.server, k.channel)
	if rule.Bound <= 0 {
		rule.Bound = DefaultBotBound
	}
	return rule
}

// key is where an item came from: its channel, or its server's events.
func (it item) key() forkKey {
	if it.locus != nil {
		return *it.locus
	}
	return forkKey{server: it.wake.Server}
}

// wakes reports whether the item wakes r: one its treatment wakes it for
// (wake.go), and a bot's only where its rule allows and its channel's run
// of bots' turns is under the bound.
func (r *runner) wakes(it item) bool {
	if it.self || it.treat != treat.Wake {
		return false
	}
	if !it.bot {
		return true
	}
	rule := r.rule(it.key())
	return rule.Wake && r.botRuns[it.key()] < rule.Bound
}

// woken reports whether any of items wakes r.
func (r *runner) woken(items []item) bool {
	return slices.ContainsFunc(items, r.wakes)
}

// countBots counts a turn woken by bots alone in each of their channels,
// and returns the notices of the channels whose run reached its bound.
func (r *runner) countBots(items []item) []string {
	var keys []forkKey
	for _, it := range items {
		if !r.wakes(it) {
			continue
		}
		if !it.bot {
			return nil // a person's message woke it
		}
		if !slices.Contains(keys, it.key()) {
			keys = append(keys, it.key())
		}
	}
	var notices []string
	for _, k := range keys {
		if r.botRuns == nil {
			r.botRuns = map[forkKey]int{}
		}
		if _, ok := r.botRuns[k]; !ok && len(r.botRuns) >= maxBotRuns {
			for old := range r.botRuns {
				delete(r.botRuns, old)
				break
			}
		}
		r.botRuns[k]++
		if bound := r.rule(k).Bound; r.botRuns[k] == bound {
			where := content.Clean(k.server) + "'s events"
			if k.channel != "" {
				where = channelRef(r.channelOf(k.server, k.channel), k.channel)
			}
			notices = append(notices, textBotBound(where, bound))
		}
	}
	return notices
}
