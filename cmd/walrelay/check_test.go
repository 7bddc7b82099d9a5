package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/pkg/admin"
	"github.com/walrelay/walrelay/pkg/localpg"
	sqlfiles "github.com/walrelay/walrelay/sql"
)

type checkResult struct {
	OK    bool
	Items []admin.Item
}

// item returns the check item called name.
func (c checkResult) item(t *testing.T, name string) admin.Item {
	t.Helper()
	for _, it := range c.Items {
		if it.Name == name {
			return it
		}
	}
	t.Fatalf("no check item %q in %+v", name, c.Items)
	return admin.Item{}
}

// `walrelay check` passes (exit 0) on a correctly set up database with a
// reachable broker, and fails, naming the items and their fixes, for a
// role without REPLICATION or SELECT and for a broker nobody answers on.
func TestCheck(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	setupOutbox(t, dsn)
	insertEvents(t, dsn, "order")
	broker := testenv.Kafka(t)
	brokers := "WALRELAY_KAFKA_BROKERS=" + strings.Join(broker.Addrs(), ",")
	env := childEnv("WALRELAY_POSTGRES_DSN="+dsn, brokers)

	t.Run("passes", func(t *testing.T) {
		out := wantOK(t, env, "check")
		for _, want := range []string{"ok    wal_level", "ok    server version", "ok    slot walrelay", "ok    kafka brokers", "warn  max_slot_wal_keep_size", "fix: set a cap", "ok    topic outbox.event.order", "ok    topic walrelay.deadletter"} {
			if !strings.Contains(out, want) {
				t.Errorf("check output lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "fail") {
			t.Errorf("check output has a failure:\n%s", out)
		}
		c := decodeJSON[checkResult](t, wantOK(t, env, "check", "-o", "json"))
		want := []string{"server version", "wal_level", "max_replication_slots", "max_wal_senders", "role REPLICATION", "SELECT on public.outbox",
			"publication walrelay_outbox", "outbox columns", "slot walrelay", "max_slot_wal_keep_size", "kafka brokers"}
		for _, name := range want {
			if it := c.item(t, name); it.Status == admin.Fail {
				t.Errorf("item %+v failed", it)
			}
		}
		if !c.OK {
			t.Errorf("check -o json: ok=false: %+v", c.Items)
		}
	})

	t.Run("fails without privileges or a broker", func(t *testing.T) {
		role := createRole(t, dsn)
		stdout, stderr, code := walrelay(t, childEnv("WALRELAY_POSTGRES_DSN="+withUser(t, dsn, role), "WALRELAY_KAFKA_BROKERS=127.0.0.1:"+closedPort(t)), "check", "-o", "json")
		wantFailure(t, stdout, stderr, code, 1, "check failed")
		c := decodeJSON[checkResult](t, stdout)
		for _, w := range []struct{ name, fix string }{
			{"role REPLICATION", `ALTER ROLE "` + role + `" REPLICATION`},
			{"SELECT on public.outbox", `GRANT SELECT ON "public"."outbox" TO "` + role + `"`},
			{"kafka brokers", "check kafka.brokers"},
		} {
			if it := c.item(t, w.name); it.Status != admin.Fail || !strings.Contains(it.Fix, w.fix) {
				t.Errorf("item %+v: want fail with fix %q", it, w.fix)
			}
		}
		if c.OK {
			t.Error("check -o json: ok=true with failures")
		}
	})

	t.Run("inert router option", func(t *testing.T) {
		stdout, stderr, code := walrelay(t, childEnv("WALRELAY_POSTGRES_DSN="+dsn, brokers,
			"WALRELAY_ROUTER_TRACING_OPERATION_NAME=outbox-read", "WALRELAY_CONVERTER_KEY=json"), "check")
		if code != 0 {
			t.Fatalf("exit %d, stderr %s\n%s", code, stderr, stdout)
		}
		for _, want := range []string{"warn  router option tracing.operation.name", "walrelay starts no spans"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("check output lacks %q:\n%s", want, stdout)
			}
		}
	})

	t.Run("publication and columns", func(t *testing.T) {
		stdout, stderr, code := walrelay(t, childEnv("WALRELAY_POSTGRES_DSN="+dsn, brokers, "WALRELAY_POSTGRES_PUBLICATIONS=nopub", "WALRELAY_ROUTER_TABLE_FIELD_EVENT_KEY=aggregate_id", "WALRELAY_POSTGRES_CREATE_SLOT=false", "WALRELAY_POSTGRES_SLOT=noslot"), "check")
		wantFailure(t, stdout, stderr, code, 1, "check failed")
		for _, want := range []string{
			`fail  publication nopub`, `CREATE PUBLICATION "nopub" FOR TABLE "public"."outbox" WITH (publish = 'insert');`,
			"fail  outbox columns", "aggregate_id",
			"fail  slot noslot", "walrelay slot create noslot",
		} {
			if !strings.Contains(stdout, want) {
				t.Errorf("check output lacks %q:\n%s", want, stdout)
			}
		}
	})
}

// On a cluster with wal_level=replica, `walrelay check` fails that item
// with the fix. The same cluster checks password authentication: a wrong
// password is one clear line that never shows the password.
func TestCheckWALLevelReplicaAndWrongPassword(t *testing.T) {
	cluster := testenv.PrivateCluster(t, localpg.Options{Settings: map[string]string{"wal_level": "replica"}})
	dsn := cluster.DSN("postgres")
	testenv.Exec(t, dsn, sqlfiles.OutboxTable)
	testenv.Exec(t, dsn, `CREATE PUBLICATION walrelay_outbox FOR TABLE public.outbox WITH (publish = 'insert')`)
	const password = "R1ghtPassw0rd"
	testenv.Exec(t, dsn, `CREATE ROLE pwuser LOGIN REPLICATION PASSWORD '`+password+`'`)
	testenv.Exec(t, dsn, `GRANT SELECT ON public.outbox TO pwuser`)
	hba := filepath.Join(cluster.DataDir(), "pg_hba.conf")
	old, err := os.ReadFile(hba)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hba, append([]byte("host all pwuser 127.0.0.1/32 scram-sha-256\n"), old...), 0o600); err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, dsn, `SELECT pg_reload_conf()`)
	broker := testenv.Kafka(t)
	brokers := "WALRELAY_KAFKA_BROKERS=" + strings.Join(broker.Addrs(), ",")
	good := withPassword(t, withUser(t, dsn, "pwuser"), password, "")
	bad := withPassword(t, withUser(t, dsn, "pwuser"), "Wr0ngPassw0rd", "")

	stdout, stderr, code := walrelay(t, childEnv("WALRELAY_POSTGRES_DSN="+good, brokers), "check")
	wantFailure(t, stdout, stderr, code, 1, "check failed")
	for _, want := range []string{"fail  wal_level", "wal_level is replica; logical decoding needs logical", "fix: set wal_level = logical", "restart Postgres", "ok    role REPLICATION", "ok    SELECT on public.outbox", "ok    publication walrelay_outbox"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("check output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, password) {
		t.Errorf("check output contains the password:\n%s", stdout)
	}

	for _, args := range [][]string{{"slot", "list"}, {"lsn"}, {"slot", "peek", "walrelay"}} {
		stdout, stderr, code := walrelay(t, childEnv("WALRELAY_POSTGRES_DSN="+bad, brokers), args...)
		wantFailure(t, stdout, stderr, code, 1, `password authentication failed for user "pwuser"`, "fix the password in postgres.dsn")
		if strings.Contains(stderr+stdout, "Wr0ngPassw0rd") {
			t.Errorf("walrelay %v shows the password:\n%s", args, stderr)
		}
	}
	stdout, stderr, code = walrelay(t, childEnv("WALRELAY_POSTGRES_DSN="+bad, brokers), "check")
	wantFailure(t, stdout, stderr, code, 1, "check failed")
	if !strings.Contains(stdout, "fail  postgres connection") || !strings.Contains(stdout, "password authentication failed") || strings.Contains(stdout, "Wr0ngPassw0rd") {
		t.Errorf("check with a wrong password:\n%s", stdout)
	}
}
