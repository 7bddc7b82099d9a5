package main

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/testenv"
)

// Postgres TLS is configured in the DSN (docs/deploy.md): sslmode,
// sslrootcert, sslcert, sslkey. These tests run a private cluster with
// ssl=on, a server certificate for the DNS name localhost only, and a
// pg_hba.conf that rejects every TCP connection without TLS, so a
// working connection is a verified TLS connection.

// tlsCluster is a private cluster serving TLS with a certificate from ca.
type tlsCluster struct {
	cluster *localpg.Cluster
	ca      *testenv.CA
	caFile  string
}

// startTLSCluster starts a private cluster, installs a server certificate
// for localhost issued by a new CA in its data directory, turns ssl on,
// and runs setup (outbox, publication, slot walrelay) in database
// postgres. hba lines go before the final hostssl-trust and
// hostnossl-reject lines.
func startTLSCluster(t *testing.T) *tlsCluster {
	t.Helper()
	c := &tlsCluster{cluster: testenv.PrivateCluster(t, localpg.Options{}), ca: testenv.NewCA(t, "walrelay test postgres CA")}
	c.caFile = c.ca.CertFile(t)
	c.installServerCert(t, c.ca.Issue(t, "pg-server", "localhost"))
	admin := c.cluster.DSN("postgres") // sslmode=disable, until the hba rewrite
	setupOutbox(t, admin)
	testenv.Exec(t, admin, `ALTER SYSTEM SET ssl_cert_file = 'server.crt'`)
	testenv.Exec(t, admin, `ALTER SYSTEM SET ssl_key_file = 'server.key'`)
	testenv.Exec(t, admin, `ALTER SYSTEM SET ssl = on`)
	c.reload(t, admin)
	if on := testenv.QueryValue[string](t, admin, `SHOW ssl`); on != "on" {
		t.Fatalf("ssl is %s after reload; server log:\n%s", on, c.cluster.LogTail(20))
	}
	c.setHBA(t, admin)
	return c
}

// installServerCert copies the server certificate and key into the data
// directory as server.crt and server.key, owned by the data directory's
// owner (the postgres OS user when the tests run as root), mode 0600, as
// the server requires. They take effect at the next reload.
func (c *tlsCluster) installServerCert(t *testing.T, server testenv.Leaf) {
	t.Helper()
	fi, err := os.Stat(c.cluster.DataDir())
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	for src, dst := range map[string]string{server.CertFile: "server.crt", server.KeyFile: "server.key"} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(c.cluster.DataDir(), dst)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, int(st.Uid), int(st.Gid)); err != nil {
			t.Fatal(err)
		}
	}
}

func (c *tlsCluster) reload(t *testing.T, dsn string) {
	t.Helper()
	testenv.Exec(t, dsn, `SELECT pg_reload_conf()`)
	time.Sleep(200 * time.Millisecond) // the postmaster reloads asynchronously
}

// setHBA rewrites pg_hba.conf: the socket trusts everyone, extra lines
// come next, then TCP over TLS is trusted and TCP without TLS rejected.
// It reloads through dsn (a connection allowed before the rewrite).
func (c *tlsCluster) setHBA(t *testing.T, dsn string, extra ...string) {
	t.Helper()
	conn := testenv.Connect(t, dsn) // opened under the old rules
	lines := append([]string{"local all all trust", "local replication all trust"}, extra...)
	lines = append(lines, "hostssl all all 127.0.0.1/32 trust", "hostnossl all all 127.0.0.1/32 reject")
	if err := os.WriteFile(filepath.Join(c.cluster.DataDir(), "pg_hba.conf"), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), `SELECT pg_reload_conf()`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
}

// dsn returns a URL DSN for user on host (the cluster's port) with the
// given query parameters.
func (c *tlsCluster) dsn(user, host string, params ...string) string {
	u := url.URL{Scheme: "postgres", User: url.User(user), Host: fmt.Sprintf("%s:%d", host, c.cluster.Port()), Path: "/postgres", RawQuery: strings.Join(params, "&")}
	return u.String()
}

