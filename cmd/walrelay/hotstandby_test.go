package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/testenv"
)

// Decoding from a hot standby: `walrelay setup` and `walrelay check` with
// postgres.dsn on the standby and postgres.primary_dsn on the primary.
// Each test makes its own primary (WALRELAY_PG_BIN's major) and hot
// standby; one run with WALRELAY_PG_BIN set to a 16, 17 or 18 bin
// directory covers that major (14 or 15 for the refusals).

// newPrimaryAndStandby starts a primary and a hot standby of it
// (standbySettings over localpg's standby defaults), skipping when the
// major is outside [minMajor, maxMajor] (0: no bound). It returns the
// DSNs of both and the major.
func newPrimaryAndStandby(t *testing.T, minMajor, maxMajor int, standbySettings map[string]string) (primary, standby string, major int) {
	t.Helper()
	p := testenv.PrivateCluster(t, localpg.Options{})
	major = int(testenv.QueryValue[int32](t, p.DSN("postgres"), `SELECT current_setting('server_version_num')::int`)) / 10000
	if minMajor > 0 && major < minMajor {
		t.Skipf("decoding from a standby needs PostgreSQL %d or newer; this server (WALRELAY_PG_BIN) is %d: run with WALRELAY_PG_BIN set to a 16, 17 or 18 bin directory", minMajor, major)
	}
	if maxMajor > 0 && major > maxMajor {
		t.Skipf("this test needs a PostgreSQL %d or older standby; this server (WALRELAY_PG_BIN) is %d", maxMajor, major)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := p.NewStandby(ctx, localpg.StandbyOptions{Slot: "standby1", Settings: standbySettings})
	if err != nil {
		t.Fatalf("making a hot standby: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing the standby: %v", err)
		}
	})
	return p.DSN("postgres"), s.DSN("postgres"), major
}

// objectCounts are what walrelay creates, counted on one server.
func objectCounts(t *testing.T, dsn string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for what, q := range map[string]string{
		"outbox table":  "SELECT count(*) FROM pg_class WHERE relname = 'outbox'",
		"slot records":  "SELECT count(*) FROM pg_class WHERE relname = 'walrelay_slot_positions'",
		"publication":   "SELECT count(*) FROM pg_publication WHERE pubname = 'walrelay_outbox'",
		"logical slots": "SELECT count(*) FROM pg_replication_slots WHERE slot_type = 'logical'",
	} {
		out[what] = testenv.QueryValue[int64](t, dsn, q)
	}
	return out
}

