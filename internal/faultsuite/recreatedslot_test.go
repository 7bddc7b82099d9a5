package faultsuite

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/internal/testenv"
)

// testRecreatedSlotRetention runs walrelay with retention on (outbox.retention
// 1m, its shortest, a pass every second) and has its slot dropped and
// recreated mid-run,
// the way an operator (or postgres.create_slot) used to recover a lost
// slot. Rows are committed while the relay is stopped (in the old slot,
// never published) and after the drop (in no slot at all), then aged 2h
// (an UPDATE of created_at: the publication publishes INSERTs only), so
// that retention would remove them at once; their aggregates are the
// scenario's own, so a republished record cannot be out of its key's
// order. Required: the relay refuses to recreate the slot
// (postgres.create_slot), retention deletes none of those rows while they
// are unpublished (walrelay_retention_blocked{reason="slot_jumped"}), the
// runbook's steps (slot create --replace, run, verify --republish, slot
// adopt) publish them, pruning resumes, and the verifier finds nothing
// lost (exactly-once: no duplicate either).
func testRecreatedSlotRetention(t *testing.T, row *result, d delivery) {
	f := newFixture(t, d)
	env := append(append([]string(nil), f.env...), "WALRELAY_OUTBOX_RETENTION=1m", "WALRELAY_OUTBOX_PRUNE_INTERVAL=1s")
	slot := slotFor(f.dsn)
	before := startWorkload(t, f.dsn, defaultLoad)
	p := startRelay(t, "before", env)
	waitPublished(t, f.adm, 200, time.Minute)
	before.stop()
	testenv.WaitCaughtUp(t, f.dsn, slotFor(f.dsn), time.Minute)
	stopClean(t, p)

	// The gap: committed while no relay runs, first into the old slot,
	// then after it was dropped.
	pool, err := pgxpool.New(context.Background(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	gapTx, perTx := pick(10, 50), 5
	testenv.Exec(t, f.dsn, fmt.Sprintf(`INSERT INTO aggregates (id) SELECT 'order-gap-' || g FROM generate_series(1, %d) g`, gapTx*perTx))
	var gap []string
	write := func(from, to int) {
		for i := from; i < to; i++ {
			aggs := make([]string, perTx)
			for j := range aggs {
				aggs[j] = fmt.Sprintf("order-gap-%d", i*perTx+j+1)
			}
			ids, err := writeTx(t.Context(), pool, aggs, nil, false, false)
			if err != nil {
				t.Fatalf("writing gap transaction %d: %v", i, err)
			}
			gap = append(gap, ids...)
		}
	}
	write(0, gapTx/2)
	testenv.Exec(t, f.dsn, `SELECT pg_drop_replication_slot($1)`, slot)
	write(gapTx/2, gapTx)
	testenv.Exec(t, f.dsn, `UPDATE outbox SET created_at = now() - interval '2 hours' WHERE id = ANY($1::uuid[])`, gap)

	// postgres.create_slot (the default) must not recreate it silently.
	refused := startRelay(t, "create-slot", env)
	if code := refused.waitExit(t, time.Minute); code != 1 || !refused.logHas("walrelay confirmed through a slot of this name before") {
		t.Fatalf("walrelay run with postgres.create_slot on the dropped slot exited %d; want 1, refusing to recreate it", code)
	}
	runCLI(t, env, "slot", "create", slot, "--replace")
	after := startWorkload(t, f.dsn, defaultLoad)
	p = startRelay(t, "after", env)
	waitPublished(t, f.adm, published(t, f.adm)+200, time.Minute)
	// Retention runs every second, every gap row is past the retention.
	time.Sleep(4 * time.Second)
	requireRunning(t, p, "with the slot recreated")
	blocked, err := p.metricSum(t.Context(), "walrelay_retention_blocked", "reason=slot_jumped")
	if err != nil || blocked != 1 {
		t.Errorf("walrelay_retention_blocked{reason=slot_jumped} = %v (%v), want 1", blocked, err)
	}
	deleted := testenv.QueryValue[int64](t, f.dsn, `SELECT $1::int - count(*) FROM outbox WHERE id = ANY($2::uuid[])`, len(gap), gap)
	if deleted != 0 {
		t.Errorf("retention deleted %d of the %d gap rows before they were published", deleted, len(gap))
	}
	pruned, _ := p.metricSum(t.Context(), "walrelay_outbox_rows_pruned_total")

	// The runbook: verify --republish, then adopt; pruning resumes.
	out := runCLI(t, env, "verify", "--since", "3h", "--until", "0s", "--republish")
	if !strings.Contains(out, fmt.Sprintf("missing: %d", len(gap))) {
		t.Errorf("walrelay verify --republish did not report the %d gap rows missing:\n%s", len(gap), out)
	}
	runCLI(t, env, "slot", "adopt", slot)
	deadline := time.Now().Add(time.Minute)
	for testenv.QueryValue[int64](t, f.dsn, `SELECT count(*) FROM outbox WHERE id = ANY($1::uuid[])`, gap) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the gap rows were not pruned a minute after walrelay slot adopt")
		}
		time.Sleep(200 * time.Millisecond)
	}
	requireRunning(t, p, "after the slot was adopted")
	rep, read := f.verify(t, after)
	stopClean(t, p)
	fill(row, rep, read)
	row.notes = fmt.Sprintf("retention 1m (gap rows aged 2h), a pass every second; slot dropped and recreated (slot create --replace) with %d rows committed in the gap (%d into the old slot after the relay stopped, %d after the drop); rows deleted before publication %d; %.0f rows pruned while blocked; walrelay run refused to recreate the slot; verify --republish, slot adopt, then the gap rows pruned",
		len(gap), gapTx/2*perTx, (gapTx-gapTx/2)*perTx, deleted, pruned)
}
