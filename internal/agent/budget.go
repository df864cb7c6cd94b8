package agent

import (
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/internal/treat"
	"github.com/mcpl-go/mcpl/store"
)

// The context budget: what one model call may hold, so that no message,
// backlog or history can make a request the model refuses, and no single
// message can make every later turn fail.
//
//   - The window is the model's context window in tokens: the agent's
//     contextWindow, or, when that is 0, DefaultWindow (200,000 for
//     Anthropic's models, 128,000 for every other provider and for the
//     scripted model). Tokens are estimated, not counted: a token per 4
//     bytes of text (of a tool's name, description and schema too), 4
//     more a block, 1,600 an image. The answer's room (the agent's
//     maxTokens, DefaultAnswer when 0) and a tenth of the window, for
//     what the estimate misses, are kept out.
//   - One message shows at most a sixteenth of the window (at least 1,024
//     tokens): a longer one is cut, its text to what fits, its images
//     past it left out, and a line says so, with its size. The cut is
//     what the conversation keeps, so the whole never comes back from
//     history. A tool's result is cut the same way, and an image past
//     MaxImageBytes is shown as a line saying so.
//   - What a wake-up brings gets at most half of what is left once the
//     system prompt and the tools are counted. Of more, the newest are
//     shown: the oldest messages that don't address the agent go first,
//     then the oldest that do; the newest message always stays. At most
//     MaxBatch are shown. What was left out is counted, by channel, and
//     the turn says so in one line before what it shows; those messages
//     are consumed, not shown later.
//   - The hooks' injections count too. The history gets what is left:
//     the newest messages that fit, cut where a user message starts that
//     answers no tool call; the request says how many earlier messages it
//     leaves out (that line is in the request only, not kept). A turn
//     that alone is past the room (many rounds of tool results) has its
//     oldest results left out of the request, each said so. A runner
//     holds at most 2 × MaxHistory messages of its conversation.

// Defaults of the budget.
const (
	DefaultWindow          = 128000
	DefaultWindowAnthropic = 200000
	// DefaultAnswer is the room kept for the answer when the agent's
	// maxTokens is 0.
	DefaultAnswer = 4096
	imageTokens   = 1600
	blockTokens   = 4
	bytesPerToken = 4
)

// window is r's model's context window in tokens.
func (r *runner) window() int {
	info := r.spec.Model.Info()
	switch {
	case info.ContextWindow > 0:
		return info.ContextWindow
	case info.Vendor == "anthropic":
		return DefaultWindowAnthropic
	}
	return DefaultWindow
}

// available is what r's requests may hold of messages, in tokens, once
// the answer's room, the margin, the system prompt and the tools are
// counted.
func (r *runner) available(system string, tools []model.Tool) int {
	w := r.window()
	answer := r.spec.MaxTokens
	if answer <= 0 {
		answer = DefaultAnswer
	}
	return max(w-answer-w/10-textTokens(system)-toolTokens(tools), 0)
}

// messageBound is what one message may show, in tokens.
func (r *runner) messageBound() int { return max(r.window()/16, 1024) }

func textTokens(s string) int { return (len(s) + bytesPerToken - 1) / bytesPerToken }

func toolTokens(tools []model.Tool) int {
	n := 0
	for _, t := range tools {
		n += blockTokens + textTokens(t.Name) + textTokens(t.Description) + textTokens(string(t.InputSchema))
	}
	return n
}

// blockTokens estimates what blocks cost.
func blocksTokens(blocks []model.Block) int {
	n := 0
	for _, b := range blocks {
		n += blockTokens
		switch b.Type {
		case model.Text:
			n += textTokens(b.Text)
		case model.Image:
			n += imageTokens
		case model.ToolUse:
			if b.ToolCall != nil {
				n += textTokens(b.ToolCall.Name) + textTokens(string(b.ToolCall.Args)) + textTokens(b.ToolCall.ID)
			}
		case model.ToolResult:
			if b.Result != nil {
				n += blocksTokens(b.Result.Content) + textTokens(b.Result.CallID)
			}
		}
	}
	return n
}

func messagesTokens(msgs []model.Message) int {
	n := 0
	for _, m := range msgs {
		n += blockTokens + blocksTokens(m.Content)
	}
	return n
}