// verifyFull is the DSN for user at localhost, verifying the server with
// the test CA.
func (c *tlsCluster) verifyFull(user string, params ...string) string {
	return c.dsn(user, "localhost", append([]string{"sslmode=verify-full", "sslrootcert=" + c.caFile}, params...)...)
}

// wantCertFailure asserts that `walrelay args...` with dsn exits 1 with
// one stderr line about a certificate containing the substrings.
func wantCertFailure(t *testing.T, dsn string, extraEnv []string, args []string, substrings ...string) {
	t.Helper()
	env := childEnv(append([]string{"WALRELAY_POSTGRES_DSN=" + dsn, "WALRELAY_LOG_LEVEL=warn"}, extraEnv...)...)
	stdout, stderr, code := walrelay(t, env, args...)
	t.Logf("walrelay %v: %s", args, stderr)
	wantFailure(t, stdout, stderr, code, 1, append([]string{"certificate"}, substrings...)...)
}

// sslWalsenders counts the walsenders streaming slot walrelay, and those
// of them on TLS.
func sslWalsenders(t *testing.T, dsn string) (all, tls int) {
	t.Helper()
	s := testenv.QueryValue[string](t, dsn, `SELECT count(*) || ' ' || count(*) FILTER (WHERE s.ssl)
		FROM pg_replication_slots r JOIN pg_stat_ssl s ON s.pid = r.active_pid WHERE r.slot_name = 'walrelay'`)
	fmt.Sscan(s, &all, &tls)
	return all, tls
}

// runPublishes runs `walrelay run` with dsn, writes events and waits
// until they are on Kafka and confirmed, checking the walsender uses TLS.
func runPublishes(t *testing.T, c *tlsCluster, dsn, admin string) {
	t.Helper()
	broker := testenv.Kafka(t)
	prefix := testenv.UniqueName(t, "tls")
	relay := startChild(t, childEnv(
		"WALRELAY_POSTGRES_DSN="+dsn,
		"WALRELAY_KAFKA_BROKERS="+strings.Join(broker.Addrs(), ","),
		"WALRELAY_POSTGRES_STATUS_INTERVAL=100ms",
		"WALRELAY_ROUTER_ROUTE_TOPIC_REPLACEMENT="+prefix+".${routedByValue}",
	), "run")
	waitStreaming(t, relay, admin)
	ids := insertEvents(t, admin, "order", "order")
	recs := broker.ReadAll(t, []string{prefix + ".order"}, 2, 60*time.Second)
	var got []string
	for _, r := range recs {
		got = append(got, testenv.Header(r, "id"))
	}
	slices.Sort(got)
	slices.Sort(ids)
	if !slices.Equal(got, ids) {
		t.Errorf("published %v, want %v", got, ids)
	}
	testenv.WaitCaughtUp(t, admin, "walrelay", 30*time.Second)
	if all, tls := sslWalsenders(t, admin); all != 1 || tls != 1 {
		t.Errorf("%d walsender(s) stream slot walrelay, %d of them over TLS; want 1 and 1", all, tls)
	}
	stopRelay(t, relay)
}

