package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/chanserver"
)

// Issue 23's descriptors without a bound: a server registering channels
// whose descriptors carry 8 MiB of metadata each.
const (
	bigDescriptors   = 40
	bigDescriptor    = 8388700 // bytes of JSON each: 8 MiB and change
	descMaxRSSKiB    = 200 << 10
	descriptorReason = "descriptor too large: it is 8388700 bytes; this host keeps at most 65536 bytes per channel descriptor"
)

// TestRunChannelDescriptorsBounded is issue 23's descriptors through the
// path a user takes: mcplhost run (a subprocess, so that its peak RSS is
// the program's) with a real channel server that registers 40 channels,
// each in a channels/register of its own (8 MiB is within the 16 MiB
// message bound; 40 of them in one request would not be, and would close
// the connection instead), each answered before the next is sent. Every one
// is refused in the itemized result with the reason, as the server reads
// it; the host's peak RSS stays bounded (it kept none of the 320 MiB); the
// connection stays up, and descriptors within the bound are registered
// after them. A second server's channels block sets its own bounds, which
// hold for it alone.
//
// The bound, 200 MiB, is wide: the host's baseline is about 30 MiB, and
// what one 8 MiB request costs while it is handled (the line read, the
// params, each descriptor's copy) a few times its size. Keeping the
// descriptors, as the host did before the bound, holds 320 MiB of them.
func TestRunChannelDescriptorsBounded(t *testing.T) {
	dir := t.TempDir()
	ctlPath, wikiPath := filepath.Join(dir, "control.json"), filepath.Join(dir, "wiki.json")
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(`store: ./host.db
servers:
  - id: chat
    command: `+chanserverCommand(t, ctlPath)+`
  - id: wiki
    command: `+chanserverCommand(t, wikiPath)+`
    channels: {maxDescriptorBytes: 1000, maxTotalDescriptorBytes: 1500}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	run := startRun(t, dir, cfg, "run")
	ctl := awaitControl(t, ctlPath, run)
	wiki := awaitControl(t, wikiPath, run)
	baseline := run.peakRSSKiB()

	registerBigAt := func(ctl control, count, size int, prefix string) chanserver.RegisterBigResult {
		t.Helper()
		out := ctl.call(t, 5*time.Minute, "register_big", fmt.Sprintf(`{"count":%d,"size":%d,"prefix":%q}`, count, size, prefix))
		var res chanserver.RegisterBigResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("register_big: %v in %.500s", err, out)
		}
		if res.Sent != count || len(res.Failed) != 0 || len(res.Results) != count {
			t.Fatalf("register_big %d of %d bytes: sent %d, %d results, failed %v; mcplhost logged:\n%s", count, size, res.Sent, len(res.Results), res.Failed, clip(run.stderr.String()))
		}
		return res
	}
	registerBig := func(count, size int, prefix string) chanserver.RegisterBigResult {
		t.Helper()
		return registerBigAt(ctl, count, size, prefix)
	}
	start := time.Now()
	res := registerBig(bigDescriptors, bigDescriptor, "big")
	t.Logf("%d registrations of %d bytes answered in %s", bigDescriptors, bigDescriptor, time.Since(start).Round(time.Millisecond))
	for i, r := range res.Results {
		if id := fmt.Sprintf("big-%d", i+1); r.ID != id || r.Accepted || r.Reason != descriptorReason {
			t.Errorf("result %d = %+v, want %s refused: %s", i+1, r, id, descriptorReason)
		}
	}
	peak := run.peakRSSKiB()

	// The connection is up, and a descriptor within the bound is taken.
	for i, r := range registerBig(3, 60000, "ok").Results {
		if !r.Accepted {
			t.Errorf("60000-byte descriptor %d after the refusals: %+v", i+1, r)
		}
	}

	// wiki's bounds are its own: 1000 bytes a descriptor, 1500 in all
	// (its startup channel a counts too).
	got := registerBigAt(wiki, 3, 1000, "w").Results
	if !got[0].Accepted {
		t.Errorf("wiki's first 1000-byte descriptor: %+v", got[0])
	}
	total := regexp.MustCompile(`^descriptors too large in total: this server's channel descriptors would total \d+ bytes; this host keeps at most 1500 bytes per server$`)
	for _, r := range got[1:] {
		if r.Accepted || !total.MatchString(r.Reason) {
			t.Errorf("wiki's next 1000-byte descriptor: %+v, want refused: %s", r, total)
		}
	}
	got = registerBigAt(wiki, 1, 1001, "v").Results
	if want := "descriptor too large: it is 1001 bytes; this host keeps at most 1000 bytes per channel descriptor"; got[0].Accepted || got[0].Reason != want {
		t.Errorf("wiki's 1001-byte descriptor: %+v, want refused: %s", got[0], want)
	}

	if code := run.stop(); code != 128+15 {
		t.Errorf("mcplhost run exited %d after SIGTERM, want 143; it logged:\n%s", code, clip(run.stderr.String()))
	}
	t.Logf("peak RSS %d KiB (%d KiB once connected)", peak, baseline)
	if peak > descMaxRSSKiB {
		t.Errorf("peak RSS %d KiB after %d descriptors of %d bytes, want at most %d KiB", peak, bigDescriptors, bigDescriptor, descMaxRSSKiB)
	}
}
