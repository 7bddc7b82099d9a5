package retention_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/internal/retention"
	"github.com/walrelay/walrelay/internal/setup"
	"github.com/walrelay/walrelay/internal/slotrecord"
	"github.com/walrelay/walrelay/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// outboxLabel selects the series of public.outbox, the one table of the
// single-table tests.
var outboxLabel = map[string]string{"table": "public.outbox"}

// db is a test's database and the name of its slot (slots are
// cluster-wide, so each test has its own).
type db struct{ dsn, slot string }

// plainOutbox creates a database with walrelay's outbox, publication and
// slot (walrelay setup).
func plainOutbox(t *testing.T) db {
	t.Helper()
	d := db{testenv.Postgres(t).NewDatabase(t), testenv.UniqueName(t, "s")}
	conn := testenv.Connect(t, d.dsn)
	if _, err := setup.Run(t.Context(), conn, setup.Names{Schema: "public", Table: "outbox", Publication: "walrelay_outbox", Slot: d.slot}); err != nil {
		t.Fatalf("setup: %v", err)
	}
	return d
}

// pruner returns a Pruner of the outbox of dsn with a 1h retention and
// its metrics' registry.
func pruner(t *testing.T, d db, mutate func(*retention.Config)) (*retention.Pruner, *prometheus.Registry) {
	t.Helper()
	cfg := retention.Config{
		DSN: d.dsn, Schema: "public", Table: "outbox", TimeColumn: "created_at", Slot: d.slot,
		Retention: time.Hour, Batch: 1000, StatementTimeout: 5 * time.Second, Interval: time.Second,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	reg := prometheus.NewRegistry()
	p := retention.New(cfg, nil, retention.MetricsOf(metrics.New(reg, "test", "walrelay")))
	t.Cleanup(func() { p.Close(context.Background()) })
	return p, reg
}

// advance moves the slot to the server's current WAL position, as a relay
// confirming everything so far would: walrelay's record of the slot first
// (internal/slotrecord's write-ahead rule), then the slot.
func advance(t *testing.T, d db) {
	t.Helper()
	conn := testenv.Connect(t, d.dsn)
	lsn := testenv.ParseLSN(t, testenv.QueryValue[string](t, d.dsn, `SELECT pg_current_wal_lsn()::text`))
	records := slotrecord.Table{Schema: "public"}
	if _, err := records.Ensure(t.Context(), conn); err != nil {
		t.Fatal(err)
	}
	if err := slotrecord.Moved(t.Context(), conn, records, d.slot, lsn, "test relay"); err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, d.dsn, `SELECT pg_replication_slot_advance($1, $2::pg_lsn)`, d.slot, lsn.String())
}

// insertOld commits n rows aged 2h (older than the 1h retention) with ids
// prefixed prefix.
func insertOld(t *testing.T, d db, prefix string, n int) {
	t.Helper()
	testenv.Exec(t, d.dsn, fmt.Sprintf(`INSERT INTO outbox (aggregatetype, aggregateid, type, payload, created_at)
		SELECT 'order', '%s-' || g, 'T', '{}', now() - interval '2 hours' FROM generate_series(1, %d) g`, prefix, n))
}

// ids returns the aggregateids left in the outbox, sorted.
func ids(t *testing.T, d db) []string {
	t.Helper()
	return testenv.QueryValue[[]string](t, d.dsn, `SELECT coalesce(array_agg(aggregateid ORDER BY aggregateid), '{}') FROM outbox`)
}

func cycle(t *testing.T, p *retention.Pruner) retention.Result {
	t.Helper()
	res, err := p.Cycle(t.Context())
	if err != nil {
		t.Fatalf("Cycle: %v", err)
	}
	return res
}

