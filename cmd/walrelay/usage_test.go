package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Bad usage exits 2 with one line naming what is wrong and the fix, before
// connecting to anything, and nothing on stdout (issue 34: ports, --max-ids,
// --url, -o).
func TestUsageErrorsExit2(t *testing.T) {
	connector, err := filepath.Abs(filepath.Join("..", "..", "internal", "dbzimport", "testdata", "examples-outbox-register-postgres.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want string // the whole stderr line
	}{
		{"broker port out of range", []string{"config", "--kafka.brokers=host:99999"},
			`walrelay: config kafka.brokers="host:99999" (from --kafka.brokers): the port must be a number from 1 to 65535`},
		{"broker port not a number", []string{"config", "--kafka.brokers=host:kafka"},
			`walrelay: config kafka.brokers="host:kafka" (from --kafka.brokers): the port must be a number from 1 to 65535`},
		{"--max-ids 0", []string{"verify", "--max-ids", "0"},
			`walrelay: --max-ids 0: must be at least 1 (records held in memory at once)`},
		{"--max-ids negative", []string{"verify", "--max-ids=-5"},
			`walrelay: --max-ids -5: must be at least 1 (records held in memory at once)`},
		{"status --url not a URL", []string{"status", "--url", "notaurl"},
			`walrelay: --url "notaurl": want the relay's status URL, http://host:port/status (e.g. http://127.0.0.1:9814/status)`},
		{"status --url without a host", []string{"status", "--url", "http:///status"},
			`walrelay: --url "http:///status": want the relay's status URL, http://host:port/status (e.g. http://127.0.0.1:9814/status)`},
		{"status --url another scheme", []string{"status", "--url", "ftp://relay:9814/status"},
			`walrelay: --url "ftp://relay:9814/status": want the relay's status URL, http://host:port/status (e.g. http://127.0.0.1:9814/status)`},
		{"debezium import -o a format it has not", []string{"debezium", "import", connector, "-o", "json"},
			`walrelay: -o "json": not an output format (this command writes yaml); to write the YAML to a file, use --out FILE`},
		{"debezium import -o a file name", []string{"debezium", "import", connector, "-o", "walrelay.yaml"},
			`walrelay: -o "walrelay.yaml": not an output format (this command writes yaml); to write the YAML to a file, use --out FILE`},
		{"mistyped option flag", []string{"config", "--postgres.slott=x"},
			`walrelay: unknown flag: --postgres.slott; did you mean --postgres.slot?`},
		{"option flag without its section", []string{"config", "--slot", "x"},
			`walrelay: unknown flag: --slot; did you mean --postgres.slot?`},
		{"mistyped command flag", []string{"verify", "--max-id", "5"},
			`walrelay: unknown flag: --max-id; did you mean --max-ids?`},
		{"unknown flag, nothing close", []string{"config", "--zzzzzz"},
			`walrelay: unknown flag: --zzzzzz`},
		{"slot list -o a file name", []string{"slot", "list", "-o", "slots.txt"},
			`walrelay: -o "slots.txt": want table or json`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			stdout, stderr, code := walrelayIn(t, dir, childEnv("WALRELAY_POSTGRES_DSN=postgres://walrelay@127.0.0.1:1/nowhere?connect_timeout=1"), c.args...)
			if code != 2 || stderr != c.want+"\n" || stdout != "" {
				t.Errorf("walrelay %q: exit %d, want 2\nstderr: %s want:   %s\nstdout: %s", c.args, code, stderr, c.want, stdout)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("walrelay %q wrote %s in its working directory", c.args, entries[0].Name())
			}
		})
	}
}

// -o is the output format everywhere; debezium import writes its file with
// --out, and takes -o yaml, its one format.
func TestDebeziumImportOutAndFormat(t *testing.T) {
	connector := filepath.Join("..", "..", "internal", "dbzimport", "testdata", "examples-outbox-register-postgres.json")
	toStdout, _, code := walrelay(t, childEnv(), "debezium", "import", connector, "-o", "yaml")
	if code != 1 || !strings.Contains(toStdout, "postgres:") { // 1: plugin.name is not mapped
		t.Fatalf("debezium import -o yaml: exit %d, stdout:\n%s", code, toStdout)
	}
	out := filepath.Join(t.TempDir(), "walrelay.yaml")
	stdout, _, code := walrelay(t, childEnv(), "debezium", "import", connector, "--out", out)
	if code != 1 || stdout != "" {
		t.Fatalf("debezium import --out: exit %d, stdout %q", code, stdout)
	}
	if data, err := os.ReadFile(out); err != nil || string(data) != toStdout {
		t.Errorf("--out wrote %q (%v), want what -o yaml printed", data, err)
	}
}

// walrelayIn runs `walrelay args...` to completion with dir as its
// working directory, where a command that took a flag's value for a file
// name would write it.
func walrelayIn(t *testing.T, dir string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, append([]string{"--"}, args...)...)
	cmd.Dir, cmd.Env = dir, env
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running walrelay %q: %v", args, err)
	}
	return out.String(), errOut.String(), code
}
