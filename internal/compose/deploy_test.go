package compose_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/slotrecord"
)

// fencedBlocks returns the bodies of the ```lang blocks of a Markdown text.
func fencedBlocks(md, lang string) []string {
	var out []string
	for _, m := range regexp.MustCompile("(?ms)^ *```"+regexp.QuoteMeta(lang)+"\n(.*?)^ *```").FindAllStringSubmatch(md, -1) {
		out = append(out, m[1])
	}
	return out
}

// docs/deploy.md says what the code does: the options and variables it
// names exist, its YAML examples load, its systemd unit stops walrelay
// cleanly, its SQL is sql/004_role.sql, and the messages and tests it
// quotes are in the code.
func TestDeployDoc(t *testing.T) {
	doc := readFile(t, filepath.Join(repoRoot, "docs", "deploy.md"))
	def := config.Default()
	fields := config.Fields(&def)
	envs := map[string]bool{config.EnvPrefix + "CONFIG": true}
	paths := map[string]bool{}
	for _, f := range fields {
		envs[f.Env] = true
		if f.Secret {
			envs[f.Env+"_FILE"] = true
		}
		paths[f.Path] = true
	}

	for _, v := range regexp.MustCompile(`WALRELAY_[A-Z0-9_]*[A-Z0-9]`).FindAllString(doc, -1) {
		if !envs[v] {
			t.Errorf("docs/deploy.md names %s, which walrelay does not read", v)
		}
	}
	for _, m := range regexp.MustCompile("`((?:postgres|kafka|relay|http|metrics|log)\\.[a-z_.]+)`").FindAllStringSubmatch(doc, -1) {
		if !paths[m[1]] {
			t.Errorf("docs/deploy.md names option %s, which does not exist", m[1])
		}
	}

	yamls := fencedBlocks(doc, "yaml")
	if len(yamls) < 2 {
		t.Fatalf("docs/deploy.md has %d yaml blocks, want the systemd config and the Kafka one", len(yamls))
	}
	for i, y := range yamls {
		f := filepath.Join(t.TempDir(), "walrelay.yaml")
		if err := os.WriteFile(f, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := config.Load(nil, []string{config.EnvPrefix + "CONFIG=" + f}); err != nil {
			t.Errorf("docs/deploy.md yaml block %d does not load: %v\n%s", i+1, err, y)
		}
	}

	units := fencedBlocks(doc, "ini")
	if len(units) != 1 {
		t.Fatalf("docs/deploy.md has %d ini blocks, want the systemd unit", len(units))
	}
	unit := map[string]string{}
	for _, l := range strings.Split(units[0], "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			unit[k] = v
		}
	}
	if stop, err := time.ParseDuration(unit["TimeoutStopSec"]); err != nil || stop <= def.Relay.ShutdownTimeout {
		t.Errorf("systemd unit: TimeoutStopSec=%s must exceed relay.shutdown_timeout (%s)", unit["TimeoutStopSec"], def.Relay.ShutdownTimeout)
	}
	for k, want := range map[string]string{"KillSignal": "SIGTERM", "Restart": "on-failure", "RestartPreventExitStatus": "2"} {
		if unit[k] != want {
			t.Errorf("systemd unit: %s=%s, want %s", k, unit[k], want)
		}
	}
	if !strings.Contains(unit["ExecStart"], "walrelay run") {
		t.Errorf("systemd unit: ExecStart=%s does not run `walrelay run`", unit["ExecStart"])
	}

	// The run role's SQL is sql/004_role.sql's.
	var role []string
	for _, l := range strings.Split(readFile(t, filepath.Join(repoRoot, "sql", "004_role.sql")), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "--") {
			role = append(role, l)
		}
	}
	if !strings.Contains(doc, "```sql\n"+strings.Join(role, "\n")+"\n```") {
		t.Errorf("docs/deploy.md does not show sql/004_role.sql's statements as they are:\n%s", strings.Join(role, "\n"))
	}

	// Quoted messages and tests exist.
	quotes := map[string]string{
		"is held by another process (pid %d); waiting for it":      filepath.Join(repoRoot, "internal", "relay", "status.go"),
		"emitting heartbeat (pg_logical_emit_message); will retry": filepath.Join(repoRoot, "internal", "heartbeat", "heartbeat.go"),
	}
	for q, file := range quotes {
		if !strings.Contains(readFile(t, file), q) {
			t.Errorf("docs/deploy.md quotes %q, which %s no longer says", q, file)
		}
		if !strings.Contains(strings.Join(strings.Fields(doc), " "), strings.ReplaceAll(q, "%d", "N")) {
			t.Errorf("docs/deploy.md should quote %q", q)
		}
	}
	testFiles, err := filepath.Glob(filepath.Join(repoRoot, "cmd", "walrelay", "*_test.go"))
	if err != nil || len(testFiles) == 0 {
		t.Fatalf("no test files in cmd/walrelay: %v", err)
	}
	var tests string
	for _, f := range testFiles {
		tests += readFile(t, f)
	}
	for _, m := range regexp.MustCompile("`(Test[A-Za-z]+)`").FindAllStringSubmatch(doc, -1) {
		if !strings.Contains(tests, "func "+m[1]+"(") {
			t.Errorf("docs/deploy.md cites %s, which cmd/walrelay does not have", m[1])
		}
	}
	alerts := readFile(t, filepath.Join(repoRoot, "docs", "prometheus", "alerts.yml"))
	for _, m := range regexp.MustCompile("`(Walrelay[A-Za-z]+)`").FindAllStringSubmatch(doc, -1) {
		if !strings.Contains(alerts, "alert: "+m[1]+"\n") {
			t.Errorf("docs/deploy.md names alert %s, which docs/prometheus/alerts.yml lacks", m[1])
		}
	}
	metrics := readFile(t, filepath.Join(repoRoot, "internal", "metrics", "metrics.go"))
	for _, m := range regexp.MustCompile("`walrelay_([a-z_]+)`").FindAllStringSubmatch(doc, -1) {
		if "walrelay_"+m[1] == slotrecord.TableName { // a table, not a metric
			continue
		}
		if !regexp.MustCompile(`(?m)^//\s+.*\b` + m[1] + `\b`).MatchString(metrics) {
			t.Errorf("docs/deploy.md names metric walrelay_%s, which internal/metrics does not list", m[1])
		}
	}
}
