package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/operator"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/testenv"
)

// Least privilege (docs/deploy.md): `walrelay run` and every read-only
// operator command work as a role that has only what sql/004_role.sql
// grants (LOGIN, REPLICATION, USAGE on the schema, SELECT on the outbox).
// The test cluster trusts every connection, so the role has no password;
// what is tested is the privileges.

// roleSQL is sql/004_role.sql's statements (comments dropped) for role.
func roleSQL(t *testing.T, role string) string {
	t.Helper()
	b, err := os.ReadFile("../../sql/004_role.sql")
	if err != nil {
		t.Fatal(err)
	}
	var stmts []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "--") {
			stmts = append(stmts, l)
		}
	}
	sql := strings.Join(stmts, "\n")
	if !strings.Contains(sql, "CREATE ROLE walrelay WITH LOGIN REPLICATION;") {
		t.Fatalf("sql/004_role.sql no longer creates role walrelay as this test expects:\n%s", sql)
	}
	return regexp.MustCompile(`\bwalrelay\b`).ReplaceAllLiteralString(sql, pgx.Identifier{role}.Sanitize())
}

// leastPrivilegeRole creates a role with exactly what sql/004_role.sql
// grants, dropped at cleanup, and checks it can do nothing more.
func leastPrivilegeRole(t *testing.T, dsn string) string {
	t.Helper()
	role := testenv.UniqueName(t, "lp")
	t.Cleanup(func() { dropRole(dsn, role) })
	testenv.Exec(t, dsn, roleSQL(t, role))
	got := testenv.QueryValue[string](t, dsn, `SELECT concat_ws(',',
			CASE WHEN rolsuper THEN 'super' END, CASE WHEN rolcreatedb THEN 'createdb' END,
			CASE WHEN rolcreaterole THEN 'createrole' END, CASE WHEN rolbypassrls THEN 'bypassrls' END,
			CASE WHEN rolreplication THEN 'replication' END, CASE WHEN rolcanlogin THEN 'login' END,
			CASE WHEN has_table_privilege(oid, 'public.outbox', 'INSERT,UPDATE,DELETE,TRUNCATE') THEN 'write' END,
			CASE WHEN has_database_privilege(oid, current_database(), 'CREATE') THEN 'createdb-objects' END,
			CASE WHEN has_schema_privilege(oid, 'public', 'CREATE') THEN 'create-in-public' END,
			CASE WHEN pg_has_role(oid, 'pg_read_all_data', 'USAGE') OR pg_has_role(oid, 'pg_monitor', 'USAGE') THEN 'predefined' END)
		FROM pg_roles WHERE rolname = $1`, role)
	if got != "replication,login" {
		t.Fatalf("role %s has %q, want only replication,login (and SELECT on the outbox)", role, got)
	}
	return role
}

// dropRole drops role and everything it owns in dsn's database, best
// effort: it runs at cleanup, when the server may be gone.
func dropRole(dsn, role string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	_, _ = conn.Exec(ctx, "DROP OWNED BY "+pgx.Identifier{role}.Sanitize())
	_, _ = conn.Exec(ctx, "DROP ROLE "+pgx.Identifier{role}.Sanitize())
}

