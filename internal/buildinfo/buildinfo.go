// Package buildinfo says which build of the host is running: the module's
// version, the VCS revision and time it was built from, and the Go
// version, as runtime/debug.ReadBuildInfo has them. A binary built with
// go build in a checkout has the version "(devel)" and the revision and
// time of the checkout (with "modified" when the tree had changes); one
// installed with go install module@version has that version and no VCS
// settings. Every field the build doesn't know is "".
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Info is one build's identity.
type Info struct {
	// Version is the main module's version ("v1.2.3", "(devel)").
	Version string `json:"version"`
	// Revision and Time are the VCS revision and commit time (RFC 3339)
	// the binary was built from; Modified, that the tree had changes.
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	// GoVersion is the toolchain that built it ("go1.26.8").
	GoVersion string `json:"goVersion"`
}

// Get reads the running binary's build information.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{}
	}
	return FromBuildInfo(bi)
}

// FromBuildInfo reads bi.
func FromBuildInfo(bi *debug.BuildInfo) Info {
	in := Info{Version: bi.Main.Version, GoVersion: bi.GoVersion}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String is the build on one line: "v1.2.3 (abc1234def56, 2026-12-01T10:00:00Z, modified) go1.26.8".
func (in Info) String() string {
	var b strings.Builder
	b.WriteString(cmpOr(in.Version, "unknown version"))
	var vcs []string
	if in.Revision != "" {
		vcs = append(vcs, in.Revision[:min(12, len(in.Revision))])
	}
	if in.Time != "" {
		vcs = append(vcs, in.Time)
	}
	if in.Modified {
		vcs = append(vcs, "modified")
	}
	if len(vcs) > 0 {
		b.WriteString(" (" + strings.Join(vcs, ", ") + ")")
	}
	if in.GoVersion != "" {
		b.WriteString(" " + in.GoVersion)
	}
	return b.String()
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
