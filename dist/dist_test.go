// Package dist holds what ships mcplhost (the Dockerfile at the
// repository's root, build.sh here) and the tests that check them. It has
// no code of its own.
package dist

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// root is the repository's root.
const root = ".."

// targets are the release's GOOS/GOARCH pairs (build.sh).
var targets = [][2]string{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}

// Every release target builds without cgo: each package mcplhost imports
// has Go files for it with CGO_ENABLED=0 (the SQLite driver is pure Go).
// go list resolves it without compiling, so this costs seconds, where
// building the four (TestBuildScript) costs minutes.
func TestTargetsStatic(t *testing.T) {
	for _, tg := range targets {
		cmd := exec.Command("go", "list", "-deps", "./cmd/mcplhost")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+tg[0], "GOARCH="+tg[1])
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s/%s without cgo: %v\n%s", tg[0], tg[1], err, out)
			continue
		}
		if !strings.Contains(string(out), "modernc.org/sqlite\n") {
			t.Errorf("%s/%s: mcplhost does not import modernc.org/sqlite, the pure-Go driver this build relies on", tg[0], tg[1])
		}
	}
}

// The native target as build.sh builds it: a static binary whose build
// information names the module and the flags.
func TestNativeBuild(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "mcplhost")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/mcplhost")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	checkBinary(t, bin, runtime.GOOS, runtime.GOARCH)
}

// checkBinary checks bin's build information (go version -m).
func checkBinary(t *testing.T, bin, goos, goarch string) {
	t.Helper()
	out, err := exec.Command("go", "version", "-m", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m %s: %v\n%s", bin, err, out)
	}
	for _, want := range []string{
		"\tpath\tgithub.com/mcpl-go/mcpl/cmd/mcplhost\n",
		"\tmod\tgithub.com/mcpl-go/mcpl\t",
		"\tbuild\t-trimpath=true\n",
		"\tbuild\tCGO_ENABLED=0\n",
		"\tbuild\tGOOS=" + goos + "\n",
		"\tbuild\tGOARCH=" + goarch + "\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("%s: go version -m lacks %q:\n%s", bin, want, out)
		}
	}
}

// build.sh, run: four archives, each with its binary, LICENSE and
// README.md, and their checksums. Building four targets from a cold build
// cache took about 10 minutes on CI's two cores, too much for every run of
// the suite: it runs when MCPL_DIST_BUILD=1 (a release's dry run).
func TestBuildScript(t *testing.T) {
	if os.Getenv("MCPL_DIST_BUILD") != "1" {
		t.Skip("skipped: set MCPL_DIST_BUILD=1 to run dist/build.sh, which cross-compiles four targets (minutes from a cold cache)")
	}
	out := t.TempDir()
	cmd := exec.Command("./build.sh", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build.sh: %v\n%s", err, b)
	}
	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range targets {
		matches, _ := filepath.Glob(filepath.Join(out, fmt.Sprintf("mcplhost_*_%s_%s", tg[0], tg[1])))
		if len(matches) != 1 {
			t.Errorf("%s/%s: %d folders, want 1: %v", tg[0], tg[1], len(matches), matches)
			continue
		}
		dir := matches[0]
		for _, f := range []string{"mcplhost", "LICENSE", "README.md"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Errorf("%s: %v", dir, err)
			}
		}
		if !strings.Contains(string(sums), filepath.Base(dir)+".tar.gz\n") {
			t.Errorf("SHA256SUMS lacks %s.tar.gz:\n%s", filepath.Base(dir), sums)
		}
		checkBinary(t, filepath.Join(dir, "mcplhost"), tg[0], tg[1])
	}
}

// The Dockerfile, built and run where Docker is: the image runs as a user
// other than root, the host starts on a configuration mounted at /config
// with its store in /data, and Docker's health check (wget on /healthz)
// reports it healthy. Where there is no Docker (no docker program, or no
// daemon it can reach) it skips, saying which.
func TestDockerImage(t *testing.T) {
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("skipped: no docker program on PATH")
	}
	if out, err := exec.Command(docker, "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Skipf("skipped: docker can't reach a daemon: %s", strings.TrimSpace(string(out)))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	dockerDo := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, docker, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	tag := fmt.Sprintf("mcplhost-test:%d", time.Now().UnixNano())
	dockerDo("build", "-t", tag, root)
	t.Cleanup(func() { exec.Command(docker, "rmi", "-f", tag).Run() })

	if uid := dockerDo("run", "--rm", "--entrypoint", "id", tag, "-u"); uid == "0" {
		t.Errorf("the image runs as root")
	}
	conf := t.TempDir()
	if err := os.WriteFile(filepath.Join(conf, "config.yaml"), []byte("store: /data/host.db\nservers: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	name := strings.NewReplacer(":", "-").Replace(tag)
	dockerDo("run", "-d", "--name", name, "-v", conf+":/config:ro", "--health-interval", "1s", tag)
	t.Cleanup(func() { exec.Command(docker, "rm", "-f", name).Run() })
	deadline := time.Now().Add(60 * time.Second)
	for {
		status := dockerDo("inspect", "--format", "{{.State.Health.Status}}", name)
		if status == "healthy" {
			break
		}
		if status == "unhealthy" || time.Now().After(deadline) {
			logs, _ := exec.Command(docker, "logs", name).CombinedOutput()
			t.Fatalf("the container is %s, want healthy; its log:\n%s", status, logs)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if out := dockerDo("exec", name, "ls", "/data"); !strings.Contains(out, "host.db") {
		t.Errorf("the store is not in /data: %q", out)
	}
}