// waitStreaming waits until slot walrelay is active, failing at once if
// the relay exits first.
func waitStreaming(t *testing.T, relay *child, dsn string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !testenv.QueryValue[bool](t, dsn, `SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = 'walrelay' AND active)`) {
		if relay.exited() || time.Now().After(deadline) {
			t.Fatalf("walrelay run never streamed (exited=%t, code %d):\n%s", relay.exited(), relay.code, relay.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// metricValue scrapes the relay's /metrics and returns a sample's value
// (-1 when absent).
func metricValue(t *testing.T, listen, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + listen + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// stopRelay sends SIGTERM and expects a clean exit.
func stopRelay(t *testing.T, c *child) {
	t.Helper()
	c.signal(t, syscall.SIGTERM)
	if code := c.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("walrelay run exited %d after SIGTERM:\n%s", code, c.stderr.String())
	}
}

// After a superuser ran `walrelay setup`, the role from sql/004_role.sql
// runs every read-only operator command and `walrelay run`, which
// publishes events end to end and confirms them, without a single
// privilege error.
func TestLeastPrivilege(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	broker := testenv.Kafka(t)
	prefix := testenv.UniqueName(t, "lp")
	wantOK(t, childEnv("WALRELAY_POSTGRES_DSN="+dsn), "setup")
	role := leastPrivilegeRole(t, dsn)
	first := insertEvents(t, dsn, "order", "customer") // waiting in the slot

	listen := "127.0.0.1:" + closedPort(t)
	env := childEnv(
		"WALRELAY_POSTGRES_DSN="+withUser(t, dsn, role),
		"WALRELAY_KAFKA_BROKERS="+strings.Join(broker.Addrs(), ","),
		"WALRELAY_HTTP_LISTEN="+listen,
		"WALRELAY_POSTGRES_STATUS_INTERVAL=100ms",
		"WALRELAY_ROUTER_ROUTE_TOPIC_REPLACEMENT="+prefix+".${routedByValue}",
	)
	topics := []string{prefix + ".order", prefix + ".customer"}

	t.Run("read-only commands", func(t *testing.T) {
		c := decodeJSON[checkResult](t, wantOK(t, env, "check", "-o", "json"))
		for _, it := range c.Items {
			if it.Status == operator.Fail {
				t.Errorf("check item failed for the least-privilege role: %+v", it)
			}
			if it.Status != operator.OK {
				t.Logf("check warns: %s: %s", it.Name, it.Detail)
			}
		}
		for _, name := range []string{"role REPLICATION", "SELECT on public.outbox", "publication walrelay_outbox", "outbox columns", "slot walrelay"} {
			if it := c.item(t, name); it.Status != operator.OK {
				t.Errorf("check item %+v: want ok for the least-privilege role", it)
			}
		}

		if out := wantOK(t, env, "slot", "list"); !regexp1(out, `(?m)^walrelay\s+pgoutput\s+`+dbName(t, dsn)+`\s`) {
			t.Errorf("slot list lacks walrelay:\n%s", out)
		}
		if s := decodeJSON[postgres.Slot](t, wantOK(t, env, "slot", "inspect", "walrelay", "-o", "json")); s.Name != "walrelay" || s.ConfirmedFlushLagBytes == nil || s.RestartLagBytes == nil {
			t.Errorf("slot inspect as %s = %+v", role, s)
		}
		before := slotLSN(t, dsn, "walrelay")
		for _, args := range [][]string{{"slot", "peek", "walrelay", "-o", "json"}, {"slot", "peek", "walrelay", "--copy", "-o", "json"}} {
			res := decodeJSON[operator.PeekResult](t, wantOK(t, env, args...))
			var ids []string
			for _, ev := range res.Events {
				ids = append(ids, ev.ID)
			}
			if !slices.Equal(ids, first) {
				t.Errorf("walrelay %v as %s shows %v, want %v", args, role, ids, first)
			}
		}
		if after := slotLSN(t, dsn, "walrelay"); after != before {
			t.Errorf("peek moved the slot from %s to %s", before, after)
		}
		if out := strings.TrimSpace(wantOK(t, env, "lsn")); !lsnPattern.MatchString(out) {
			t.Errorf("lsn as %s printed %q", role, out)
		}
		if out := wantOK(t, env, "lsn", "diff", "0/2000000", "0/1000000"); out != "16777216 bytes (16.0 MiB)\n" {
			t.Errorf("lsn diff printed %q", out)
		}
		// The relay is stopped: status exits 1 for it, and shows the slot.
		stdout, stderr, code := walrelay(t, env, "status", "-o", "json")
		wantFailure(t, stdout, stderr, code, 1, "the relay could not be read")
		st := decodeJSON[statusResult](t, stdout)
		if st.Slot == nil || st.Slot.Name != "walrelay" || st.SlotError != "" {
			t.Errorf("status as %s (relay stopped) = %+v", role, st)
		}
	})

	t.Run("run", func(t *testing.T) {
		relay := startChild(t, env, "run")
		waitStreaming(t, relay, dsn)
		second := insertEvents(t, dsn, "order")
		recs := broker.ReadAll(t, topics, 3, 60*time.Second)
		var got []string
		for _, r := range recs {
			got = append(got, testenv.Header(r, "id"))
		}
		for _, id := range append(slices.Clone(first), second...) {
			if !slices.Contains(got, id) {
				t.Errorf("event %s not published as %s; got %v", id, role, got)
			}
		}
		testenv.WaitCaughtUp(t, dsn, "walrelay", 30*time.Second)

		// While it streams: status shows both sides, slot list the holder.
		st := decodeJSON[statusResult](t, wantOK(t, env, "status", "-o", "json"))
		if st.Relay == nil || !st.Relay.Streaming || st.Slot == nil || !st.Slot.Active {
			t.Errorf("status as %s while running = %+v", role, st)
		}
		if out := wantOK(t, env, "slot", "list"); !regexp1(out, `(?m)^walrelay\s+pgoutput\s+\S+\s+yes\s`) {
			t.Errorf("slot list while running does not show walrelay active:\n%s", out)
		}
		stopRelay(t, relay)
		for _, bad := range []string{"permission denied", "must be superuser", "level=ERROR"} {
			if strings.Contains(relay.stderr.String(), bad) {
				t.Errorf("walrelay run as %s logged %q:\n%s", role, bad, relay.stderr.String())
			}
		}
		// The role recorded what it confirmed in walrelay's slot record
		// (sql/005_slot_positions.sql; 004 grants it): without the
		// record retention would stay stopped. setup created the slot
		// (created_lsn); the run role moved confirmed_lsn past it, up
		// to the slot's own position.
		rec := testenv.QueryValue[string](t, dsn, `SELECT concat_ws(' ', r.confirmed_lsn > r.created_lsn, r.confirmed_lsn >= s.confirmed_flush_lsn, r.jumped_at IS NULL)
			FROM public.walrelay_slot_positions r JOIN pg_replication_slots s USING (slot_name) WHERE slot_name = 'walrelay'`)
		if rec != "t t t" {
			t.Errorf("walrelay_slot_positions after run as %s: confirmed past created, at or past the slot, no jump = %q, want \"t t t\"", role, rec)
		}
	})
}

// Heartbeats (relay.heartbeat_interval) call pg_logical_emit_message,
// which Postgres lets PUBLIC execute: they work for the least-privilege
// role as is. Where EXECUTE was revoked from PUBLIC, heartbeats fail with
// a logged error (the relay keeps streaming) until the grant documented
// in docs/deploy.md is made.
func TestLeastPrivilegeHeartbeats(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	broker := testenv.Kafka(t)
	prefix := testenv.UniqueName(t, "hb")
	wantOK(t, childEnv("WALRELAY_POSTGRES_DSN="+dsn), "setup")
	role := leastPrivilegeRole(t, dsn)
	listen := "127.0.0.1:" + closedPort(t)
	env := childEnv(
		"WALRELAY_POSTGRES_DSN="+withUser(t, dsn, role),
		"WALRELAY_KAFKA_BROKERS="+strings.Join(broker.Addrs(), ","),
		"WALRELAY_HTTP_LISTEN="+listen,
		"WALRELAY_POSTGRES_STATUS_INTERVAL=100ms",
		"WALRELAY_RELAY_HEARTBEAT_INTERVAL=100ms",
		"WALRELAY_ROUTER_ROUTE_TOPIC_REPLACEMENT="+prefix+".${routedByValue}",
	)
	const emit = "pg_catalog.pg_logical_emit_message(boolean, text, text)"
	heartbeatsBack := func(t *testing.T, relay *child) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for metricValue(t, listen, "walrelay_heartbeats_received_total") < 2 {
			if time.Now().After(deadline) || relay.exited() {
				t.Fatalf("no heartbeats came back as %s (exited=%t):\n%s", role, relay.exited(), relay.stderr.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	t.Run("default privileges", func(t *testing.T) {
		relay := startChild(t, env, "run")
		heartbeatsBack(t, relay)
		stopRelay(t, relay)
		if s := relay.stderr.String(); strings.Contains(s, "emitting heartbeat") {
			t.Errorf("heartbeat errors as %s:\n%s", role, s)
		}
	})

	// Function privileges live in each database's catalog: this revoke
	// affects the test's database only.
	testenv.Exec(t, dsn, "REVOKE EXECUTE ON FUNCTION "+emit+" FROM PUBLIC")

	t.Run("EXECUTE revoked", func(t *testing.T) {
		relay := startChild(t, env, "run")
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(relay.stderr.String(), "permission denied for function pg_logical_emit_message") {
			if time.Now().After(deadline) || relay.exited() {
				t.Fatalf("no heartbeat error logged without EXECUTE (exited=%t):\n%s", relay.exited(), relay.stderr.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		// The relay keeps streaming without heartbeats.
		ids := insertEvents(t, dsn, "order")
		if recs := broker.ReadAll(t, []string{prefix + ".order"}, 1, 30*time.Second); testenv.Header(recs[0], "id") != ids[0] {
			t.Errorf("published %s, want %s", testenv.Header(recs[0], "id"), ids[0])
		}
		if n := metricValue(t, listen, "walrelay_heartbeats_sent_total"); n != 0 {
			t.Errorf("walrelay_heartbeats_sent_total = %v without EXECUTE, want 0", n)
		}
		stopRelay(t, relay)
		if n := strings.Count(relay.stderr.String(), "emitting heartbeat"); n != 1 {
			t.Errorf("the heartbeat error was logged %d times, want once per episode:\n%s", n, relay.stderr.String())
		}
	})

	testenv.Exec(t, dsn, "GRANT EXECUTE ON FUNCTION "+emit+" TO "+pgx.Identifier{role}.Sanitize())

	t.Run("EXECUTE granted to the role", func(t *testing.T) {
		relay := startChild(t, env, "run")
		heartbeatsBack(t, relay)
		stopRelay(t, relay)
	})
}

// The exact privileges `walrelay setup` needs (docs/deploy.md), each
// shown necessary: without it setup fails at its object, naming the
// privilege; with all of them it creates everything. Then the run role
// from sql/004_role.sql re-runs setup as a harmless check (everything
// already exists).
func TestSetupPrivileges(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	role := createRole(t, dsn) // LOGIN only
	env := childEnv("WALRELAY_POSTGRES_DSN=" + withUser(t, dsn, role))
	r := pgx.Identifier{role}.Sanitize()
	steps := []struct {
		lacking string
		want    []string // in setup's one-line error
		grant   string
	}{
		{"CREATE on the schema", []string{"creating table", "permission denied for schema public"}, "GRANT CREATE ON SCHEMA public TO " + r},
		{"CREATE on the database", []string{"creating publication", "permission denied for database"}, "GRANT CREATE ON DATABASE " + pgx.Identifier{dbName(t, dsn)}.Sanitize() + " TO " + r},
		{"REPLICATION", []string{"creating replication slot", "must be superuser or replication role"}, "ALTER ROLE " + r + " REPLICATION"},
	}
	for _, s := range steps {
		stdout, stderr, code := walrelay(t, env, "setup")
		if code != 1 {
			t.Fatalf("setup without %s: exit %d, want 1\n%s%s", s.lacking, code, stdout, stderr)
		}
		last := lastLine(stderr)
		for _, w := range s.want {
			if !strings.Contains(last, w) {
				t.Errorf("setup without %s: error %q lacks %q", s.lacking, last, w)
			}
		}
		testenv.Exec(t, dsn, s.grant)
	}
	// Each failed run created what it could; this one creates the slot.
	out := wantOK(t, env, "setup")
	if !regexp1(out, `(?m)^slot\s+walrelay\s+created$`) || strings.Count(out, "already exists") != 3 {
		t.Errorf("setup with the documented privileges:\n%s", out)
	}
	// The slot was recorded in walrelay_slot_positions, which the role
	// created (sql/005_slot_positions.sql) in the schema it may create in.
	if rec := testenv.QueryValue[string](t, dsn, `SELECT concat_ws(' ', (SELECT tableowner FROM pg_tables WHERE schemaname = 'public' AND tablename = 'walrelay_slot_positions'),
			(SELECT created_lsn IS NOT NULL FROM public.walrelay_slot_positions WHERE slot_name = 'walrelay'))`); rec != role+" t" {
		t.Errorf("walrelay_slot_positions after setup as %s: owner and created_lsn recorded = %q, want %q", role, rec, role+" t")
	}
	// The role created and owns the table and the publication.
	if owners := testenv.QueryValue[string](t, dsn, `SELECT (SELECT tableowner FROM pg_tables WHERE schemaname = 'public' AND tablename = 'outbox') || ' ' ||
			(SELECT pubowner::regrole::text FROM pg_publication WHERE pubname = 'walrelay_outbox')`); owners != role+" "+role {
		t.Errorf("outbox and publication owned by %s, want %s", owners, role)
	}

	runRole := leastPrivilegeRole(t, dsn)
	out = wantOK(t, childEnv("WALRELAY_POSTGRES_DSN="+withUser(t, dsn, runRole)), "setup")
	if strings.Count(out, "already exists") != 4 {
		t.Errorf("setup as the run role after setup:\n%s", out)
	}
}

// The DBA alternative: a superuser applies sql/001 to sql/004 by hand
// (as docker-compose.yml's init does); walrelay never needs more than the
// run role, and `walrelay check` as that role finds everything in place.
func TestSQLFilesByHand(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	for _, f := range []string{"001_outbox_table.sql", "002_publication.sql", "003_slot.sql", "005_slot_positions.sql"} {
		b, err := os.ReadFile("../../sql/" + f)
		if err != nil {
			t.Fatal(err)
		}
		testenv.Exec(t, dsn, string(b))
	}
	role := leastPrivilegeRole(t, dsn)
	broker := testenv.Kafka(t)
	env := childEnv("WALRELAY_POSTGRES_DSN="+withUser(t, dsn, role), "WALRELAY_KAFKA_BROKERS="+strings.Join(broker.Addrs(), ","), "WALRELAY_POSTGRES_CREATE_SLOT=false")
	if out := wantOK(t, env, "setup"); strings.Count(out, "already exists") != 4 {
		t.Errorf("setup as the run role after the SQL files:\n%s", out)
	}
	c := decodeJSON[checkResult](t, wantOK(t, env, "check", "-o", "json"))
	if !c.OK {
		t.Errorf("check as the run role after the SQL files: %+v", c.Items)
	}
}
