package monitoring_test

import (
	"os/exec"
	"testing"
)

// lookPath finds a binary of Debian's prometheus package, failing (not
// skipping) when it is missing: `make test` installs it through `make deps`.
func lookPath(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found on PATH (%v): run `make deps`, which installs Debian's prometheus package (prometheus and promtool)", name, err)
	}
	return path
}

// promtool accepts the rules and every rule unit test passes.
func TestPromtool(t *testing.T) {
	promtool := lookPath(t, "promtool")
	for _, args := range [][]string{
		{"check", "rules", "alerts.yml"},
		{"test", "rules", "alerts_test.yml"},
	} {
		cmd := exec.CommandContext(t.Context(), promtool, args...)
		cmd.Dir = rulesDir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %v (in %s): %v\n%s", args, rulesDir, err, out)
			continue
		}
		t.Logf("promtool %v:\n%s", args, out)
	}
}
