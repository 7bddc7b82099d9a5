package main

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/testenv"
)

// The package's shared cluster trusts every connection. These tests run a
// private cluster whose pg_hba.conf asks every role but the superuser for
// a password over TCP, with ssl off, so a client on the default
// sslmode=prefer first tries TLS, is refused, then logs in without it.

// passwordCluster starts such a cluster with the outbox set up in database
// postgres, and returns the URL DSN (no sslmode) of a REPLICATION role
// that logs in with password.
func passwordCluster(t *testing.T, password string) string {
	t.Helper()
	c := testenv.PrivateCluster(t, localpg.Options{})
	admin := c.DSN("postgres")
	setupOutbox(t, admin)
	role := testenv.UniqueName(t, "pw")
	testenv.Exec(t, admin, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN REPLICATION PASSWORD "+quoteLiteral(password))
	conn := testenv.Connect(t, admin) // opened under the trusting rules
	hba := strings.Join([]string{
		"local all all trust",
		"local replication all trust",
		"host all " + localpg.User + " 127.0.0.1/32 trust",
		"host replication " + localpg.User + " 127.0.0.1/32 trust",
		"host all all 127.0.0.1/32 scram-sha-256",
		"host replication all 127.0.0.1/32 scram-sha-256",
	}, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(c.DataDir(), "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), `SELECT pg_reload_conf()`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the postmaster reloads asynchronously
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, password)
	u.RawQuery = "" // sslmode=prefer, libpq's default
	return u.String()
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// A wrong Postgres password stops `walrelay run` and the operator commands
// with one line that names the failed authentication, not the refused TLS
// attempt that sslmode=prefer made first, and not the password.
func TestWrongPasswordIsOneLine(t *testing.T) {
	const password, wrongPassword = "Right-Passw0rd", "Wrong-Passw0rd"
	dsn := passwordCluster(t, password)
	wrong := withPassword(t, dsn, wrongPassword, "")
	// The cluster enforces the password: a connection without it fails,
	// and the right one works, so the failures below are the password's.
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if conn, err := pgx.Connect(t.Context(), withUser(t, dsn, u.User.Username())); err == nil {
		conn.Close(t.Context())
		t.Fatal("the cluster let the role in without a password; the test would prove nothing")
	}
	if out := strings.TrimSpace(wantOK(t, childEnv("WALRELAY_POSTGRES_DSN="+dsn), "lsn")); !lsnPattern.MatchString(out) {
		t.Fatalf("lsn with the right password printed %q", out)
	}
	broker := testenv.Kafka(t)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"run", []string{"run"}},
		{"setup", []string{"setup"}},
		{"lsn", []string{"lsn"}},
		{"slot list", []string{"slot", "list"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := childEnv("WALRELAY_POSTGRES_DSN="+wrong, "WALRELAY_KAFKA_BROKERS="+strings.Join(broker.Addrs(), ","), "WALRELAY_LOG_LEVEL=warn")
			stdout, stderr, code := walrelay(t, env, c.args...)
			t.Logf("walrelay %v: %s", c.args, stderr)
			wantFailure(t, stdout, stderr, code, 1, "password authentication failed for user", "fix the user or the password in postgres.dsn")
			if strings.HasPrefix(strings.TrimPrefix(stderr, "walrelay: "), "tls error") || strings.Contains(stderr, "server refused TLS") {
				t.Errorf("the error leads with the refused TLS attempt instead of the cause:\n%s", stderr)
			}
			if strings.Contains(stdout+stderr, wrongPassword) {
				t.Errorf("the output contains the password:\n%s\n%s", stdout, stderr)
			}
		})
	}
}
