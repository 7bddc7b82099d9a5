package compose_test

import (
	"bufio"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd, args string
	line      int
}

// stage is one FROM and the instructions after it.
type stage struct {
	base, name string
	ins        []instruction
}

// parseDockerfile splits the Dockerfile into stages.
func parseDockerfile(t *testing.T) []stage {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		stages []stage
		cur    strings.Builder
		start  int
	)
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if strings.HasPrefix(line, "#") {
			continue // a comment inside a continued instruction
		}
		if s, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		cur.Reset()
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start}
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			st := stage{base: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			if in.cmd != "ARG" {
				t.Fatalf("Dockerfile:%d: %s before the first FROM", in.line, in.cmd)
			}
			continue
		}
		stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return stages
}

// dockerfileArgs lists the ARGs declared anywhere in the Dockerfile.
func dockerfileArgs(t *testing.T) map[string]bool {
	t.Helper()
	args := map[string]bool{}
	for _, st := range parseDockerfile(t) {
		for _, in := range st.ins {
			if in.cmd == "ARG" {
				name, _, _ := strings.Cut(in.args, "=")
				args[name] = true
			}
		}
	}
	return args
}

// buildRun returns the build stage's RUN instruction that builds
// ./cmd/walrelay, and the ARGs declared before it in that stage.
func buildRun(t *testing.T, st stage) (instruction, map[string]bool) {
	t.Helper()
	declared := map[string]bool{}
	for _, in := range st.ins {
		switch in.cmd {
		case "ARG":
			name, _, _ := strings.Cut(in.args, "=")
			declared[name] = true
		case "RUN":
			if strings.Contains(in.args, "go build") && strings.Contains(in.args, "./cmd/walrelay") {
				return in, declared
			}
		}
	}
	t.Fatalf("the build stage (FROM %s) has no RUN that builds ./cmd/walrelay", st.base)
	return instruction{}, nil
}

// The Dockerfile is multi-stage: a Go stage that builds a static, stripped
// binary stamped with the VERSION build arg, and a final stage that copies
// only the binary, runs it as a non-root user and starts `walrelay run`.
func TestDockerfile(t *testing.T) {
	stages := parseDockerfile(t)
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stage(s), want a build stage and a final stage", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]
	if build.name == "" {
		t.Fatalf("the build stage (FROM %s) has no name (FROM ... AS build)", build.base)
	}

	// The build image's Go satisfies go.mod's go line.
	m := regexp.MustCompile(`^golang:(\d+\.\d+)(\.\d+)?(-[a-z0-9.]+)?$`).FindStringSubmatch(build.base)
	if m == nil {
		t.Errorf("build stage FROM %s: want a pinned golang:<major.minor> image", build.base)
	} else {
		goLine := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(readFile(t, filepath.Join(repoRoot, "go.mod")))
		if goLine == nil || goLine[1] != m[1] {
			t.Errorf("build stage FROM %s, but go.mod says go %v", build.base, goLine)
		}
	}

	run, declared := buildRun(t, build)
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-X main.version=${VERSION}", "-o "} {
		if !strings.Contains(run.args, want) {
			t.Errorf("Dockerfile:%d: the build command lacks %q: %s", run.line, want, run.args)
		}
	}
	if !declared["VERSION"] {
		t.Errorf("Dockerfile:%d: ${VERSION} is used but no ARG VERSION precedes it in the build stage", run.line)
	}
	if !regexp.MustCompile(`(?m)^var version = `).MatchString(readFile(t, filepath.Join(repoRoot, "cmd", "walrelay", "main.go"))) {
		t.Error("cmd/walrelay/main.go has no `var version`, which -X main.version sets")
	}

	var user, entrypoint, copied string
	for _, in := range final.ins {
		switch in.cmd {
		case "USER":
			user = in.args
		case "ENTRYPOINT":
			entrypoint = in.args
		case "COPY":
			if strings.Contains(in.args, "--from="+build.name+" ") {
				copied = in.args
			}
		case "RUN":
			t.Errorf("Dockerfile:%d: the final stage runs %q; keep it to the binary (distroless has no shell)", in.line, in.args)
		}
	}
	if copied == "" {
		t.Errorf("the final stage does not COPY --from=%s", build.name)
	}
	uid, _, _ := strings.Cut(user, ":")
	if uid == "" || uid == "0" || uid == "root" {
		t.Errorf("the final stage runs as %q: want a non-root USER", user)
	} else if !regexp.MustCompile(`^[1-9][0-9]*$`).MatchString(uid) {
		t.Errorf("USER %s: use a numeric uid so Kubernetes' runAsNonRoot can verify it", user)
	}
	if !strings.Contains(entrypoint, "walrelay") {
		t.Errorf("the final stage's ENTRYPOINT %q does not run walrelay", entrypoint)
	}
	if !strings.HasPrefix(final.base, "gcr.io/distroless/static") && final.base != "scratch" {
		t.Errorf("final stage FROM %s: want a minimal base for a static binary (distroless/static or scratch)", final.base)
	}
}

