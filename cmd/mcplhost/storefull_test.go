package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/chanserver"
	"github.com/mcpl-go/mcpl/internal/lograte"
	"github.com/mcpl-go/mcpl/internal/model/fakeapi"
)

// TestRunStoreDiskFull is issue 23 item 4 through the path a user takes:
// mcplhost run --status, its store on a real 2 MiB tmpfs, the channel
// server sending channels/incoming. When the disk fills, the server's
// messages are refused (none accepted, told to send again), /healthz
// answers 503 saying the store is failing, and the log has a few lines,
// not one a refusal; when space comes back, with no restart, the server's
// resend is accepted, each message kept once, /healthz is 200 again, and
// the log says the store writes again.
//
// The tmpfs is mounted in a user and mount namespace (unshare -rm), where
// mcplhost runs; the test fills and frees it through /proc/PID/root. The
// test is skipped, saying why, where that is not allowed
// (store/sqlite's TestFullByMaxPagesRecovers and host's
// TestStoreFullRefusesThenRecovers cover recovery everywhere, by an
// injected SQLITE_FULL).
func TestRunStoreDiskFull(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare(1) here to mount a tmpfs in a user namespace: " + err.Error())
	}
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	probe := exec.Command("unshare", "-rm", "sh", "-c", `mount -t tmpfs -o size=2m tmpfs "$1"`, "sh", mnt)
	if out, err := probe.CombinedOutput(); err != nil {
		t.Skipf("can't mount a tmpfs in a user namespace here (unshare -rm, mount -t tmpfs: %v: %s)", err, strings.TrimSpace(string(out)))
	}

	api := fakeapi.NewOpenAI(t)
	ctlPath := filepath.Join(dir, "control.json")
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(`store: ./mnt/host.db
servers:
  - id: chat
    command: `+chanserverCommand(t, ctlPath, "-no-lifecycle")+`
agents:
  - name: ada
    model: {provider: openai, model: m, baseURL: `+api.URL+`, keyOptional: true}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr := &lineWatch{re: regexp.MustCompile(`status page at (http://127\.0\.0\.1:\d+/)\n`), found: make(chan string, 1)}
	p := &runProc{t: t, stderr: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command("unshare", "-rm", "sh", "-c", `mount -t tmpfs -o size=2m tmpfs "$1" && shift && exec "$@"`, "sh", mnt,
		hostBinary(t), "run", "--config", cfg, "--status", "127.0.0.1:0")
	p.cmd.Stdout, p.cmd.Stderr = io.Discard, stderr
	if err := p.launch(nil); err != nil {
		t.Fatalf("starting mcplhost run under unshare: %v", err)
	}
	var url string
	select {
	case url = <-stderr.found:
	case <-p.done:
		t.Fatalf("mcplhost run ended before serving its status:\n%s", clip(stderr.String()))
	case <-time.After(60 * time.Second):
		t.Fatalf("no status page line within 60 s:\n%s", clip(stderr.String()))
	}
	ctl := awaitControl(t, ctlPath, p)
	// The namespace's view of the tmpfs: unshare execs sh, which execs
	// mcplhost, so the pid is mcplhost's.
	inside := fmt.Sprintf("/proc/%d/root%s", p.cmd.Process.Pid, mnt)
	if _, err := os.Stat(filepath.Join(inside, "host.db")); err != nil {
		t.Fatalf("the store on the tmpfs, seen from outside: %v", err)
	}
	get := func(path string) (int, string) { return httpGet(t, url+path) }
	if code, body := get("healthz"); code != 200 || body != `{"status":"ok"}`+"\n" {
		t.Fatalf("/healthz before = %d %q", code, body)
	}
	ctl.burst(t, 60*time.Second, `{"channelId":"a","count":5,"inflight":5,"prefix":"pre"}`)

	// Fill the disk.
	filler := filepath.Join(inside, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the tmpfs: %v", err)
			}
			break
		}
	}
	f.Close()
	// The -wal file may have room left in it: send until a message is
	// refused (each burst of the same ids: what was accepted is kept
	// once).
	const count = 8
	burst := fmt.Sprintf(`{"channelId":"a","count":%d,"inflight":%d,"prefix":"full","size":16384}`, count, count)
	began := time.Now()
	var failed int
	for round := 0; failed == 0; round++ {
		if round == 30 {
			t.Fatalf("30 bursts of %d messages of 16 KiB on a full 2 MiB tmpfs were all accepted", count)
		}
		var res chanserver.BurstResult
		if err := json.Unmarshal([]byte(ctl.call(t, 60*time.Second, "incoming_burst", burst)), &res); err != nil {
			t.Fatal(err)
		}
		t.Logf("while full, burst %d: %d sent, %d accepted, %d failed", round, res.Sent, res.Accepted, res.FailedCount)
		failed += res.FailedCount
	}
	elapsed := time.Since(began)
	code, body := get("healthz")
	if code != 503 || !strings.Contains(body, `"store":"failing"`) || !strings.Contains(body, "database or disk is full") {
		t.Errorf("/healthz while full = %d %q", code, body)
	}
	_, js := get("api/store")
	if !strings.Contains(js, `"state":"failing"`) {
		t.Errorf("/api/store while full = %s", js)
	}
	logged := stderr.String()
	storeLines := strings.Count(logged, "the store refused a write")
	// A turn whose record failed says so, once a turn (no turn starts
	// while nothing is accepted): not counted with the refusals' lines.
	turnLines := strings.Count(logged, "an agent's turn could not be recorded")
	errorLines := strings.Count(logged, "level=ERROR") - turnLines
	windows := 1 + int(elapsed/lograte.Window)
	t.Logf("%d refusals over %v logged in %d ERROR lines, and %d for turns not recorded", failed, elapsed.Round(time.Millisecond), errorLines, turnLines)
	if storeLines < 1 || storeLines > windows || errorLines > 4*windows || turnLines > 3 {
		t.Errorf("%d refusals made %d ERROR lines, %d of them the store's:\n%s", failed, errorLines, storeLines, clip(logged))
	}
	if strings.Contains(logged, "reopen the store") {
		t.Errorf("the store says it is broken:\n%s", clip(logged))
	}

	// Space comes back: the server's resend is accepted, no restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	recoverAt := time.Now()
	ctl.burst(t, 60*time.Second, burst)
	t.Logf("the resend after space came back took %v", time.Since(recoverAt).Round(time.Millisecond))
	if code, body := get("healthz"); code != 200 || body != `{"status":"ok"}`+"\n" {
		t.Errorf("/healthz after space came back = %d %q", code, body)
	}
	if !strings.Contains(stderr.String(), "the store is writing again after ") {
		t.Errorf("no line saying the store writes again:\n%s", clip(stderr.String()))
	}
	// (That each message is in the inbox once is checked by host's
	// TestStoreFullRefusesThenRecovers: SQLite, opening a file through
	// /proc/PID/root, follows the link out of the namespace.)
	stopAt := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("mcplhost run did not stop within 60 s of SIGTERM:\n%s", clip(stderr.String()))
	}
	t.Logf("mcplhost run stopped %v after SIGTERM", time.Since(stopAt).Round(time.Millisecond))
	if code := p.cmd.ProcessState.ExitCode(); code != 128+15 {
		t.Errorf("mcplhost run exited %d after SIGTERM, want 143:\n%s", code, clip(stderr.String()))
	}
	ctl.awaitGone(t)
}