// openTx begins a transaction on its own connection, runs stmts in it and
// leaves it open; it is rolled back at cleanup unless committed.
func openTx(t *testing.T, d db, stmts ...string) pgx.Tx {
	t.Helper()
	conn := testenv.Connect(t, d.dsn)
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stmts {
		if _, err := tx.Exec(t.Context(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

// A row whose transaction commits after the fence is never removed by it,
// however old its created_at (a long transaction, or one that sets it):
// neither a row inserted by the transaction itself nor one inserted in a
// subtransaction (whose xid is not in the snapshot's list of running
// transactions). Rows older than the retention that committed before the
// fence go, in batches; rows younger than the retention stay.
//
// Not parallel: a fence's xmin is the whole cluster's, so a transaction
// another test holds open (TestPartitionsDroppedOnlyAfterConfirmation's
// late one) from before the early rows keeps them too, rightly, and the
// counts below would not hold (seen on the compatibility suite under
// load). Non-parallel tests run before the parallel ones start.
func TestLateCommitIsKeptUntilConfirmed(t *testing.T) {
	d := plainOutbox(t)
	insertOld(t, d, "early", 25)
	testenv.Exec(t, d.dsn, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'young', 'T', '{}')`)
	// Two late transactions, open across the fence: one inserts itself,
	// the other in a released subtransaction after taking its own xid.
	late := openTx(t, d, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload, created_at) VALUES ('order', 'late-top', 'T', '{}', now() - interval '3 hours')`)
	lateSub := openTx(t, d, `SELECT pg_current_xact_id()`, `SAVEPOINT s`,
		`INSERT INTO outbox (aggregatetype, aggregateid, type, payload, created_at) VALUES ('order', 'late-sub', 'T', '{}', now() - interval '3 hours')`,
		`RELEASE SAVEPOINT s`)

	p, reg := pruner(t, d, func(c *retention.Config) { c.Batch = 10 })
	if res := cycle(t, p); res.Rows != 0 || res.Fence != nil {
		t.Fatalf("first pass removed %d rows (fence %v); it only takes a fence", res.Rows, res.Fence)
	}
	advance(t, d) // the slot passes the fence, not the late commits
	for _, tx := range []pgx.Tx{late, lateSub} {
		if err := tx.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	res := cycle(t, p)
	if res.Rows != 25 || res.Batches != 3 {
		t.Logf("pass: %+v", res)
		t.Errorf("second pass removed %d rows in %d batches, want 25 in 3 (batches of 10)", res.Rows, res.Batches)
	}
	if got, want := ids(t, d), []string{"late-sub", "late-top", "young"}; !slices.Equal(got, want) {
		t.Fatalf("left %q, want %q: the late commits are not confirmed", got, want)
	}
	if got := testenv.MetricValue(t, reg, "walrelay_outbox_rows_pruned_total", outboxLabel); got != 25 {
		t.Errorf("walrelay_outbox_rows_pruned_total = %v, want 25", got)
	}

	// Not confirmed yet: the third pass's fence (taken after the commits)
	// is not confirmed, the second's does not cover them.
	if res := cycle(t, p); res.Rows != 0 {
		t.Errorf("third pass removed %d rows before the slot confirmed the late commits", res.Rows)
	}
	advance(t, d)
	if res := cycle(t, p); res.Rows != 2 {
		t.Errorf("pass after the slot confirmed the late commits removed %d rows, want 2", res.Rows)
	}
	if got, want := ids(t, d), []string{"young"}; !slices.Equal(got, want) {
		t.Errorf("left %q, want %q", got, want)
	}
	if age := testenv.MetricValue(t, reg, "walrelay_outbox_oldest_row_age_seconds", outboxLabel); age <= 0 || age > 600 {
		t.Errorf("walrelay_outbox_oldest_row_age_seconds = %v, want the young row's few seconds", age)
	}
	if size := testenv.MetricValue(t, reg, "walrelay_outbox_table_size_bytes", outboxLabel); size < 8192 {
		t.Errorf("walrelay_outbox_table_size_bytes = %v, want at least a page", size)
	}
}

// Retention refuses to remove anything by a slot that cannot vouch for
// the outbox: missing, of another plugin, of another database.
func TestRefusesUnusableSlots(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, d db) string // returns the slot to use
		want    error
	}{
		{"missing", func(*testing.T, db) string { return "nosuchslot" }, retention.ErrSlotMissing},
		{"another plugin", func(t *testing.T, d db) string {
			slot := testenv.UniqueName(t, "td")
			testenv.Exec(t, d.dsn, `SELECT pg_create_logical_replication_slot($1, 'test_decoding')`, slot)
			return slot
		}, retention.ErrSlotUnusable},
		{"another database", func(t *testing.T, _ db) string {
			other := testenv.Postgres(t).NewDatabase(t) // drops its slots at cleanup
			slot := testenv.UniqueName(t, "elsewhere")
			testenv.Exec(t, other, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot)
			return slot
		}, retention.ErrSlotUnusable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := plainOutbox(t)
			insertOld(t, d, "old", 3)
			slot := tc.prepare(t, d)
			p, _ := pruner(t, d, func(c *retention.Config) { c.Slot = slot })
			for range 2 {
				if _, err := p.Cycle(t.Context()); !errors.Is(err, tc.want) {
					t.Fatalf("Cycle: %v, want %v", err, tc.want)
				}
			}
			if _, err := p.Once(t.Context(), time.Second); !errors.Is(err, tc.want) {
				t.Fatalf("Once: %v, want %v", err, tc.want)
			}
			if n := len(ids(t, d)); n != 3 {
				t.Errorf("%d rows left, want 3", n)
			}
		})
	}
}

// Once waits for the slot to pass its fence and says why it cannot prune
// when the slot does not; DryRun counts and removes nothing.
func TestOnce(t *testing.T) {
	t.Parallel()
	d := plainOutbox(t)
	insertOld(t, d, "old", 12)

	p, _ := pruner(t, d, nil)
	res, err := p.Once(t.Context(), 500*time.Millisecond)
	if !errors.Is(err, retention.ErrNotConfirmed) || res.Rows != 0 {
		t.Fatalf("Once with nobody confirming: %d rows, %v; want 0 and ErrNotConfirmed", res.Rows, err)
	}
	t.Logf("said: %v", err)

	// A "relay" confirming everything a moment later.
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(300 * time.Millisecond)
		advance(t, d)
	}()
	dry, _ := pruner(t, d, func(c *retention.Config) { c.DryRun = true })
	res, err = dry.Once(t.Context(), 10*time.Second)
	<-done
	if err != nil || res.Rows != 12 {
		t.Fatalf("dry run: %d rows, %v; want 12 and no error", res.Rows, err)
	}
	if n := len(ids(t, d)); n != 12 {
		t.Fatalf("dry run left %d rows, want 12", n)
	}
	advanced := make(chan struct{})
	go func() { defer close(advanced); time.Sleep(300 * time.Millisecond); advance(t, d) }()
	var progress []retention.Progress
	p.OnProgress = func(pr retention.Progress) { progress = append(progress, pr) }
	p2 := p
	res, err = p2.Once(t.Context(), 10*time.Second)
	<-advanced // Once may return before it: nothing else wrote WAL since the last advance
	if err != nil || res.Rows != 12 {
		t.Fatalf("Once: %d rows, %v; want 12 and no error", res.Rows, err)
	}
	if len(progress) == 0 || progress[len(progress)-1].Rows != 12 {
		t.Errorf("progress %+v, want reports ending at 12 rows", progress)
	}
	if n := len(ids(t, d)); n != 0 {
		t.Errorf("%d rows left, want 0", n)
	}
}

