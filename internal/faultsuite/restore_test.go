package faultsuite

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/internal/verify"
)

// testSameTimelineRestore restores the database from a crash-consistent
// copy of its data directory (a volume or VM snapshot) taken while the
// relay ran, after the relay published past the copy. The restored server
// keeps its system id and timeline, and the transactions its writers
// commit after the restore take the LSNs of those the copy lost: with
// exactly-once delivery the last checkpoint covers them by LSN. The relay
// starts once the restored server's WAL passed the checkpoint's LSN.
//
// Checked: every event of the restored database is delivered (lost 0);
// the records of the timeline the restore discarded stay on Kafka (not
// counted as invented: the ledger that committed them was restored away);
// no event committed on the restored server after the restore is
// published twice. Duplicates are events committed before the copy that
// the restored slot, saved behind them, sends again while the checkpoint
// cannot be proven on the restored WAL (issue 32, item 3) and no earlier
// checkpoint proven on the way covers: they are reported, and with
// exactly-once delivery they must be of such events only.
func testSameTimelineRestore(t *testing.T, row *result, d delivery) {
	c := testenv.PrivateCluster(t, localpg.Options{})
	f := newFixtureOn(t, c.DSN("postgres"), d)
	w1 := startWorkload(t, f.dsn, defaultLoad)
	p := startRelay(t, "run1", f.env)
	waitPublished(t, f.adm, 200, time.Minute)

	// The copy, taken as a crash leaves the data directory, a moment
	// after a checkpoint. The restored slot is where its state was last
	// saved to disk: at a checkpoint, but Postgres 15 marks a logical
	// slot dirty only when its restart_lsn or catalog_xmin moves, not for
	// confirmed_flush_lsn alone, so it may be far behind.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	testenv.Exec(t, f.dsn, `CHECKPOINT`)
	time.Sleep(500 * time.Millisecond)
	if err := c.Stop(ctx, "immediate"); err != nil {
		t.Fatalf("stopping postgres: %v", err)
	}
	snapshot := filepath.Join(filepath.Dir(c.DataDir()), "snapshot")
	copyDataDir(t, c.DataDir(), snapshot)
	if err := c.Restart(ctx); err != nil {
		t.Fatalf("restarting postgres: %v", err)
	}
	recoverAfter(t, f.dsn, time.Now())
	requireRunning(t, p, "across a Postgres restart")
	// The relay publishes past the copy.
	waitPublished(t, f.adm, published(t, f.adm)+300, time.Minute)
	w1.stop()
	testenv.WaitCaughtUp(t, f.dsn, slotFor(f.dsn), 2*time.Minute)
	stopClean(t, p)
	_, _, rolledBack := w1.stats()
	discarded := map[string]bool{} // the events the restore will discard, for now all of them
	for _, e := range readLedger(t, f.dsn) {
		discarded[e.ID] = true
	}
	var cpNote string
	if d == exactlyOnce {
		cp, err := readCheckpoint(t.Context(), f.broker.Addrs(), transactionalID(t, f.dsn))
		if err != nil {
			t.Fatalf("reading the checkpoint: %v", err)
		}
		cpNote = cp.LSN.String()
	}

	// The restore.
	if err := c.Stop(ctx, "fast"); err != nil {
		t.Fatalf("stopping postgres: %v", err)
	}
	if err := os.RemoveAll(c.DataDir()); err != nil {
		t.Fatal(err)
	}
	copyDataDir(t, snapshot, c.DataDir())
	if err := c.Restart(ctx); err != nil {
		t.Fatalf("restarting postgres on the copy: %v", err)
	}
	restored := mustSlot(t, f.dsn)
	before := map[string]bool{} // events the copy holds: committed before it
	for _, e := range readLedger(t, f.dsn) {
		before[e.ID] = true
		delete(discarded, e.ID)
	}
	w2 := startWorkload(t, f.dsn, defaultLoad)
	// The relay starts once the restored WAL passed what the checkpoint
	// covers, so that the checkpoint looks usable by LSN.
	passed := restored.current
	if d == exactlyOnce {
		cp, err := readCheckpoint(t.Context(), f.broker.Addrs(), transactionalID(t, f.dsn))
		if err != nil {
			t.Fatalf("reading the checkpoint: %v", err)
		}
		deadline := time.Now().Add(time.Minute)
		for passed = mustSlot(t, f.dsn).current; passed <= cp.LSN; passed = mustSlot(t, f.dsn).current {
			if time.Now().After(deadline) {
				t.Fatalf("the restored server's WAL did not pass the checkpoint's %s within a minute (at %s)", cp.LSN, passed)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	p = startRelay(t, "run2", f.env)
	rec := recoverAfter(t, f.dsn, p.started)
	waitPublished(t, f.adm, published(t, f.adm)+200, time.Minute)
	w2.stop()
	testenv.WaitCaughtUp(t, f.dsn, slotFor(f.dsn), 2*time.Minute)
	_, _, rb2 := w2.stats()
	rolledBack = append(rolledBack, rb2...)
	read := readKafka(t, f.broker.Addrs(), d == exactlyOnce)
	stopClean(t, p)

	// The verifier, with the discarded timeline's records set aside.
	ledger := readLedger(t, f.dsn)
	var kept []verify.Record
	orphans := 0
	for _, r := range read.records {
		if discarded[r.ID] {
			orphans++
			continue
		}
		kept = append(kept, r)
	}
	rep := verify.Check(ledger, rolledBack, kept)
	t.Logf("verify (%s, without the %d records of the discarded timeline): %s", d.reader(), orphans, rep)
	if err := rep.Err(); err != nil {
		t.Error(err)
	}
	copies := map[string]int{}
	for _, r := range kept {
		copies[r.ID]++
	}
	newDups, oldDups := 0, 0
	for id, n := range copies {
		switch {
		case n < 2:
		case before[id]:
			oldDups += n - 1
		default:
			newDups += n - 1
		}
	}
	if newDups > 0 {
		t.Errorf("%d duplicates of events committed on the restored server after the restore: only events the restored slot sends again may be", newDups)
	}
	if d == exactlyOnce && rep.Duplicates != oldDups {
		t.Errorf("%d duplicates, %d of them of events committed before the copy", rep.Duplicates, oldDups)
	}
	fill(row, rep, read)
	row.recovery = rec
	why := "which the restored slot, at its last position saved to disk before the copy, sends again"
	if d == exactlyOnce {
		why += " and no checkpoint proven on the restored WAL covers (the last checkpoint is disproved; earlier ones still on the topic are proven on the way, by their last transactions, and what the newest proven one covers stays skipped)"
	}
	row.notes = fmt.Sprintf("crash-consistent copy of the data directory while relaying (0.5s after a CHECKPOINT), %d more events relayed (%d records of them on Kafka), copy restored (slot at %s), writers resumed; relay started once the WAL passed %s; lost counts events of the restored database; duplicates: %d of events committed before the copy, %s; %d of events committed after the restore",
		len(discarded), orphans, restored.confirmed, walPassed(d, cpNote, passed), oldDups, why, newDups)
	if d == exactlyOnce && !p.logHas("the checkpoint is not proven on this server's WAL") {
		t.Errorf("the relay did not log that the checkpoint is not proven on the restored server's WAL")
	}
}

// walPassed says what the restored WAL passed before the relay started.
func walPassed(d delivery, cp string, at fmt.Stringer) string {
	if d == exactlyOnce {
		return fmt.Sprintf("the checkpoint's LSN %s (at %s)", cp, at)
	}
	return fmt.Sprintf("%s (no checkpoint)", at)
}

// copyDataDir copies a stopped server's data directory with its owners
// and modes.
func copyDataDir(t *testing.T, from, to string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		t.Fatalf("copying %s to %s: %v: %s", from, to, err, out)
	}
}
