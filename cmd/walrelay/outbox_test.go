package main

import (
	"reflect"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
)

// walrelay outbox prune: bad usage without a retention, exit 1 saying why
// when the slot does not confirm the fence, a dry run that removes
// nothing, and a prune once the slot confirms.
func TestOutboxPrune(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	setupOutbox(t, dsn)
	testenv.Exec(t, dsn, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload, created_at)
		SELECT 'order', 'old-' || g, 'T', '{}', now() - interval '2 hours' FROM generate_series(1, 5) g;
		INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'young', 'T', '{}')`)
	rows := func() int64 { return testenv.QueryValue[int64](t, dsn, `SELECT count(*) FROM outbox`) }
	env := childEnv("WALRELAY_POSTGRES_DSN="+dsn, "WALRELAY_OUTBOX_RETENTION=1h", "WALRELAY_OUTBOX_PRUNE_BATCH=2")

	stdout, stderr, code := walrelay(t, childEnv("WALRELAY_POSTGRES_DSN="+dsn), "outbox", "prune")
	wantFailure(t, stdout, stderr, code, 2, "outbox.retention")

	stdout, stderr, code = walrelay(t, env, "outbox", "prune", "--wait", "500ms")
	wantFailure(t, stdout, stderr, code, 1, "has not confirmed the fence", "no process streams from the slot")
	if n := rows(); n != 6 {
		t.Fatalf("%d rows after a prune the slot did not confirm, want 6", n)
	}

	wait := confirmSoon(t, dsn)
	res := decodeJSON[struct {
		Rows   int64 `json:"rows"`
		DryRun bool  `json:"dry_run"`
	}](t, wantOK(t, env, "outbox", "prune", "--dry-run", "-o", "json"))
	wait()
	if res.Rows != 5 || !res.DryRun || rows() != 6 {
		t.Fatalf("dry run: %+v with %d rows left; want 5 rows reported, all 6 left", res, rows())
	}

	wait = confirmSoon(t, dsn)
	out, progress, code := walrelay(t, env, "outbox", "prune")
	wait()
	if code != 0 || !strings.Contains(out, "public.outbox: removed 5 rows in 3 batches") || !strings.Contains(progress, "rows so far") {
		t.Errorf("exit %d; summary:\n%s\nprogress:\n%s", code, out, progress)
	}
	if n := rows(); n != 1 {
		t.Errorf("%d rows left, want the young one", n)
	}
}

// confirmSoon confirms the WAL end on slot walrelay every 200ms until wait
// is called, as a running relay would: walrelay's record of the slot
// first, then the slot (docs/DESIGN.md, "Retention", the slot record).
// Run it while a command runs. (Once, a moment after the start, was too
// early under load: the command took its fence after it.)
func confirmSoon(t *testing.T, dsn string) (wait func()) {
	t.Helper()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			testenv.Exec(t, dsn, `UPDATE walrelay_slot_positions SET confirmed_lsn = greatest(confirmed_lsn, pg_current_wal_lsn()) WHERE slot_name = 'walrelay'`)
			testenv.Exec(t, dsn, `SELECT pg_replication_slot_advance('walrelay', (SELECT confirmed_lsn FROM walrelay_slot_positions WHERE slot_name = 'walrelay'))`)
		}
	}()
	return func() { close(stop); <-done }
}

// walrelay outbox prune with two outbox tables in two schemas, a plain one
// and a partitioned one: one pass prunes both by the same fences (rows of
// the plain one deleted, old partitions of the other detached and
// dropped); the summary has a line per table, and -o json keeps "table"
// as the comma-separated list and adds "tables", a part per table.
func TestOutboxPruneEveryTable(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	setupOutbox(t, dsn)
	testenv.BillingOutboxByDay(t, dsn)
	testenv.Exec(t, dsn, `
		INSERT INTO public.outbox (aggregatetype, aggregateid, type, payload, created_at)
			SELECT 'order', 'old-' || g, 'T', '{}', now() - interval '2 hours' FROM generate_series(1, 5) g;
		INSERT INTO public.outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'young', 'T', '{}');
		INSERT INTO billing.outbox (aggregatetype, aggregateid, type, created_at) VALUES
			('invoice', 'd1', 'T', '2020-01-01 12:00+00'), ('invoice', 'd2', 'T', '2020-01-02 12:00+00'), ('invoice', 'now', 'T', now())`)
	rows := func() int64 { return testenv.QueryValue[int64](t, dsn, `SELECT count(*) FROM public.outbox`) }
	billing := func() []string {
		return testenv.QueryValue[[]string](t, dsn, `SELECT array_agg(relname::text ORDER BY relname) FROM pg_class WHERE relnamespace = 'billing'::regnamespace AND relkind = 'r'`)
	}
	env := childEnv("WALRELAY_POSTGRES_DSN="+dsn, "WALRELAY_POSTGRES_TABLE=public.outbox,billing.outbox",
		"WALRELAY_OUTBOX_RETENTION=1h", "WALRELAY_OUTBOX_PRUNE_BATCH=2")

	type part struct {
		Table       string   `json:"table"`
		Partitioned bool     `json:"partitioned"`
		Rows        int64    `json:"rows"`
		Detached    []string `json:"detached"`
	}
	wait := confirmSoon(t, dsn)
	res := decodeJSON[struct {
		Table  string `json:"table"`
		Tables []part `json:"tables"`
		Rows   int64  `json:"rows"`
		DryRun bool   `json:"dry_run"`
	}](t, wantOK(t, env, "outbox", "prune", "--dry-run", "-o", "json"))
	wait()
	want := []part{{Table: "public.outbox", Rows: 5, Detached: []string{}},
		{Table: "billing.outbox", Partitioned: true, Detached: []string{"billing.outbox_d1", "billing.outbox_d2"}}}
	if res.Table != "public.outbox,billing.outbox" || !reflect.DeepEqual(res.Tables, want) || res.Rows != 5 || !res.DryRun {
		t.Errorf("dry run: %+v; want table public.outbox,billing.outbox, 5 rows, and tables %+v", res, want)
	}
	if n, left := rows(), billing(); n != 6 || len(left) != 3 {
		t.Fatalf("dry run left %d rows and billing tables %q; want all 6 rows and 3 partitions", n, left)
	}

	wait = confirmSoon(t, dsn)
	out, progress, code := walrelay(t, env, "outbox", "prune")
	wait()
	for _, line := range []string{
		`(?m)^public\.outbox: removed 5 rows in 3 batches .*; fence \S+/\S+, slot confirmed_flush_lsn \S+$`,
		`(?m)^billing\.outbox \(partitioned\): detached 2 partition\(s\), dropped 2; fence \S+/\S+, slot confirmed_flush_lsn \S+$`,
		`(?m)^detached: billing\.outbox_d1, billing\.outbox_d2$`,
	} {
		if !regexp.MustCompile(line).MatchString(out) {
			t.Errorf("summary does not match %s", line)
		}
	}
	if code != 0 || !strings.Contains(progress, "public.outbox: removed 2 rows so far") {
		t.Errorf("exit %d; summary:\n%s\nprogress:\n%s", code, out, progress)
	}
	if n, left := rows(), billing(); n != 1 || !slices.Equal(left, []string{"outbox_now"}) {
		t.Errorf("left %d rows in public.outbox and billing tables %q; want the young row and outbox_now", n, left)
	}
}

// walrelay run with outbox.retention prunes the old rows it published, on
// its own schedule, and still stops cleanly on SIGTERM.
func TestRunPrunes(t *testing.T) {
	e := newE2E(t)
	e.setup(t, "created")
	c := startChild(t, append(e.env, "WALRELAY_OUTBOX_RETENTION=1h", "WALRELAY_OUTBOX_PRUNE_INTERVAL=1s"), "run")
	testenv.Exec(t, e.dsn, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload, created_at)
		SELECT 'order', 'old-' || g, 'T', '{}', now() - interval '2 hours' FROM generate_series(1, 20) g;
		INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'young', 'T', '{}')`)
	e.broker.ReadAll(t, e.topics()[:1], 21, 60*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for testenv.QueryValue[int64](t, e.dsn, `SELECT count(*) FROM outbox`) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("walrelay run left %d rows 30s after publishing them, want the young one", testenv.QueryValue[int64](t, e.dsn, `SELECT count(*) FROM outbox`))
		}
		time.Sleep(200 * time.Millisecond)
	}
	c.signal(t, syscall.SIGTERM)
	if code := c.wait(t, 30*time.Second); code != 0 {
		t.Errorf("walrelay run exited %d after SIGTERM, want 0", code)
	}
	if !strings.Contains(c.stderr.String(), `"msg":"pruned the outbox"`) {
		t.Errorf("walrelay run did not log its prune:\n%s", c.stderr.String())
	}
}
