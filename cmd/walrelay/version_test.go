package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// walrelay --version prints what walrelay version prints, and exits 0.
func TestVersionFlag(t *testing.T) {
	want := wantOK(t, childEnv(), "version")
	if !strings.HasPrefix(want, "walrelay ") {
		t.Fatalf("walrelay version printed %q", want)
	}
	for _, flag := range []string{"--version", "-v"} {
		if got := wantOK(t, childEnv(), flag); got != want {
			t.Errorf("walrelay %s printed %q, walrelay version %q", flag, got, want)
		}
	}
}

// `make build` and a plain `go build` of the same commit report the same
// module version and commit, read from the build info: a copy of the
// source committed to a fresh git repository is built both ways (make
// build with GOFLAGS=-buildvcs=false as well, which it overrides).
func TestVersionFromBuildInfo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds walrelay twice")
	}
	for _, tool := range []string{"git", "make", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed: %v", tool, err)
		}
	}
	root := repoRootDir(t)
	src := t.TempDir()
	files, err := exec.Command("git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard", "-z").Output()
	if err != nil {
		t.Fatal(err)
	}
	for name := range strings.SplitSeq(strings.TrimRight(string(files), "\x00"), "\x00") {
		data, err := os.ReadFile(filepath.Join(root, name))
		if os.IsNotExist(err) {
			continue // deleted in the work tree
		} else if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitEnv := append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	sh := func(env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), name, args...)
		cmd.Dir, cmd.Env = src, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	sh(gitEnv, "git", "init", "-q")
	sh(gitEnv, "git", "add", "-A")
	sh(gitEnv, "git", "commit", "-q", "-m", "snapshot")
	commit := sh(gitEnv, "git", "rev-parse", "HEAD")[:12]

	// The default Go environment: no GOFLAGS, from the environment or
	// from go env -w's file (GOENV=off); no toolchain download.
	var plain []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOFLAGS=") && !strings.HasPrefix(kv, "GOENV=") && !strings.HasPrefix(kv, "GOTOOLCHAIN=") {
			plain = append(plain, kv)
		}
	}
	plain = append(plain, "GOENV=off", "GOTOOLCHAIN=local")
	gobuild := filepath.Join(t.TempDir(), "walrelay") // outside the tree, which stays clean
	sh(append(plain, "CGO_ENABLED=0"), "go", "build", "-o", gobuild, "./cmd/walrelay")
	sh(append(plain, "GOFLAGS=-buildvcs=false"), "make", "--no-print-directory", "build")
	goBuild := sh(plain, gobuild, "version")
	makeBuild := sh(plain, "./bin/walrelay", "version")
	if goBuild != makeBuild {
		t.Errorf("go build reports %q, make build %q", goBuild, makeBuild)
	}
	want := regexp.MustCompile(`^walrelay v0\.0\.0-\d{14}-` + commit + ` \(commit ` + commit + `, \d{4}-\d\d-\d\dT[0-9:]+Z, go[0-9.]+\)$`)
	for name, got := range map[string]string{"go build": goBuild, "make build": makeBuild} {
		if !want.MatchString(got) {
			t.Errorf("%s: walrelay version printed %q, want the pseudo-version and commit of %s", name, got, commit)
		}
	}
}

// repoRootDir is the repository's top directory.
func repoRootDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", dir, err)
	}
	return dir
}