// With postgres.primary_dsn, setup creates the table, the publication and
// walrelay's slot records on the primary and the slot on the standby
// (after the standby replayed the publication), and records the slot's
// creation on the primary. Without it, setup against a standby refuses in
// one line before creating anything (it failed with CREATE TABLE in a
// read-only transaction). A second setup finds everything.
func TestStandbySetupCreatesEachObjectWhereItBelongs(t *testing.T) {
	primary, standby, _ := newPrimaryAndStandby(t, 16, 0, nil)
	brokers := "WALRELAY_KAFKA_BROKERS=127.0.0.1:1"

	stdout, stderr, code := walrelay(t, childEnv("WALRELAY_POSTGRES_DSN="+standby, brokers), "setup")
	t.Logf("setup against the standby alone: exit %d\n%s%s", code, stdout, stderr)
	wantFailure(t, stdout, stderr, code, 1, "walrelay: setup: ", "postgres.dsn is a hot standby", "set postgres.primary_dsn", "nothing was created")
	if got := objectCounts(t, primary); got["outbox table"]+got["publication"]+got["slot records"]+got["logical slots"] != 0 {
		t.Errorf("after the refused setup the primary has %v", got)
	}

	env := childEnv("WALRELAY_POSTGRES_DSN="+standby, "WALRELAY_POSTGRES_PRIMARY_DSN="+primary, brokers)
	start := time.Now()
	stdout, stderr, code = walrelay(t, env, "setup")
	took := time.Since(start)
	t.Logf("setup with primary_dsn: exit %d in %s\n%s%s", code, took.Round(time.Millisecond), stdout, stderr)
	if code != 0 {
		t.Fatalf("setup exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"table", "publication", "records", "slot"} {
		if !regexp.MustCompile(`(?m)^` + want + `\s+\S+\s+created$`).MatchString(stdout) {
			t.Errorf("setup output lacks %q created:\n%s", want, stdout)
		}
	}
	p, s := objectCounts(t, primary), objectCounts(t, standby)
	for what, want := range map[string]int64{"outbox table": 1, "publication": 1, "slot records": 1, "logical slots": 0} {
		if p[what] != want {
			t.Errorf("primary: %d %s, want %d", p[what], what, want)
		}
	}
	if s["logical slots"] != 1 {
		t.Errorf("standby: %d logical slots, want 1", s["logical slots"])
	}
	slot := testenv.QueryValue[string](t, standby, `SELECT plugin || ' ' || database || ' ' || confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 'walrelay'`)
	rec := testenv.QueryValue[string](t, primary, `SELECT confirmed_lsn::text || ' ' || created_lsn::text || ' ' || note FROM walrelay_slot_positions WHERE slot_name = 'walrelay'`)
	t.Logf("standby's slot: %s; record on the primary: %s", slot, rec)
	f := strings.Fields(slot)
	if len(f) != 3 || f[0] != "pgoutput" || f[1] != "postgres" || !strings.HasPrefix(rec, f[2]+" "+f[2]+" created by walrelay setup") {
		t.Errorf("standby's slot %q, record on the primary %q: want a pgoutput slot whose position the record holds", slot, rec)
	}

	stdout, stderr, code = walrelay(t, env, "setup")
	if code != 0 || strings.Contains(stdout, "created") {
		t.Errorf("second setup: exit %d, want everything found\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// walrelay check on a standby reports what decoding there needs: the
// standby itself (16+), hot_standby_feedback (off is a failure with the
// fix), the primary (postgres.primary_dsn) and its wal_level, and the
// standby's physical slot on the primary.
func TestStandbyCheckItems(t *testing.T) {
	primary, standby, _ := newPrimaryAndStandby(t, 16, 0, map[string]string{"hot_standby_feedback": "off"})
	brokers := "WALRELAY_KAFKA_BROKERS=127.0.0.1:1"
	env := childEnv("WALRELAY_POSTGRES_DSN="+standby, "WALRELAY_POSTGRES_PRIMARY_DSN="+primary, brokers)
	if _, _, code := walrelay(t, env, "setup"); code != 0 {
		t.Fatalf("setup exit %d", code)
	}
	item := func(status, name string) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^` + status + `\s+` + regexp.QuoteMeta(name) + `\s`)
	}
	stdout, _, _ := walrelay(t, env, "check")
	t.Logf("check with hot_standby_feedback=off:\n%s", stdout)
	for _, w := range []struct{ status, name, detail string }{
		{"ok", "standby decoding", "postgres.dsn is a hot standby running PostgreSQL"},
		{"fail", "hot_standby_feedback", "hot_standby_feedback is off on the standby"},
		{"ok", "primary connection", "postgres.primary_dsn is the standby's primary"},
		{"ok", "primary wal_level", "logical"},
		{"ok", "standby's physical slot", `"standby1" on the primary, active`},
	} {
		if !item(w.status, w.name).MatchString(stdout) || !strings.Contains(stdout, w.detail) {
			t.Errorf("check output lacks %s %s (%s):\n%s", w.status, w.name, w.detail, stdout)
		}
	}
	if !strings.Contains(stdout, "ALTER SYSTEM SET hot_standby_feedback = on") {
		t.Errorf("check output lacks the fix for hot_standby_feedback:\n%s", stdout)
	}

	testenv.Exec(t, standby, `ALTER SYSTEM SET hot_standby_feedback = on`)
	testenv.Exec(t, standby, `SELECT pg_reload_conf()`)
	deadline := time.Now().Add(10 * time.Second)
	for testenv.QueryValue[string](t, standby, `SHOW hot_standby_feedback`) != "on" {
		if time.Now().After(deadline) {
			t.Fatal("hot_standby_feedback did not become on")
		}
		time.Sleep(50 * time.Millisecond)
	}
	stdout, _, _ = walrelay(t, env, "check")
	if !item("ok", "hot_standby_feedback").MatchString(stdout) {
		t.Errorf("after hot_standby_feedback=on, check does not report it ok:\n%s", stdout)
	}

	// Without postgres.primary_dsn the standby is reported, and the
	// missing primary is a failure with the fix.
	stdout, _, _ = walrelay(t, childEnv("WALRELAY_POSTGRES_DSN="+standby, brokers), "check")
	if !item("fail", "postgres.primary_dsn").MatchString(stdout) || !strings.Contains(stdout, "set postgres.primary_dsn") {
		t.Errorf("check on a standby without primary_dsn lacks the failed postgres.primary_dsn item:\n%s", stdout)
	}
	// A primary as postgres.dsn with postgres.primary_dsn set is refused.
	stdout, _, _ = walrelay(t, childEnv("WALRELAY_POSTGRES_DSN="+primary, "WALRELAY_POSTGRES_PRIMARY_DSN="+primary, brokers), "check")
	if !item("fail", "standby decoding").MatchString(stdout) || !strings.Contains(stdout, "postgres.dsn is not a hot standby") {
		t.Errorf("check with postgres.dsn on the primary and primary_dsn set lacks the failed standby decoding item:\n%s", stdout)
	}
}

// A standby of PostgreSQL 14 or 15 cannot decode: setup refuses before
// creating anything, with or without postgres.primary_dsn, and check
// fails the standby decoding item (run with WALRELAY_PG_BIN of 14, or the
// default 15).
func TestStandbyTooOldSetupAndCheck(t *testing.T) {
	primary, standby, major := newPrimaryAndStandby(t, 0, 15, nil)
	brokers := "WALRELAY_KAFKA_BROKERS=127.0.0.1:1"
	for _, tc := range []struct {
		name string
		env  []string
	}{
		{"with primary_dsn", childEnv("WALRELAY_POSTGRES_DSN="+standby, "WALRELAY_POSTGRES_PRIMARY_DSN="+primary, brokers)},
		{"without primary_dsn", childEnv("WALRELAY_POSTGRES_DSN="+standby, brokers)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := walrelay(t, tc.env, "setup")
			t.Logf("setup on a PostgreSQL %d standby: exit %d\n%s%s", major, code, stdout, stderr)
			wantFailure(t, stdout, stderr, code, 1, "walrelay: setup: ", "needs PostgreSQL 16 or newer", "nothing was created")
			if got := objectCounts(t, primary); got["outbox table"]+got["publication"]+got["slot records"]+got["logical slots"] != 0 {
				t.Errorf("after the refused setup the primary has %v", got)
			}
			stdout, _, code = walrelay(t, tc.env, "check")
			if code != 1 || !regexp.MustCompile(`(?m)^fail\s+standby decoding\s`).MatchString(stdout) || !strings.Contains(stdout, "logical decoding on a standby needs PostgreSQL 16 or newer") {
				t.Errorf("check on a PostgreSQL %d standby: exit %d, want the failed standby decoding item:\n%s", major, code, stdout)
			}
		})
	}
}

// With postgres.primary_dsn, `walrelay slot create` creates the slot on
// the standby and its record on the primary, `walrelay slot adopt` reads
// the slot on the standby and writes the record on the primary, and
// `walrelay slot advance` refuses in one line, moving nothing.
func TestStandbySlotCreateAndAdopt(t *testing.T) {
	primary, standby, _ := newPrimaryAndStandby(t, 16, 0, nil)
	env := childEnv("WALRELAY_POSTGRES_DSN="+standby, "WALRELAY_POSTGRES_PRIMARY_DSN="+primary, "WALRELAY_KAFKA_BROKERS=127.0.0.1:1")
	stdout, stderr, code := walrelay(t, env, "slot", "create", "onstandby")
	t.Logf("slot create: exit %d\n%s%s", code, stdout, stderr)
	if code != 0 || !strings.Contains(stdout, "created slot onstandby (pgoutput, database postgres) at ") {
		t.Fatalf("slot create with primary_dsn: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if n := testenv.QueryValue[int64](t, standby, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'onstandby'`); n != 1 {
		t.Errorf("standby: %d slots onstandby, want 1", n)
	}
	if n := testenv.QueryValue[int64](t, primary, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'onstandby'`); n != 0 {
		t.Errorf("primary: %d slots onstandby, want 0", n)
	}
	note := testenv.QueryValue[string](t, primary, `SELECT note FROM walrelay_slot_positions WHERE slot_name = 'onstandby'`)
	if !strings.HasPrefix(note, "created by walrelay slot create on a standby") {
		t.Errorf("record on the primary: note %q", note)
	}

	stdout, stderr, code = walrelay(t, env, "slot", "adopt", "onstandby", "--by", "test")
	t.Logf("slot adopt: exit %d\n%s%s", code, stdout, stderr)
	if code != 0 || !strings.Contains(stdout, "adopted slot onstandby at ") {
		t.Errorf("slot adopt with primary_dsn: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if by := testenv.QueryValue[string](t, primary, `SELECT coalesce(adopted_by, '') FROM walrelay_slot_positions WHERE slot_name = 'onstandby'`); by != "test" {
		t.Errorf("record on the primary: adopted_by %q, want test", by)
	}

	stdout, stderr, code = walrelay(t, env, "slot", "advance", "onstandby", "--to", "0/0", "--yes")
	wantFailure(t, stdout, stderr, code, 1, "slot advance does not support decoding from a standby yet", "nothing was moved")
}
