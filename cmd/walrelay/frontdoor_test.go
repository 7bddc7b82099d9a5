package main

import (
	"bufio"
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestFrontDoor holds walrelay's public surface (docs/DESIGN.md, "The
// front door"): the daemon's module has no importable package outside
// internal/ and cmd/ but sql (the schema files, embedded) and the example
// commands; the application libraries are modules of their own whose
// go.mod requires pgx (and franz-go for inbox), nothing of the daemon's
// dependencies, on a go line lower than the daemon's.
func TestFrontDoor(t *testing.T) {
	const root = "../.."
	for dir := range modulePackages(t, root) {
		if strings.HasPrefix(dir, "internal/") || strings.HasPrefix(dir, "cmd/") || dir == "sql" {
			continue
		}
		bp, err := build.ImportDir(filepath.Join(root, dir), 0)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(dir, "examples/") && bp.Name == "main" {
			continue // a command: nothing to import
		}
		t.Errorf("package %s (package %s) is public API of the daemon's module: move it under internal/ (only the app modules outbox and inbox are for applications)", dir, bp.Name)
	}

	daemonGo := goLine(t, filepath.Join(root, "go.mod"))
	for mod, direct := range map[string][]string{
		"outbox": {"github.com/jackc/pgx/v5"},
		"inbox":  {"github.com/jackc/pgx/v5", "github.com/twmb/franz-go"},
	} {
		gomod := filepath.Join(root, mod, "go.mod")
		reqs, indirect := requires(t, gomod)
		if !slices.Equal(reqs, direct) {
			t.Errorf("%s requires %v directly; want exactly %v", gomod, reqs, direct)
		}
		for _, r := range append(reqs, indirect...) {
			for _, banned := range []string{"spf13/cobra", "testcontainers", "docker", "moby", "prometheus", "yaml", "github.com/walrelay/walrelay"} {
				if strings.Contains(r, banned) {
					t.Errorf("%s requires %s: an application importing %s would inherit it", gomod, r, mod)
				}
			}
		}
		if g := goLine(t, gomod); !(versionLess(g, daemonGo)) {
			t.Errorf("%s says go %s, not lower than the daemon's %s: applications on older Go could not use it", gomod, g, daemonGo)
		}
	}
}

// requires returns the direct and the indirect requirements of a go.mod,
// sorted.
func requires(t *testing.T, path string) (direct, indirect []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "require (":
			block = true
			continue
		case block && line == ")":
			block = false
			continue
		case strings.HasPrefix(line, "require "):
			line = strings.TrimPrefix(line, "require ")
		case !block:
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 || strings.HasPrefix(fields[0], "//") {
			continue
		}
		if strings.Contains(line, "// indirect") {
			indirect = append(indirect, fields[0])
		} else {
			direct = append(direct, fields[0])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(direct)
	slices.Sort(indirect)
	return direct, indirect
}

// goLine returns the version of a go.mod's go directive.
func goLine(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("%s has no go directive", path)
	return ""
}

// versionLess compares Go versions of the form 1.N[.P].
func versionLess(a, b string) bool {
	num := func(v string) []int {
		var out []int
		for _, p := range strings.Split(v, ".") {
			n := 0
			for _, c := range p {
				if c < '0' || c > '9' {
					break
				}
				n = n*10 + int(c-'0')
			}
			out = append(out, n)
		}
		for len(out) < 3 {
			out = append(out, 0)
		}
		return out
	}
	return slices.Compare(num(a), num(b)) < 0
}
