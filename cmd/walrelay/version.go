package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// buildInfo describes the running binary, from the build info Go records:
// the module version (a tag, or a pseudo-version such as
// v0.0.0-20261128043227-64713ab8f079 that names the commit, +dirty when
// the tree had changes) and the VCS commit. `go build`, `go install` and
// `make build` report the same for the same source.
type buildInfo struct {
	Version  string // module version, or "devel" when Go recorded none
	Commit   string // the VCS commit's first 12 hex digits, or ""
	Time     string // the commit's time, RFC 3339, or ""
	Modified bool   // the tree had uncommitted changes
	Go       string // the Go release that built it
}

// readBuild reads the running binary's build info. The version stamped
// with -ldflags "-X main.version=v1.2.3" (the Dockerfile's, whose build
// context has no .git for Go to read) wins over the module version.
func readBuild() buildInfo {
	b := buildInfo{Version: "devel"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if version != "" {
			b.Version = version
		}
		return b
	}
	b.Go = bi.GoVersion
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		b.Version = v
	}
	if version != "" {
		b.Version = version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value[:min(len(s.Value), 12)]
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// String is what walrelay version and walrelay --version print:
// "walrelay v0.0.0-20261128043227-64713ab8f079 (commit 64713ab8f079,
// 2026-11-28T04:32:27Z, go1.26.8)".
func (b buildInfo) String() string {
	s := "walrelay " + b.Version + " ("
	switch {
	case b.Commit == "":
		s += "commit unknown: built without VCS information"
	default:
		s += "commit " + b.Commit
		if b.Modified {
			s += " with uncommitted changes"
		}
		if b.Time != "" {
			s += ", " + b.Time
		}
	}
	if b.Go != "" {
		s += ", " + b.Go
	}
	return s + ")"
}

func versionCommand(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and commit (also walrelay --version)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(stdout, readBuild())
			return err
		},
	}
}
