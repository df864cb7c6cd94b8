package status

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/host"
)

// A time the host does not have is left out of the JSON; one it has is
// written in UTC.
func TestShapesTimes(t *testing.T) {
	at := time.Date(2026, 12, 1, 4, 34, 12, 0, time.FixedZone("x", 3600))
	for _, tc := range []struct {
		v    any
		want string // "" for left out
		key  string
	}{
		{channels([]host.ChannelState{{Server: "s", ID: "c"}}), "", "decidedAt"},
		{channels([]host.ChannelState{{Server: "s", ID: "c", DecidedAt: at}}), `"decidedAt":"2026-12-01T03:34:12Z"`, "decidedAt"},
		{agents([]host.AgentState{{Name: "ada"}}, 10, time.Now()), "", "lastEvent"},
		{agents([]host.AgentState{{Name: "ada", LastEvent: at}}, 10, time.Now()), `"lastEvent":"2026-12-01T03:34:12Z"`, "lastEvent"},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		switch got := string(b); {
		case tc.want == "" && strings.Contains(got, tc.key):
			t.Errorf("%s: %s is there with no time", got, tc.key)
		case tc.want != "" && !strings.Contains(got, tc.want):
			t.Errorf("%s, want %s", got, tc.want)
		}
	}
}