// The Dockerfile's own build command, run on the host with VERSION set,
// builds a statically linked binary that reports that version.
func TestDockerfileBuildsStaticStampedBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds walrelay")
	}
	stages := parseDockerfile(t)
	run, _ := buildRun(t, stages[0])
	out := filepath.Join(t.TempDir(), "walrelay")
	cmdline := regexp.MustCompile(`-o \S+`).ReplaceAllString(run.args, "-o "+out)
	const version = "v9.8.7-compose-test"
	sh := exec.CommandContext(t.Context(), "sh", "-c", cmdline)
	sh.Dir = repoRoot
	sh.Env = append(os.Environ(), "VERSION="+version)
	if b, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("the Dockerfile's build command (%s): %v\n%s", cmdline, err, b)
	}

	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has a dynamic loader (PT_INTERP): not static; build with CGO_ENABLED=0")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary links %v: not static", libs)
	}

	b, err := exec.CommandContext(t.Context(), out, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("walrelay version: %v\n%s", err, b)
	}
	if got := strings.TrimSpace(string(b)); !strings.HasPrefix(got, "walrelay "+version) {
		t.Errorf("walrelay version printed %q, want the build arg %s", got, version)
	}
}

// .dockerignore keeps the build context small (no .git, no local binary)
// and excludes nothing the build of ./cmd/walrelay reads.
func TestDockerignore(t *testing.T) {
	var patterns []string
	for _, l := range strings.Split(readFile(t, filepath.Join(repoRoot, ".dockerignore")), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasPrefix(l, "!") || strings.Contains(l, "**") {
			t.Fatalf(".dockerignore pattern %q: this test's matcher does not support ! or **", l)
		}
		patterns = append(patterns, strings.Trim(filepath.ToSlash(filepath.Clean(l)), "/"))
	}
	// A path is excluded when it or one of its parent directories
	// matches a pattern (anchored at the context root).
	excluded := func(rel string) bool {
		parts := strings.Split(rel, "/")
		for i := 1; i <= len(parts); i++ {
			prefix := strings.Join(parts[:i], "/")
			for _, p := range patterns {
				if ok, _ := filepath.Match(p, prefix); ok {
					return true
				}
			}
		}
		return false
	}
	for _, want := range []string{".git", "walrelay", "bin"} {
		if !excluded(want) {
			t.Errorf(".dockerignore does not exclude %s", want)
		}
	}

	root, _ := filepath.Abs(repoRoot)
	list := exec.CommandContext(t.Context(), "go", "list", "-deps",
		"-f", `{{if not .Standard}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}`,
		"./cmd/walrelay")
	list.Dir = repoRoot
	out, err := list.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	needed := []string{"go.mod", "go.sum"}
	for _, f := range strings.Fields(string(out)) {
		if rel, err := filepath.Rel(root, f); err == nil && !strings.HasPrefix(rel, "..") {
			needed = append(needed, filepath.ToSlash(rel))
		}
	}
	if !slices.Contains(needed, "sql/001_outbox_table.sql") {
		t.Fatalf("go list found no embedded sql files; the listing is wrong: %v", needed)
	}
	for _, f := range needed {
		if excluded(f) {
			t.Errorf(".dockerignore excludes %s, which building ./cmd/walrelay needs", f)
		}
	}
}