// An invalidated slot (wal_status lost) vouches for nothing: retention
// refuses to remove anything by it.
func TestRefusesInvalidatedSlot(t *testing.T) {
	t.Parallel()
	c := testenv.PrivateCluster(t, localpg.Options{Settings: map[string]string{"max_slot_wal_keep_size": "1MB"}})
	d := db{c.DSN("postgres"), "lostslot"}
	conn := testenv.Connect(t, d.dsn)
	if _, err := setup.Run(t.Context(), conn, setup.Names{Schema: "public", Table: "outbox", Publication: "walrelay_outbox", Slot: d.slot}); err != nil {
		t.Fatalf("setup: %v", err)
	}
	insertOld(t, d, "old", 3)
	for range 4 { // WAL past max_slot_wal_keep_size, then a checkpoint invalidates the slot
		testenv.Exec(t, d.dsn, `CREATE TABLE IF NOT EXISTS filler (x int); INSERT INTO filler VALUES (1); SELECT pg_switch_wal()`)
	}
	testenv.Exec(t, d.dsn, `CHECKPOINT`)
	if st := testenv.QueryValue[string](t, d.dsn, `SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1`, d.slot); st != "lost" {
		t.Fatalf("wal_status %q, want lost (the test could not invalidate the slot)", st)
	}
	p, _ := pruner(t, d, nil)
	for range 2 {
		if _, err := p.Cycle(t.Context()); !errors.Is(err, retention.ErrSlotInvalidated) {
			t.Fatalf("Cycle: %v, want ErrSlotInvalidated", err)
		}
	}
	if n := len(ids(t, d)); n != 3 {
		t.Errorf("%d rows left, want 3", n)
	}
}

// Run retries a failing pass every interval, logging the error once while
// it stays the same, and prunes once the cause is gone; it returns when
// its context ends.
func TestRunRetries(t *testing.T) {
	t.Parallel()
	d := plainOutbox(t)
	insertOld(t, d, "old", 4)
	missing := testenv.UniqueName(t, "later")
	logs := &testenv.SyncBuffer{}
	cfg := retention.Config{DSN: d.dsn, Schema: "public", Table: "outbox", TimeColumn: "created_at", Slot: missing,
		Retention: time.Hour, Batch: 10, StatementTimeout: 5 * time.Second, Interval: 100 * time.Millisecond}
	p := retention.New(cfg, slog.New(slog.NewTextHandler(logs, nil)), retention.Metrics{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	defer func() { cancel(); <-done }()

	time.Sleep(time.Second) // about ten failed passes
	if n := strings.Count(logs.String(), "pruning the outbox; will retry"); n != 1 {
		t.Errorf("logged the same failure %d times, want once:\n%s", n, logs.String())
	}
	testenv.Exec(t, d.dsn, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, missing)
	deadline := time.Now().Add(20 * time.Second)
	for len(ids(t, d)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("rows left 20s after the slot appeared:\n%s", logs.String())
		}
		advance(t, db{d.dsn, missing})
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return 10s after its context ended")
	}
	if !strings.Contains(logs.String(), "pruned the outbox") {
		t.Errorf("no log of the prune:\n%s", logs.String())
	}
}
