package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
)

// TestRunRefusesWhatCheckRejects: run with a postgres.table that does not
// exist and retention on stops at once with check's words and fix,
// instead of starting, reporting ready and logging an ERROR every round;
// run, check and config refuse a kafka.tls.ca_file or a postgres.dsn
// sslrootcert that does not exist (config without connecting).
func TestRunRefusesWhatCheckRejects(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	setupOutbox(t, dsn)
	broker := testenv.Kafka(t)
	env := childEnv(
		"WALRELAY_POSTGRES_DSN="+dsn,
		"WALRELAY_KAFKA_BROKERS="+strings.Join(broker.Addrs(), ","),
		"WALRELAY_LOG_FORMAT=json",
	)

	t.Run("missing table", func(t *testing.T) {
		c := startChild(t, env, "run", "--postgres.table=public.outbx", "--outbox.retention=24h")
		code := c.wait(t, 60*time.Second)
		stderr := c.stderr.String()
		if code == 0 {
			t.Errorf("run exit 0, want a refusal")
		}
		for _, want := range []string{"startup check failed", "table public.outbx does not exist (postgres.table)", "run `walrelay setup`"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("run's stderr lacks %q:\n%s", want, stderr)
			}
		}
		if strings.Contains(stderr, `"msg":"ready`) {
			t.Errorf("run reported ready before refusing:\n%s", stderr)
		}
		// check says the same.
		stdout, _, code := walrelay(t, env, "check", "--postgres.table=public.outbx")
		if code == 0 || !strings.Contains(stdout, "table public.outbx does not exist (postgres.table)") {
			t.Errorf("check: exit %d\n%s", code, stdout)
		}
	})

	missing := filepath.Join(t.TempDir(), "no-such-ca.pem")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"kafka ca file", []string{"--kafka.tls.enabled", "--kafka.tls.ca_file=" + missing}, "kafka.tls.ca_file"},
		{"postgres sslrootcert", []string{"--postgres.dsn=" + dsn + "&sslmode=verify-full&sslrootcert=" + missing}, "postgres.dsn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, cmd := range []string{"config", "run", "check"} {
				stdout, stderr, code := walrelay(t, env, append([]string{cmd}, tc.args...)...)
				out := stdout + stderr
				if code == 0 || !strings.Contains(out, tc.want) || !strings.Contains(out, "no-such-ca.pem") {
					t.Errorf("walrelay %s %v: exit %d, want a refusal naming %s and the file\nstdout:\n%s\nstderr:\n%s", cmd, tc.args, code, tc.want, stdout, stderr)
				}
			}
		})
	}
}
