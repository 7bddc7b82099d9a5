package slotmon

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// A poll reads the slot as `walrelay slot inspect` does; the stall grows
// while the server's WAL is ahead of a slot that does not move, and is 0
// again once the slot catches up.
func TestPollAndStall(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	testenv.Exec(t, dsn, `SELECT pg_create_logical_replication_slot('mon', 'pgoutput')`)
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "test", "mon")
	sm := New(dsn, "mon", time.Second, m, nil)
	sm.Register(m)
	ctx := context.Background()

	sm.poll(ctx)
	st := sm.Current()
	if !st.Exists || st.Active || st.WALStatus != "reserved" || st.ConfirmedFlushLSN == "" || st.CurrentLSN == "" || st.Error != "" {
		t.Fatalf("first poll: %+v", st)
	}
	if got := testenv.MetricValue(t, reg, "walrelay_slot_wal_status", map[string]string{"status": "reserved"}); got != 1 {
		t.Errorf("slot_wal_status{status=reserved} = %v, want 1", got)
	}
	if got := testenv.MetricValue(t, reg, "walrelay_slot_safe_wal_size_bytes", nil); !math.IsInf(got, 1) {
		t.Errorf("slot_safe_wal_size_bytes = %v, want +Inf (max_slot_wal_keep_size unlimited)", got)
	}

	testenv.Exec(t, dsn, `CREATE TABLE t AS SELECT 1 AS x`) // WAL the slot has not confirmed
	sm.poll(ctx)
	time.Sleep(300 * time.Millisecond)
	sm.poll(ctx)
	st = sm.Current()
	if st.ConfirmedLagBytes <= 0 || st.StallSeconds < 0.3 {
		t.Errorf("behind and not moving: lag %d bytes, stall %.2fs; want lag > 0 and stall >= 0.3s", st.ConfirmedLagBytes, st.StallSeconds)
	}
	if got := testenv.MetricValue(t, reg, "walrelay_slot_stall_seconds", nil); got != st.StallSeconds {
		t.Errorf("slot_stall_seconds = %v, want %v", got, st.StallSeconds)
	}

	testenv.Exec(t, dsn, `SELECT pg_replication_slot_advance('mon', pg_current_wal_lsn())`)
	sm.poll(ctx)
	if st = sm.Current(); st.ConfirmedLagBytes != 0 || st.StallSeconds > 0.1 {
		t.Errorf("caught up: lag %d bytes, stall %.2fs; want 0 and ~0", st.ConfirmedLagBytes, st.StallSeconds)
	}
}

// A failed poll counts, says why, and keeps the last good readings.
func TestPollErrorKeepsLastReadings(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	testenv.Exec(t, dsn, `SELECT pg_create_logical_replication_slot('mon', 'pgoutput')`)
	m := metrics.New(prometheus.NewRegistry(), "test", "mon")
	sm := New(dsn, "mon", time.Second, m, nil)
	ctx := context.Background()
	sm.poll(ctx)
	good := sm.Current()

	testenv.Exec(t, dsn, `SELECT pg_drop_replication_slot('mon')`)
	sm.poll(ctx)
	st := sm.Current()
	if !strings.Contains(st.Error, `replication slot does not exist: "mon"`) {
		t.Errorf("Error = %q, want it to say the slot does not exist", st.Error)
	}
	if !st.Exists || st.ConfirmedFlushLSN != good.ConfirmedFlushLSN || !st.PolledAt.After(good.PolledAt) {
		t.Errorf("after a failed poll: %+v; want the last good readings (%+v) with a newer PolledAt", st, good)
	}
	if got := testutil.ToFloat64(m.SlotPollErrors); got != 1 {
		t.Errorf("slot_poll_errors_total = %v, want 1", got)
	}
}