// cut bounds blocks (a message's content, a tool's result) to bound
// tokens: text past it is cut, images past it are left out, and a last
// block says so. It returns blocks as they are when they fit.
func cut(blocks []model.Block, bound int) []model.Block {
	if blocksTokens(blocks) <= bound {
		return blocks
	}
	whole := 0
	for _, b := range blocks {
		whole += len(b.Text) + len(b.Data)
	}
	left := bound - blockTokens - textTokens(textCut(whole, whole, 0)) - blockTokens
	var out []model.Block
	shown, images := 0, 0
	for _, b := range blocks {
		cost := blocksTokens([]model.Block{b})
		switch {
		case cost <= left:
			out = append(out, b)
			left -= cost
			shown += len(b.Text) + len(b.Data)
		case b.Type == model.Text && left > blockTokens:
			keep := truncate(b.Text, (left-blockTokens)*bytesPerToken)
			out = append(out, model.Block{Type: model.Text, Text: keep})
			shown += len(keep)
			left = 0
		default:
			if b.Type == model.Image {
				images++
			}
			left = 0
		}
	}
	return append(out, model.Block{Type: model.Text, Text: textCut(whole, shown, images)})
}

// truncate cuts s to at most n bytes, at a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// size is a byte count for a person: "812 bytes", "64.0 KB", "10.0 MB".
func size(n int) string {
	switch {
	case n < 1000:
		return counted(n, "byte", "bytes")
	case n < 1000*1000:
		return fmt.Sprintf("%.1f KB", float64(n)/1000)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/(1000*1000))
}

