package main

import (
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

	// While each command runs, the slot confirms the WAL end every 200ms,
	// as a running relay would: walrelay's record of the slot first, then
	// the slot (docs/DESIGN.md, "Retention", the slot record). (Once, a
	// moment after the start, was too early under load: the command took
	// its fence after it.)
	confirmSoon := func() (wait func()) {
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
	wait := confirmSoon()
	res := decodeJSON[struct {
		Rows   int64 `json:"rows"`
		DryRun bool  `json:"dry_run"`
	}](t, wantOK(t, env, "outbox", "prune", "--dry-run", "-o", "json"))
	wait()
	if res.Rows != 5 || !res.DryRun || rows() != 6 {
		t.Fatalf("dry run: %+v with %d rows left; want 5 rows reported, all 6 left", res, rows())
	}

	wait = confirmSoon()
	out, progress, code := walrelay(t, env, "outbox", "prune")
	wait()
	if code != 0 || !strings.Contains(out, "public.outbox: removed 5 rows in 3 batches") || !strings.Contains(progress, "rows so far") {
		t.Errorf("exit %d; summary:\n%s\nprogress:\n%s", code, out, progress)
	}
	if n := rows(); n != 1 {
		t.Errorf("%d rows left, want the young one", n)
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
