package relay

import (
	"context"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/checkpoint"
	"github.com/walrelay/walrelay/internal/slotrecord"
	"github.com/walrelay/walrelay/internal/testenv"
)

// After a failover the recorder's next write may reach the new primary
// before the next replication session checks the slot: there the synced
// slot can be past the record row the standby replayed (the row of a
// position commits after the position), at a position this process
// recorded itself. The write must reclaim it as the session does, not
// mark the slot as moved by someone else (which stops the relay at its
// next session: TestFailoverWithoutSynchronizedStandbySlots failed so in
// CI). Here the new primary's state is made by hand: the record row set
// back below the slot, the recorder's own last record at the slot.
func TestRecorderReclaimsOwnPositionOnNewConnection(t *testing.T) {
	ctx := t.Context()
	dsn, slot, table, conn, s := recordedSlot(t)
	behind := s.SlotConfirmed
	// WAL past the record, the slot advanced over it: the slot's new
	// position is this process's own last record.
	testenv.Exec(t, dsn, `CREATE TABLE filler AS SELECT g FROM generate_series(1, 100) g`)
	own := testenv.ParseLSN(t, testenv.QueryValue[string](t, dsn, `SELECT end_lsn::text FROM pg_replication_slot_advance('`+slot+`', pg_current_wal_lsn())`))
	if own <= behind {
		t.Fatalf("the slot did not move past the record: %s <= %s", own, behind)
	}
	testenv.Exec(t, dsn, `CREATE TABLE filler2 AS SELECT g FROM generate_series(1, 100) g`)
	to := testenv.ParseLSN(t, testenv.QueryValue[string](t, dsn, `SELECT pg_current_wal_lsn()::text`))

	tracker := checkpoint.New(checkpoint.Limits{})
	tracker.SetStart(to) // acknowledged through to: what the recorder records
	c := &recorder{dsn: dsn, table: table, slot: slot, tracker: tracker, log: slog.New(slog.DiscardHandler),
		jumped: prometheus.NewGauge(prometheus.GaugeOpts{Name: "jumped"})}
	c.on.Store(true)
	c.recorded.Store(uint64(own))
	c.system = s.System
	if err := c.raise(context.WithoutCancel(ctx), true); err != nil {
		t.Fatalf("recording %s: %v", to, err)
	}
	after, err := slotrecord.Read(ctx, conn, table, slot)
	if err != nil {
		t.Fatal(err)
	}
	if r := after.Record; r == nil || r.JumpedAt != nil {
		t.Fatalf("the recorder's write on a new connection took the slot at its own position %s (record %s) for one moved by someone else: %+v", own, behind, r)
	}
	if after.Record.Confirmed != to {
		t.Errorf("record at %s, want %s", after.Record.Confirmed, to)
	}
}

// recordedSlot makes a database with a logical slot and walrelay's record
// of it (the record table in public, the slot's position as baseline), and
// returns them with a connection and the state the baseline left.
func recordedSlot(t *testing.T) (dsn, slot string, table slotrecord.Table, conn *pgx.Conn, s slotrecord.State) {
	t.Helper()
	dsn = testenv.Postgres(t).NewDatabase(t)
	slot = testenv.UniqueName(t, "s")
	testenv.Exec(t, dsn, `SELECT pg_create_logical_replication_slot('`+slot+`', 'pgoutput')`)
	conn = testenv.Connect(t, dsn)
	table = slotrecord.Table{Schema: "public"}
	if _, err := table.Ensure(t.Context(), conn); err != nil {
		t.Fatal(err)
	}
	s, _, err := slotrecord.Baseline(t.Context(), conn, table, slot, "test")
	if err != nil {
		t.Fatal(err)
	}
	return dsn, slot, table, conn, s
}
