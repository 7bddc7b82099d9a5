package main

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/setup"
	"github.com/walrelay/walrelay/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// Configuration errors exit 2 with one line naming the field and value,
// before connecting to anything.
func TestConfigErrorsExit2(t *testing.T) {
	yamlFile := filepath.Join(t.TempDir(), "walrelay.yaml")
	if err := os.WriteFile(yamlFile, []byte("postgres:\n  slot: fine\n  slott: typo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	levelFile := filepath.Join(t.TempDir(), "level.yaml")
	if err := os.WriteFile(levelFile, []byte("log:\n  level: loud\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		env  []string
		args []string
		want []string // substrings of the one stderr line
	}{
		{"bad slot from env", []string{"WALRELAY_POSTGRES_SLOT=Bad-Slot"}, []string{"run"}, []string{"postgres.slot", `"Bad-Slot"`}},
		{"bad duration flag", nil, []string{"run", "--kafka.linger=abc"}, []string{"kafka.linger", `"abc"`, "--kafka.linger"}},
		{"bad integer env", []string{"WALRELAY_KAFKA_TOPIC_PARTITIONS=lots"}, []string{"run"}, []string{"kafka.topic_partitions", `"lots"`, "WALRELAY_KAFKA_TOPIC_PARTITIONS"}},
		{"unknown env var", []string{"WALRELAY_NOPE=1"}, []string{"run"}, []string{"WALRELAY_NOPE"}},
		{"unknown YAML key", nil, []string{"run", "--config", yamlFile}, []string{"slott", yamlFile}},
		{"unknown YAML key via env", []string{"WALRELAY_CONFIG=" + yamlFile}, []string{"setup"}, []string{"slott"}},
		{"bad log level for config", []string{"WALRELAY_LOG_LEVEL=loud"}, []string{"config"}, []string{`log.level="loud" (from WALRELAY_LOG_LEVEL): must be`}},
		{"bad log level flag", nil, []string{"run", "--log.level=loud"}, []string{`log.level="loud" (from --log.level): must be`}},
		{"bad log level in the file", nil, []string{"run", "--config", levelFile}, []string{`log.level="loud" (from ` + levelFile + `:2): must be`}},
		{"unknown flag", nil, []string{"run", "--no-such-flag"}, []string{"no-such-flag"}},
		{"unknown command", nil, []string{"frobnicate"}, []string{"frobnicate"}},
		{"extra argument", nil, []string{"version", "extra"}, []string{"extra"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := walrelay(t, childEnv(c.env...), c.args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2; stderr:\n%s", code, stderr)
			}
			lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "walrelay: ") {
				t.Errorf("want one line starting with \"walrelay: \", got %d lines:\n%s", len(lines), stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not name %s: %s", w, stderr)
				}
			}
			if stdout != "" {
				t.Errorf("stdout should be empty on a usage error, got:\n%s", stdout)
			}
			noStackTrace(t, "stderr", stderr)
		})
	}
}

// A boolean option's flag works bare (true) and with =value, for every
// command that takes the configuration.
func TestBoolFlagWithoutValue(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want []string // lines of `walrelay config`'s YAML
	}{
		{"bare", []string{"config", "--http.pprof"}, []string{"    pprof: true"}},
		{"bare before another flag", []string{"config", "--http.pprof", "--kafka.create_topics=false"}, []string{"    pprof: true", "    create_topics: false"}},
		{"=false", []string{"config", "--kafka.create_topics=false"}, []string{"    create_topics: false"}},
		{"=true", []string{"config", "--http.pprof=true"}, []string{"    pprof: true"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out := wantOK(t, childEnv(), c.args...)
			for _, w := range c.want {
				if !slices.Contains(strings.Split(out, "\n"), w) {
					t.Errorf("walrelay %q: no line %q in\n%s", c.args, w, out)
				}
			}
		})
	}
	// run parses its flags the same way: the bare flag is accepted, and
	// the invalid slot is what stops it (exit 2, before connecting).
	t.Run("run", func(t *testing.T) {
		t.Parallel()
		stdout, stderr, code := walrelay(t, childEnv("WALRELAY_POSTGRES_SLOT=Bad-Slot"), "run", "--http.pprof")
		wantFailure(t, stdout, stderr, code, 2, "postgres.slot", "Bad-Slot")
	})
	// A value after a space is an argument, as with any boolean flag.
	t.Run("value after a space", func(t *testing.T) {
		t.Parallel()
		stdout, stderr, code := walrelay(t, childEnv(), "config", "--kafka.create_topics", "false")
		wantFailure(t, stdout, stderr, code, 2, `unknown command "false"`)
	})
}

// A router option naming a column the outbox lacks stops `walrelay run`
// at startup (exit 1), naming the column, before any event is read.
func TestRunFailsAtStartupOnMissingColumn(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	if _, err := setup.Run(t.Context(), testenv.Connect(t, dsn), setup.Names{Schema: "public", Table: "outbox", Publication: "walrelay_outbox", Slot: "walrelay"}); err != nil {
		t.Fatal(err)
	}
	broker := testenv.Kafka(t)
	stdout, stderr, code := walrelay(t, childEnv(
		"WALRELAY_POSTGRES_DSN="+dsn,
		"WALRELAY_KAFKA_BROKERS="+strings.Join(broker.Addrs(), ","),
		"WALRELAY_ROUTER_TABLE_FIELD_EVENT_KEY=aggregate_id",
	), "run")
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
	}
	last := lastLine(stderr)
	if !strings.HasPrefix(last, "walrelay: ") || !strings.Contains(last, "aggregate_id") {
		t.Errorf("the final error line should name the missing column aggregate_id: %q", last)
	}
	noStackTrace(t, "stderr", stderr)
	noStackTrace(t, "stdout", stdout)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// DESIGN.md invariant 7: the DSN password never appears in walrelay's output,
// whether it connects, fails to connect or just prints the config.
func TestNoSecretInOutput(t *testing.T) {
	const password = "S3cretPassw0rd"
	pg := testenv.Postgres(t)
	dsn := pg.NewDatabase(t)
	broker := testenv.Kafka(t)
	brokers := "WALRELAY_KAFKA_BROKERS=" + strings.Join(broker.Addrs(), ",")
	if _, err := setup.Run(t.Context(), testenv.Connect(t, dsn), setup.Names{Schema: "public", Table: "outbox", Publication: "walrelay_outbox", Slot: "walrelay"}); err != nil {
		t.Fatal(err)
	}
	good := withPassword(t, dsn, password, "")
	badPort := withPassword(t, dsn, password, "1")
	keyValue := "host=127.0.0.1 port=1 user=postgres password='" + password + " x' dbname=nowhere connect_timeout=2"

	check := func(t *testing.T, what, out string) {
		t.Helper()
		if strings.Contains(out, password) {
			t.Errorf("%s contains the password:\n%s", what, out)
		}
		noStackTrace(t, what, out)
	}

	t.Run("run connected", func(t *testing.T) {
		c := startChild(t, childEnv("WALRELAY_POSTGRES_DSN="+good, brokers, "WALRELAY_LOG_LEVEL=debug", "WALRELAY_LOG_FORMAT=json", "WALRELAY_POSTGRES_STATUS_INTERVAL=100ms"), "run")
		deadline := time.Now().Add(30 * time.Second)
		for !testenv.QueryValue[bool](t, dsn, `SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = 'walrelay' AND active)`) {
			if c.exited() || time.Now().After(deadline) {
				t.Fatalf("walrelay never streamed (exited=%t):\n%s", c.exited(), c.stderr.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.signal(t, syscall.SIGTERM)
		if code := c.wait(t, 30*time.Second); code != 0 {
			t.Fatalf("exit %d after SIGTERM", code)
		}
		if !strings.Contains(c.stderr.String(), "xxxxx") {
			t.Errorf("the startup log should show the redacted DSN:\n%s", c.stderr.String())
		}
		check(t, "stderr", c.stderr.String())
		check(t, "stdout", c.stdout.String())
	})
	for _, c := range []struct{ name, dsn string }{{"URL", badPort}, {"key=value", keyValue}} {
		for _, cmd := range []string{"run", "setup"} {
			t.Run(cmd+" cannot connect "+c.name, func(t *testing.T) {
				stdout, stderr, code := walrelay(t, childEnv("WALRELAY_POSTGRES_DSN="+c.dsn, brokers, "WALRELAY_LOG_LEVEL=debug"), cmd)
				if code != 1 {
					t.Errorf("exit %d, want 1", code)
				}
				if !strings.Contains(stderr, "connect") {
					t.Errorf("stderr should say it could not connect:\n%s", stderr)
				}
				check(t, "stderr", stderr)
				check(t, "stdout", stdout)
			})
		}
	}
	t.Run("config", func(t *testing.T) {
		for _, d := range []string{good, keyValue} {
			stdout, stderr, code := walrelay(t, childEnv("WALRELAY_POSTGRES_DSN="+d), "config")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if !regexp.MustCompile(`(?m)^\s*dsn: .*xxxxx`).MatchString(stdout) {
				t.Errorf("config should print the DSN redacted:\n%s", stdout)
			}
			check(t, "stdout", stdout)
			check(t, "stderr", stderr)
		}
	})
	t.Run("config invalid DSN", func(t *testing.T) {
		_, stderr, code := walrelay(t, childEnv("WALRELAY_POSTGRES_DSN=host=db port=notaport password="+password), "config")
		if code != 2 || !strings.Contains(stderr, "postgres.dsn") {
			t.Errorf("exit %d, want 2 naming postgres.dsn: %s", code, stderr)
		}
		check(t, "stderr", stderr)
	})
}

func TestVersion(t *testing.T) {
	stdout, stderr, code := walrelay(t, childEnv(), "version")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if !regexp.MustCompile(`^walrelay \S+ \((commit [0-9a-f]{12}( with uncommitted changes)?, \S+|commit unknown: built without VCS information), go\S+\)\n$`).MatchString(stdout) {
		t.Fatalf("version output %q is not one version line", stdout)
	}
}

// `walrelay config --list` is the options table docs/configuration.md includes; it
// is kept as testdata/config-options.md at the repository root (-update
// rewrites it).
func TestConfigListGolden(t *testing.T) {
	stdout, stderr, code := walrelay(t, childEnv(), "config", "--list")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	golden := filepath.Join("..", "..", "testdata", "config-options.md")
	if *update {
		if err := os.WriteFile(golden, []byte(stdout), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to create it): %v", err)
	}
	if stdout != string(want) {
		t.Errorf("walrelay config --list differs from %s (rerun with -update if intended):\n%s", golden, stdout)
	}
	// Every option is in the table, once, as a Markdown row.
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "| ") || !strings.HasPrefix(lines[1], "|---") {
		t.Fatalf("not a Markdown table:\n%s", stdout)
	}
	rows := map[string]int{}
	for _, l := range lines[2:] {
		if !strings.HasPrefix(l, "| ") || !strings.HasSuffix(l, " |") {
			t.Errorf("not a table row: %q", l)
		}
		for _, m := range regexp.MustCompile("`(WALRELAY_[A-Z0-9_]+)`").FindAllStringSubmatch(l, -1) {
			rows[m[1]]++
		}
	}
	for _, env := range optionEnvs() {
		if rows[env] != 1 {
			t.Errorf("%s appears %d times in the table, want once", env, rows[env])
		}
	}
	if len(lines)-2 != len(optionEnvs()) {
		t.Errorf("%d rows for %d options", len(lines)-2, len(optionEnvs()))
	}
}
