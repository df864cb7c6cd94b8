package host_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestSharedRenderBaseline is vector 49's contract (RFC-006 §3.3: a
// rendered occurrence consumed in one context keeps its content in every
// recipient context, and a later delta can't strand it), which the corpus
// run lists as not exercised: this adapter has no suppressWake control.
// Here the recipient b is kept idle by its own treatment rules instead (it
// batches every event of the editor), and woken at the end by a control
// event: agent consumes BASELINE_ONE, then DELTA_TWO; b, unread all along,
// is shown BASELINE_ONE before DELTA_TWO. The steps are the vector's own,
// from the corpus file, but for those two controls.
func TestSharedRenderBaseline(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "event-coalescing-vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var corpus corpusFile
	if err := json.Unmarshal(raw, &corpus); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(corpus.Cases, func(c corpusCase) bool { return c.ID == "49" })
	if i < 0 {
		t.Fatal("the corpus has no vector 49")
	}
	v := corpus.Cases[i].Variants[0]
	var steps []corpusStep
	for _, st := range v.Steps {
		switch st.Op {
		case "suppressWake":
			continue // b's rules keep it idle
		case "observe":
			steps = append(steps, corpusStep{ID: "wake-b", Op: "assemble"})
		}
		steps = append(steps, st)
	}
	if len(steps) != len(v.Steps) {
		t.Fatalf("vector 49's steps changed (%d), this test rebuilds them expecting one suppressWake and one observe", len(v.Steps))
	}
	v.Steps = steps
	v.rules = map[string][]string{"b": {"{server: editor, treat: batch}"}}
	runScenario(t, v)
}
