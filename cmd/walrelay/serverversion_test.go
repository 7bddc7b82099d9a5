package main

import (
	"os"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/testenv"
)

// envPG13Bin names the directory of PostgreSQL 13 server binaries for
// TestServerTooOld; make test sets it (make pg-majors installs them).
const envPG13Bin = "WALRELAY_PG13_BIN"

// TestServerTooOld: on PostgreSQL 13, which walrelay run refuses, setup
// and slot create exit 1 with one line naming the version before creating
// anything, and check exits 1 with its server version item failed; none
// leaves a table, publication or slot behind.
func TestServerTooOld(t *testing.T) {
	bin := os.Getenv(envPG13Bin)
	if bin == "" {
		t.Skipf("set %s to a PostgreSQL 13 bin directory (make test does: make pg-majors installs one)", envPG13Bin)
	}
	cluster := testenv.PrivateCluster(t, localpg.Options{BinDir: bin})
	dsn := cluster.DSN("postgres")
	if v := testenv.QueryValue[string](t, dsn, "SHOW server_version"); !strings.HasPrefix(v, "13.") {
		t.Fatalf("%s: server_version %q, want 13.x", envPG13Bin, v)
	}
	env := childEnv("WALRELAY_POSTGRES_DSN="+dsn, "WALRELAY_KAFKA_BROKERS=127.0.0.1:1")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"setup", []string{"setup"}},
		{"slot create", []string{"slot", "create", "walrelay"}},
		{"check", []string{"check"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := walrelay(t, env, tc.args...)
			t.Logf("walrelay %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(tc.args, " "), code, stdout, stderr)
			if tc.name == "check" {
				wantFailure(t, stdout, stderr, code, 1, "check failed")
				for _, want := range []string{"fail  server version               PostgreSQL 13.", "walrelay needs PostgreSQL 14 or newer"} {
					if !strings.Contains(stdout, want) {
						t.Errorf("check output lacks %q:\n%s", want, stdout)
					}
				}
			} else {
				wantFailure(t, stdout, stderr, code, 1, "walrelay: "+tc.name+": ", "needs PostgreSQL 14 or newer", "PostgreSQL 13.", "nothing was created")
				if stdout != "" {
					t.Errorf("stdout not empty:\n%s", stdout)
				}
			}
			for what, q := range map[string]string{
				"outbox table":            "SELECT count(*) FROM pg_class WHERE relname = 'outbox'",
				"walrelay's slot records": "SELECT count(*) FROM pg_class WHERE relname LIKE 'walrelay%'",
				"publication":             "SELECT count(*) FROM pg_publication",
				"replication slot":        "SELECT count(*) FROM pg_replication_slots",
			} {
				if n := testenv.QueryValue[int64](t, dsn, q); n != 0 {
					t.Errorf("after walrelay %s on PostgreSQL 13: %d %s, want none", tc.name, n, what)
				}
			}
		})
	}
}
