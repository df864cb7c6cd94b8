package host

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcpl-go/mcpl/internal/agent"
	"github.com/mcpl-go/mcpl/internal/metrics"
	"github.com/mcpl-go/mcpl/internal/treat"
)

// An agent's activity counts its turns and tokens, says whether a turn is
// under way, keeps its last RecentEvents events oldest first, and dates
// its last event by the newest of them, also once the ring has wrapped.
func TestActivityFill(t *testing.T) {
	var a activity
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	n := 0
	rec := func(ev agent.Event) {
		n++
		ev.Agent, ev.At = "ada", at.Add(time.Duration(n)*time.Second)
		a.record(ev)
	}
	rec(agent.Event{Event: agent.EventTurnStart})
	rec(agent.Event{Event: agent.EventModel, Usage: &agent.UsageLine{In: 10, Out: 3}})
	rec(agent.Event{Event: agent.EventTurnEnd, Reason: "done"})
	rec(agent.Event{Event: agent.EventTurnStart})

	st := AgentState{Name: "ada"}
	a.fill(&st)
	if st.Turns != 1 || st.TokensIn != 10 || st.TokensOut != 3 || !st.InTurn {
		t.Errorf("state %+v, want 1 turn, 10 in, 3 out, in a turn", st)
	}
	if len(st.Recent) != 4 || !st.LastEvent.Equal(at.Add(4*time.Second)) {
		t.Errorf("%d recent events, last at %v; want 4, the last at +4s", len(st.Recent), st.LastEvent)
	}

	for range RecentEvents + 3 {
		rec(agent.Event{Event: agent.EventSpeech})
	}
	a.fill(&st)
	if len(st.Recent) != RecentEvents {
		t.Fatalf("%d recent events, want %d", len(st.Recent), RecentEvents)
	}
	for i := 1; i < len(st.Recent); i++ {
		if !st.Recent[i].At.After(st.Recent[i-1].At) {
			t.Fatalf("recent events out of order at %d: %v then %v", i, st.Recent[i-1].At, st.Recent[i].At)
		}
	}
	if want := at.Add(time.Duration(n) * time.Second); !st.LastEvent.Equal(want) || !st.Recent[len(st.Recent)-1].At.Equal(want) {
		t.Errorf("last event at %v, newest kept at %v; want both %v", st.LastEvent, st.Recent[len(st.Recent)-1].At, want)
	}

	other := AgentState{Name: "bob"}
	a.fill(&other)
	if other.Turns != 0 || other.Recent != nil || !other.LastEvent.IsZero() {
		t.Errorf("an agent with no events: %+v", other)
	}
}

// What an agent's reads treated how is counted by agent, server and
// treatment, from its transcript's treated events.
func TestActivityTreated(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, func() metrics.Snapshot { return metrics.Snapshot{} })
	if err != nil {
		t.Fatal(err)
	}
	a := activity{metrics: m}
	a.record(agent.Event{Agent: "ada", Event: agent.EventTreated, Treated: []agent.Treated{{Server: "chat", Treat: treat.Batch, N: 40}, {Server: "chat", Treat: treat.Wake, N: 1}}})
	a.record(agent.Event{Agent: "ada", Event: agent.EventTreated, Treated: []agent.Treated{{Server: "ads", Treat: treat.Ignore, N: 2}, {Server: "chat", Treat: treat.Batch, N: 2}}})
	want := `
# HELP mcpl_agent_messages_total Messages and events an agent read, by agent, server and treatment (wake: woke it; batch: joined a turn without waking it; ignore: consumed unseen).
# TYPE mcpl_agent_messages_total counter
mcpl_agent_messages_total{agent="ada",server="ads",treatment="ignore"} 2
mcpl_agent_messages_total{agent="ada",server="chat",treatment="batch"} 42
mcpl_agent_messages_total{agent="ada",server="chat",treatment="wake"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mcpl_agent_messages_total"); err != nil {
		t.Error(err)
	}
}

// Model calls are counted from the transcript's model, model_retry and
// model_failed events: each attempt by outcome, the retries, and the
// tokens by provider and direction, the cache's included.
func TestActivityModelCalls(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, func() metrics.Snapshot { return metrics.Snapshot{} })
	if err != nil {
		t.Fatal(err)
	}
	a := activity{metrics: m}
	a.record(agent.Event{Agent: "ada", Event: agent.EventModelRetry, Provider: "anthropic", Attempt: &agent.Attempt{N: 1, Ms: 200, WaitMs: 1000}})
	a.record(agent.Event{Agent: "ada", Event: agent.EventModel, Provider: "anthropic", Attempt: &agent.Attempt{N: 2, Ms: 1500},
		Usage: &agent.UsageLine{In: 10, Out: 3, CacheRead: 900, CacheWrite: 50}})
	a.record(agent.Event{Agent: "ada", Event: agent.EventModelFailed, Provider: "anthropic", Attempt: &agent.Attempt{N: 1, Ms: 60000}, Reason: "not-retryable"})
	want := `
# HELP mcpl_model_calls_total Model call attempts, by agent, provider and outcome (ok, or error: the attempt failed, whether it was made again or not).
# TYPE mcpl_model_calls_total counter
mcpl_model_calls_total{agent="ada",outcome="error",provider="anthropic"} 2
mcpl_model_calls_total{agent="ada",outcome="ok",provider="anthropic"} 1
# HELP mcpl_model_retries_total Model call attempts that failed and were made again, by agent and provider.
# TYPE mcpl_model_retries_total counter
mcpl_model_retries_total{agent="ada",provider="anthropic"} 1
# HELP mcpl_model_tokens_total Model tokens, by agent, provider and direction (in: read by the model; out: written; cache_read and cache_write: input tokens read from and written to the provider's prompt cache, where it says).
# TYPE mcpl_model_tokens_total counter
mcpl_model_tokens_total{agent="ada",direction="cache_read",provider="anthropic"} 900
mcpl_model_tokens_total{agent="ada",direction="cache_write",provider="anthropic"} 50
mcpl_model_tokens_total{agent="ada",direction="in",provider="anthropic"} 10
mcpl_model_tokens_total{agent="ada",direction="out",provider="anthropic"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mcpl_model_calls_total", "mcpl_model_retries_total", "mcpl_model_tokens_total"); err != nil {
		t.Error(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var observed uint64
	for _, f := range fams {
		if f.GetName() == "mcpl_model_call_duration_seconds" {
			for _, mm := range f.GetMetric() {
				observed += mm.GetHistogram().GetSampleCount()
			}
		}
	}
	if observed != 3 {
		t.Errorf("%d attempts timed, want 3", observed)
	}
	st := AgentState{Name: "ada"}
	a.fill(&st)
	if len(st.Recent) != 3 || st.Recent[2].Event != agent.EventModelFailed || st.Recent[2].Reason != "not-retryable" {
		t.Errorf("recent events %+v, want the failure last, with its reason, for the status page", st.Recent)
	}
}
