package main

import (
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/testenv"
)

// Each error below says its cause and its fix on one line, in
// walrelay's words, not the driver's or the parser's.

// TestFlagValueErrorSaysWhatToWrite: --limit abc is "want a whole
// number", not strconv.ParseInt.
func TestFlagValueErrorSaysWhatToWrite(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"slot", "peek", "walrelay", "--limit", "abc"}, `--limit "abc": want a whole number`},
		{[]string{"verify", "--wait", "5"}, `--wait "5": want a duration with its unit, such as 30s`},
	} {
		stdout, stderr, code := walrelay(t, childEnv(), c.args...)
		wantFailure(t, stdout, stderr, code, 2, c.want)
		if strings.Contains(stderr, "strconv") || strings.Contains(stderr, "time: ") {
			t.Errorf("walrelay %v names the parser:\n%s", c.args, stderr)
		}
	}
}

// TestConnectErrorsSayTheFix: against a cluster that asks for passwords
// over TCP with ssl off: a role that does not exist is not told only to
// fix the password; a role without REPLICATION is told how to get it;
// sslmode=require against ssl=off names sslmode; a host that does not
// resolve is said once.
func TestConnectErrorsSayTheFix(t *testing.T) {
	const password = "Right-Passw0rd"
	dsn := passwordCluster(t, password)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	superDSN := withUser(t, dsn, localpg.User) // trusted
	norepl := testenv.UniqueName(t, "norepl")
	testenv.Exec(t, superDSN, "CREATE ROLE "+pgx.Identifier{norepl}.Sanitize()+" LOGIN PASSWORD "+quoteLiteral(password))
	testenv.Exec(t, superDSN, "GRANT SELECT ON public.outbox TO "+pgx.Identifier{norepl}.Sanitize())
	as := func(user string, query string) string {
		v := *u
		v.User = url.UserPassword(user, password)
		v.RawQuery = query
		return v.String()
	}
	// The replication connection itself (run's stream, after the
	// startup check): "must be superuser or replication role to start
	// walsender" gets the fix.
	if conn, err := pgconn.Connect(t.Context(), as(norepl, "replication=database")); err == nil {
		conn.Close(t.Context())
		t.Errorf("a role without REPLICATION opened a replication connection")
	} else if msg := postgres.ExplainConnectError(err).Error(); !strings.Contains(msg, "may not open a replication connection") || !strings.Contains(msg, "give it REPLICATION (ALTER ROLE") {
		t.Errorf("replication connection without REPLICATION: %s", msg)
	}
	dns := *u
	dns.Host = "nosuchhost.invalid:5432"
	broker := testenv.Kafka(t)
	for _, c := range []struct {
		name, dsn string
		args      []string
		want      []string
	}{
		{"no such role", as("nosuchrole", ""), []string{"lsn"}, []string{`no role "nosuchrole" exists`, "fix the user or the password in postgres.dsn"}},
		{"role without REPLICATION", as(norepl, ""), []string{"run"}, []string{"lacks REPLICATION", "ALTER ROLE"}},
		{"sslmode=require against ssl=off", as(u.User.Username(), "sslmode=require"), []string{"lsn"}, []string{"does not accept TLS, which the sslmode of postgres.dsn requires", "set sslmode=prefer"}},
		{"host does not resolve", dns.String(), []string{"lsn"}, []string{`the host "nosuchhost.invalid" of postgres.dsn does not resolve`, "fix the host in postgres.dsn"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := childEnv("WALRELAY_POSTGRES_DSN="+c.dsn, "WALRELAY_KAFKA_BROKERS="+strings.Join(broker.Addrs(), ","), "WALRELAY_LOG_LEVEL=warn")
			stdout, stderr, code := walrelay(t, env, c.args...)
			wantFailure(t, stdout, stderr, code, 1, c.want...)
			if n := strings.Count(stderr, "no such host"); n > 1 {
				t.Errorf("the DNS failure is said %d times:\n%s", n, stderr)
			}
			if strings.Contains(stderr, password) {
				t.Errorf("the output contains the password:\n%s", stderr)
			}
		})
	}
}

// TestSetupSaysWalLevel: setup on a server with wal_level=replica says
// so and how to fix it, not SQLSTATE 55000.
func TestSetupSaysWalLevel(t *testing.T) {
	c := testenv.PrivateCluster(t, localpg.Options{Settings: map[string]string{"wal_level": "replica"}})
	env := childEnv("WALRELAY_POSTGRES_DSN=" + c.DSN("postgres"))
	stdout, stderr, code := walrelay(t, env, "setup")
	if code != 1 || !strings.Contains(stderr, "wal_level is replica; logical decoding needs logical") || !strings.Contains(stderr, "ALTER SYSTEM SET wal_level = logical") || strings.Contains(stderr, "SQLSTATE") {
		t.Errorf("setup with wal_level=replica: exit %d, want 1 with the cause and fix\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}