// counted is "1 message", "1,234 messages".
func counted(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return thousands(n) + " " + many
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// selection is what a runner read in one pull: the items a turn shows of
// it (at most MaxBatch, the newest), what it left out, and how far it
// consumed each server's messages.
type selection struct {
	r     *runner
	items []item
	// left counts the messages shown but left out, by where they came
	// from.
	left     map[origin]int
	leftAt   []origin // left's keys, in the order first left out
	consumed map[string]int64
	// treated counts what was read, by server and treatment (wake.go).
	treated []Treated
	// retry is when the runner reads again for a message that waits (its
	// channel isn't registered yet); zero for none.
	retry time.Time
	// quiets are the debounces the messages read that wake the runner
	// run, shown or left out (wake.go's due), by stream.
	quiets map[string]*quiet
	// by is the newest replacement (its Seq) of an occurrence the read
	// took out unread; unsettled, that the read did not read it (it came
	// after the read's page, or is not routed yet): runner.settling.
	by        int64
	unsettled bool
	// base is where an agent's base moves to once this is recorded:
	// everything at or below it is consumed (0: it doesn't move).
	base int64
}

func newSelection(r *runner) *selection {
	return &selection{r: r, left: map[origin]int{}, consumed: map[string]int64{}, quiets: map[string]*quiet{}}
}

func (s *selection) empty() bool {
	return len(s.items) == 0 && len(s.consumed) == 0 && s.base <= s.r.base
}

// read takes one message r read: shown (an item) or consumed unseen.
func (s *selection) read(m store.Message, v verdict) {
	s.consumed[m.Server] = max(s.consumed[m.Server], m.Seq)
	if m.Channel != "" {
		s.r.heard(m.Server, m.Channel, m.Tags)
	}
	var co Coalesced
	if id := occurrence(m); id != "" {
		if co = s.r.rt.opts.Env.Coalesced(m.Server, id); co.Withdrawn {
			s.by = max(s.by, co.By)
			return // taken out unread (coalesced.go)
		}
	}
	it, ok := s.r.show(m, v)
	if !ok {
		return
	}
	d := s.r.treatment(m)
	if d.Treat == treat.Ignore {
		s.count(m.Server, treat.Ignore)
		return
	}
	it.seq, it.treat, it.at = m.Seq, d.Treat, m.At
	if co.Tracked {
		it.co = &coItem{m: m, v: v}
	}
	if s.r.wakes(it) {
		s.count(m.Server, treat.Wake)
		st := stream(m, co)
		s.woke(st, co.Since)
		s.woke(st, m.At)
	} else {
		s.count(m.Server, treat.Batch)
	}
	s.items = append(s.items, it)
	if len(s.items) > MaxBatch {
		s.drop()
	}
}

// drop leaves out one item: the oldest that doesn't address the agent, or
// else the oldest; never the newest.
func (s *selection) drop() {
	i := slices.IndexFunc(s.items[:len(s.items)-1], func(it item) bool { return !it.waking() })
	if i < 0 {
		i = 0
	}
	it := s.items[i]
	s.items = slices.Delete(s.items, i, i+1)
	k := it.from
	if s.left[k] == 0 {
		s.leftAt = append(s.leftAt, k)
	}
	s.left[k]++
}

// finish fits the items to what a wake-up may bring.
func (s *selection) finish() {
	if len(s.items) == 0 {
		return
	}
	share := s.r.available(s.r.spec.System, s.r.tools()) / 2
	for len(s.items) > 1 && s.tokens() > share {
		s.drop()
	}
}

func (s *selection) tokens() int {
	n := 0
	for _, it := range s.items {
		n += it.tokens
	}
	return n
}

// leftOut is the line that says what was left out ("" for nothing).
func (s *selection) leftOut() string {
	if len(s.left) == 0 {
		return ""
	}
	total := 0
	parts := make([]string, 0, len(s.leftAt))
	for _, k := range s.leftAt {
		total += s.left[k]
		parts = append(parts, textLeftOutPart(s.left[k], k.where, k.events))
	}
	return textLeftOut(total, parts)
}

// context is what the model is sent: the newest part of the history that
// fits what is left once the turn's own messages (and extra, the hooks'
// injections) are counted, then the turn's messages, merged where roles
// repeat. The history is cut where a user message starts that answers no
// tool call, so that no tool result is left without its call; the request
// says how much it left out. A turn that alone is past the room (rounds
// of tool results) has its oldest results left out of the request, each
// said so, its calls kept: t.msgs, what is recorded, keeps them whole.
func (r *runner) context(turn []model.Message, system string, tools []model.Tool, extra int) []model.Message {
	avail := r.available(system, tools) - extra
	turn = fitTurn(turn, avail)
	room := avail - messagesTokens(turn)
	h := r.history
	if len(h) > MaxHistory {
		h = h[len(h)-MaxHistory:]
	}
	start := len(h)
	used := 0
	for i := len(h) - 1; i >= 0; i-- {
		used += blockTokens + blocksTokens(h[i].Content)
		if used > room {
			break
		}
		start = i
	}
	for start < len(h) && (h[start].Role != model.User || startsWithResult(h[start])) {
		start++
	}
	kept := h[start:]
	var out []model.Message
	if left := r.dropped + len(r.history) - len(kept); left > 0 {
		out = append(out, model.Message{Role: model.User, Content: []model.Block{{Type: model.Text, Text: textHistoryLeftOut(left)}}})
	}
	for _, m := range kept {
		out = appendMessage(out, m)
	}
	for _, m := range turn {
		out = appendMessage(out, m)
	}
	return out
}

// fitTurn leaves the oldest tool results' content out of a turn past
// avail, until it fits or only the newest message's are left; turn itself
// is not changed.
func fitTurn(turn []model.Message, avail int) []model.Message {
	if messagesTokens(turn) <= avail {
		return turn
	}
	out := make([]model.Message, len(turn))
	copy(out, turn)
	over := messagesTokens(turn) - avail
	for i := 0; i < len(out)-1 && over > 0; i++ {
		if out[i].Role != model.User {
			continue
		}
		c := make([]model.Block, len(out[i].Content))
		copy(c, out[i].Content)
		for j, b := range c {
			if over <= 0 || b.Type != model.ToolResult || b.Result == nil {
				continue
			}
			was := blocksTokens([]model.Block{b})
			res := *b.Result
			res.Content = []model.Block{{Type: model.Text, Text: textResultLeftOut}}
			c[j] = model.Block{Type: model.ToolResult, Result: &res}
			over -= was - blocksTokens([]model.Block{c[j]})
		}
		out[i].Content = c
	}
	return out
}

func startsWithResult(m model.Message) bool {
	return len(m.Content) > 0 && m.Content[0].Type == model.ToolResult
}
