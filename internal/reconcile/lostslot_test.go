package reconcile_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/testenv"
)

// A slot invalidated by max_slot_wal_keep_size (wal_status lost) is
// exactly when verify is needed: it used to refuse it. Nothing streams
// from a lost slot, so nothing is in flight: every row before verify's
// fence that is not on its topic is missing, reported with the slot's
// state and walrelay's recorded position, and --republish sends them. The
// same holds once the lost slot is dropped (missing, with a record).
func TestVerifyReportsRowsALostSlotNeverDelivered(t *testing.T) {
	c := testenv.PrivateCluster(t, localpg.Options{Settings: map[string]string{"max_slot_wal_keep_size": "1MB"}})
	dsn := c.DSN("postgres")
	f := fixtureOn(t, dsn)

	published := f.insert(t, 10, time.Time{})
	stop := f.relayFor(t)
	f.broker.ReadAll(t, topics, len(published), 60*time.Second)
	testenv.WaitCaughtUp(t, dsn, "walrelay", 30*time.Second)
	stop()
	never := f.insert(t, 5, time.Time{}) // in the slot only
	for range 4 {                        // WAL past max_slot_wal_keep_size, then a checkpoint invalidates the slot
		testenv.Exec(t, dsn, `CREATE TABLE IF NOT EXISTS filler (x int); INSERT INTO filler VALUES (1); SELECT pg_switch_wal()`)
	}
	testenv.Exec(t, dsn, `CHECKPOINT`)
	if st := testenv.QueryValue[string](t, dsn, `SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'walrelay'`); st != "lost" {
		t.Fatalf("wal_status %q, want lost (the test could not invalidate the slot)", st)
	}

	rep := f.verifyWait(t, false, time.Second)
	if !slices.Equal(rep.Missing, sorted(never)) || rep.Rows != 15 || !rep.FenceConfirmed || rep.SlotState != "slot_lost" || rep.RecordedLSN == "" {
		t.Fatalf("verify on the lost slot: %d rows, missing %v, fence confirmed %t, slot state %q, recorded %q; want 15 rows, missing exactly %v, slot_lost with the record",
			rep.Rows, rep.Missing, rep.FenceConfirmed, rep.SlotState, rep.RecordedLSN, sorted(never))
	}
	t.Logf("verify said: %s", rep.SlotProblem)

	testenv.Exec(t, dsn, `SELECT pg_drop_replication_slot('walrelay')`)
	rep = f.verifyWait(t, true, time.Second)
	if !slices.Equal(rep.Missing, sorted(never)) || rep.SlotState != "slot_missing" || rep.Republished == nil || rep.Republished.Acknowledged != 5 {
		t.Fatalf("verify --republish on the dropped slot: missing %v, slot state %q, republished %+v; want the 5, slot_missing, 5 acknowledged", rep.Missing, rep.SlotState, rep.Republished)
	}
	if rep = f.verifyWait(t, false, time.Second); len(rep.Missing) != 0 {
		t.Fatalf("verify after --republish: missing %v, want none", rep.Missing)
	}
}

// relayFor runs a relay until the returned stop is called (or the test
// ends).
func (f *fixture) relayFor(t *testing.T) (stop func()) {
	t.Helper()
	logs := &testenv.SyncBuffer{}
	r, err := relay.New(f.cfg, slog.New(slog.NewTextHandler(logs, nil)), nil)
	if err != nil {
		t.Fatalf("relay.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("relay: %v", err)
			}
			if t.Failed() {
				t.Logf("relay log:\n%s", logs.String())
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
