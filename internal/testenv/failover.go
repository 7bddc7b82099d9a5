package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/localpg"
)

// ServerMajor returns the major version of the server at dsn (14, 17...).
func ServerMajor(tb testing.TB, dsn string) int {
	tb.Helper()
	return QueryValue[int](tb, dsn, `SELECT current_setting('server_version_num')::int / 10000`)
}

// SkipBefore17 skips a test whose server (dsn's: the package's, from
// $WALRELAY_PG_BIN) is older than PostgreSQL 17, which added failover
// slots.
func SkipBefore17(tb testing.TB, dsn string) {
	tb.Helper()
	if major := ServerMajor(tb, dsn); major < 17 {
		tb.Skipf("failover slots need PostgreSQL 17 or newer; the server is %d (set WALRELAY_PG_BIN to a 17+ bin directory: .ci/pg-matrix does)", major)
	}
}

// SlotFailover reports whether slot is a failover slot (PostgreSQL 17+).
func SlotFailover(tb testing.TB, dsn, slot string) bool {
	tb.Helper()
	return QueryValue[bool](tb, dsn, `SELECT failover FROM pg_replication_slots WHERE slot_name = $1`, slot)
}

// FailoverPair is a private primary and a hot standby of it set up for
// Postgres 17's failover slots: the standby streams through the physical
// slot StandbySlot, with sync_replication_slots=on (and the standby
// defaults of localpg.NewStandby: hot_standby_feedback=on,
// primary_conninfo with dbname), and the primary's
// synchronized_standby_slots names StandbySlot.
type FailoverPair struct {
	Primary, Standby *localpg.Cluster
	StandbySlot      string
}

// StartFailoverPair starts a FailoverPair from the server binaries the
// package's tests use ($WALRELAY_PG_BIN, or localpg's default). It skips
// the test when that server is older than Postgres 17, which has no
// failover slots.
func StartFailoverPair(tb testing.TB) *FailoverPair {
	tb.Helper()
	p := PrivateCluster(tb, localpg.Options{})
	if major := ServerMajor(tb, p.DSN("postgres")); major < 17 {
		tb.Skipf("failover slots need PostgreSQL 17 or newer; the server is %d (set %s to a 17+ bin directory: .ci/pg-majors.sh 17 prints one)", major, localpg.EnvBinDir)
	}
	ctx, cancel := context.WithTimeout(tb.Context(), 2*time.Minute)
	defer cancel()
	const slot = "failover_standby"
	s, err := p.NewStandby(ctx, localpg.StandbyOptions{Slot: slot, Settings: map[string]string{"sync_replication_slots": "on"}})
	if err != nil {
		tb.Fatalf("testenv: starting the standby: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("testenv: closing the standby: %v", err)
		}
	})
	Exec(tb, p.DSN("postgres"), `ALTER SYSTEM SET synchronized_standby_slots = '`+slot+`'`)
	Exec(tb, p.DSN("postgres"), `SELECT pg_reload_conf()`)
	return &FailoverPair{Primary: p, Standby: s, StandbySlot: slot}
}

// WaitSynced waits until the standby has a synchronized copy of slot
// (pg_replication_slots.synced). The slot sync worker copies a slot only
// once the primary's slot needs no WAL or catalog rows the standby lacks,
// so a slot nobody streams from is moved on the primary: it writes a
// running-transactions record (pg_log_standby_snapshot) and, while no
// process holds the slot, advances it to the primary's WAL end
// (pg_replication_slot_advance). Call it only when nothing unpublished is
// in the slot.
func (f *FailoverPair) WaitSynced(tb testing.TB, slot string, timeout time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if QueryValue[bool](tb, f.Standby.DSN("postgres"),
			`SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1 AND synced AND NOT temporary)`, slot) {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("testenv: no synchronized copy of slot %q on the standby within %s; standby log:\n%s", slot, timeout, f.Standby.LogTail(30))
		}
		Exec(tb, f.Primary.DSN("postgres"), `SELECT pg_log_standby_snapshot()`)
		Exec(tb, f.Primary.DSN("postgres"), `SELECT pg_replication_slot_advance(slot_name, pg_current_wal_lsn())
			FROM pg_replication_slots WHERE slot_name = $1 AND NOT active`, slot)
		time.Sleep(200 * time.Millisecond)
	}
}