// verify-full with the right CA and host publishes end to end and serves
// the operator commands; a wrong CA or a host name the certificate does
// not name fails at once with one line saying so.
func TestPostgresTLSVerifyFull(t *testing.T) {
	c := startTLSCluster(t)
	admin := c.verifyFull(localpg.User)

	// The hba rules hold: without TLS nobody gets in over TCP.
	if conn, err := pgx.Connect(t.Context(), c.dsn(localpg.User, "127.0.0.1", "sslmode=disable")); err == nil {
		conn.Close(t.Context())
		t.Fatal("a connection without TLS was accepted; the test would prove nothing")
	}

	t.Run("run publishes", func(t *testing.T) {
		runPublishes(t, c, admin, admin)
	})

	t.Run("admin commands", func(t *testing.T) {
		env := childEnv("WALRELAY_POSTGRES_DSN=" + admin)
		if out := strings.TrimSpace(wantOK(t, env, "lsn")); !lsnPattern.MatchString(out) {
			t.Errorf("lsn over verify-full printed %q", out)
		}
		if out := wantOK(t, env, "slot", "inspect", "walrelay"); !strings.Contains(out, "pgoutput") {
			t.Errorf("slot inspect over verify-full:\n%s", out)
		}
	})

	other := testenv.NewCA(t, "some other CA").CertFile(t)
	wrongCA := c.dsn(localpg.User, "localhost", "sslmode=verify-full", "sslrootcert="+other)
	wrongHost := c.dsn(localpg.User, "127.0.0.1", "sslmode=verify-full", "sslrootcert="+c.caFile)
	for _, cmd := range [][]string{{"run"}, {"lsn"}, {"setup"}} {
		t.Run(strings.Join(cmd, " ")+" wrong CA", func(t *testing.T) {
			wantCertFailure(t, wrongCA, nil, cmd, "unknown authority")
		})
		t.Run(strings.Join(cmd, " ")+" wrong host name", func(t *testing.T) {
			wantCertFailure(t, wrongHost, nil, cmd, "cannot validate certificate for 127.0.0.1")
		})
	}
	// The server presents a certificate for another DNS name.
	t.Run("certificate for another name", func(t *testing.T) {
		c.installServerCert(t, c.ca.Issue(t, "pg-elsewhere", "db.example.internal"))
		c.reload(t, admin)
		for _, cmd := range [][]string{{"run"}, {"lsn"}} {
			wantCertFailure(t, admin, nil, cmd, "certificate is valid for db.example.internal, not localhost")
		}
	})
	// The DSN's certificate files are read when the configuration is
	// loaded: a missing one is invalid configuration (exit 2, before
	// connecting), naming the option and the file.
	t.Run("missing CA file", func(t *testing.T) {
		env := childEnv("WALRELAY_POSTGRES_DSN="+c.dsn(localpg.User, "localhost", "sslmode=verify-full", "sslrootcert="+filepath.Join(t.TempDir(), "nope.crt")), "WALRELAY_LOG_LEVEL=warn")
		for _, cmd := range []string{"lsn", "config"} {
			stdout, stderr, code := walrelay(t, env, cmd)
			t.Logf("walrelay %s: %s", cmd, stderr)
			wantFailure(t, stdout, stderr, code, 2, "postgres.dsn", "nope.crt")
		}
	})
}

// Client certificate authentication (pg_hba `hostssl ... cert`): the role
// named by the certificate's CN connects with sslcert and sslkey in the
// DSN, for replication too; without a certificate it is refused.
func TestPostgresTLSClientCertificate(t *testing.T) {
	c := startTLSCluster(t)
	admin := c.verifyFull(localpg.User)
	role := leastPrivilegeRole(t, admin)
	client := c.ca.Issue(t, role, role) // CN = the role
	c.setHBA(t, admin, "hostssl all "+role+" 127.0.0.1/32 cert clientcert=verify-full")
	testenv.Exec(t, admin, `ALTER SYSTEM SET ssl_ca_file = 'ca.crt'`)
	if err := os.WriteFile(filepath.Join(c.cluster.DataDir(), "ca.crt"), c.ca.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	c.reload(t, admin)

	withCert := c.verifyFull(role, "sslcert="+client.CertFile, "sslkey="+client.KeyFile)
	t.Run("run publishes", func(t *testing.T) {
		runPublishes(t, c, withCert, admin)
	})
	t.Run("admin command", func(t *testing.T) {
		if out := strings.TrimSpace(wantOK(t, childEnv("WALRELAY_POSTGRES_DSN="+withCert), "lsn")); !lsnPattern.MatchString(out) {
			t.Errorf("lsn with a client certificate printed %q", out)
		}
	})
	t.Run("no client certificate", func(t *testing.T) {
		wantCertFailure(t, c.verifyFull(role), nil, []string{"lsn"}, "requires a valid client certificate")
	})
	t.Run("another role's certificate", func(t *testing.T) {
		other := c.ca.Issue(t, "someone-else", "someone-else")
		wantCertFailure(t, c.verifyFull(role, "sslcert="+other.CertFile, "sslkey="+other.KeyFile), nil, []string{"lsn"}, "certificate authentication failed")
	})
}
