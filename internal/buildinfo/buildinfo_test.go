package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}, {Key: "GOOS", Value: "linux"},
	}}
	in := FromBuildInfo(bi)
	if want := (Info{Version: "v1.2.3", Revision: "0123456789abcdef0123", Time: "2026-12-01T10:00:00Z", Modified: true, GoVersion: "go1.26.8"}); in != want {
		t.Errorf("FromBuildInfo = %+v, want %+v", in, want)
	}
	if got, want := in.String(), "v1.2.3 (0123456789ab, 2026-12-01T10:00:00Z, modified) go1.26.8"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if got, want := (Info{Version: "(devel)", GoVersion: "go1.26.8"}).String(), "(devel) go1.26.8"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if got := Get(); got.GoVersion == "" {
		t.Errorf("Get in a test binary: %+v, want at least the Go version", got)
	}
}
