package faultsuite

import (
	"fmt"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/testenv"
)

// testSlotLossHeal drops walrelay's slot under load (its walsender
// terminated first, then pg_drop_replication_slot, while the writers go
// on), the way a failover before Postgres 17, a restore or an operator
// loses it. Required: walrelay run (restarted, as a supervisor does)
// refuses to create it again silently and says what happened and the two
// ways on; with outbox.on_slot_loss: heal it creates the slot again,
// republishes from the outbox the rows after its record's covered fence
// (issue 33 item 5), in commit order (track_commit_timestamp is on), and
// streams; the verifier finds nothing lost and no key out of order.
// The rows after the fence already on Kafka are skipped (deduplicated by
// event id against their topic, read_committed). With exactly-once
// delivery the heal fences the transactional id before that read and
// publishes the rest in Kafka transactions with a checkpoint at the new
// slot's consistent point: the read_committed verifier finds no duplicate.
func testSlotLossHeal(t *testing.T, row *result, d delivery) {
	// track_commit_timestamp: the heal republishes in commit order; without
	// it, in xid order, which differs for the rows of one key whose
	// transactions overlapped (docs/runbook.md, "A lost slot").
	c := testenv.PrivateCluster(t, localpg.Options{Settings: map[string]string{"track_commit_timestamp": "on"}})
	f := newFixtureOn(t, c.DSN("postgres"), d)
	slot := slotFor(f.dsn)
	load := defaultLoad
	load.keepRows = true // a heal cannot see rows deleted in their own transaction (docs/runbook.md)
	w := startWorkload(t, f.dsn, load)
	p := startRelay(t, "before", f.env)
	waitPublished(t, f.adm, 200, time.Minute)
	deadline := time.Now().Add(time.Minute)
	for testenv.QueryValue[bool](t, f.dsn, `SELECT covered_lsn IS NULL FROM walrelay_slot_positions WHERE slot_name = $1`, slot) {
		if time.Now().After(deadline) {
			t.Fatal("no covered fence in walrelay's record after a minute of load")
		}
		time.Sleep(200 * time.Millisecond)
	}
	drops := 0
	for deadline := time.Now().Add(30 * time.Second); ; drops++ {
		testenv.Exec(t, f.dsn, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, slot)
		time.Sleep(10 * time.Millisecond)
		var dropped bool
		if err := testenv.Connect(t, f.dsn).QueryRow(t.Context(), `SELECT pg_drop_replication_slot($1) IS NULL`, slot).Scan(&dropped); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("could not drop the slot under load in 30s")
		}
	}
	lostAt := time.Now()
	_ = p.stop(30 * time.Second) // whatever it did meanwhile: a supervisor restarts it

	refused := startRelay(t, "stop", f.env)
	if code := refused.waitExit(t, time.Minute); code != 1 || !refused.logHas("walrelay confirmed through a slot of this name before") || !refused.logHas("--accept-gap") {
		t.Fatalf("walrelay run on the dropped slot exited %d; want 1, refusing to recreate it and naming the ways on", code)
	}
	env := append(append([]string(nil), f.env...), "WALRELAY_OUTBOX_ON_SLOT_LOSS=heal")
	p = startRelay(t, "heal", env)
	for deadline := time.Now().Add(2 * time.Minute); !p.logHas("slot healed"); {
		if time.Now().After(deadline) || !p.running() {
			t.Fatalf("the relay did not heal the slot in 2 minutes (running: %v)", p.running())
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitPublished(t, f.adm, published(t, f.adm)+200, 2*time.Minute)
	requireRunning(t, p, "after the heal")
	rep, read := f.verify(t, w)
	stopClean(t, p)
	fill(row, rep, read)
	row.recovery = time.Since(lostAt)
	row.notes = fmt.Sprintf("slot dropped under load (walsender terminated, %d retries of the drop); walrelay run refused to recreate it; restarted with outbox.on_slot_loss: heal: new slot, outbox rows after the record's covered fence republished unless their id was on their topic already, then streamed; track_commit_timestamp on%s", drops, eosNote(d))
}

// eosNote is what the row's notes add with exactly-once delivery.
func eosNote(d delivery) string {
	if d == exactlyOnce {
		return "; exactly-once: the heal fenced the transactional id, then published in Kafka transactions with a checkpoint at the new slot's consistent point"
	}
	return ""
}
