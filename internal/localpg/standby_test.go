package localpg_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/localpg"
)

// A standby made from a running primary replays what the primary commits,
// and after the primary is killed and the standby promoted, the standby
// has every transaction the primary committed before it replicated them
// and accepts writes.
func TestStandbyKillPromote(t *testing.T) {
	p := start(t, localpg.Options{})
	exec(t, p.DSN(""), "CREATE TABLE t (v int); INSERT INTO t VALUES (1)")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := p.NewStandby(ctx, localpg.StandbyOptions{Slot: "phys1"})
	if err != nil {
		t.Fatalf("NewStandby: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing standby: %v", err)
		}
	})
	if got := queryString(t, s.DSN(""), "SELECT pg_is_in_recovery()::text"); got != "true" {
		t.Fatalf("standby pg_is_in_recovery = %s", got)
	}
	if got := queryString(t, p.DSN(""), "SELECT active::text FROM pg_replication_slots WHERE slot_name = 'phys1'"); got != "true" {
		t.Errorf("primary's physical slot active = %s", got)
	}
	exec(t, p.DSN(""), "INSERT INTO t VALUES (2)")
	lsn := queryString(t, p.DSN(""), "SELECT pg_current_wal_lsn()::text")
	waitFor(t, 30*time.Second, func() bool {
		return queryString(t, s.DSN(""), "SELECT (pg_last_wal_replay_lsn() >= '"+lsn+"')::text") == "true"
	})
	if got := queryString(t, s.DSN(""), "SELECT sum(v)::text FROM t"); got != "3" {
		t.Fatalf("standby sum = %s, want 3", got)
	}

	if err := p.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
	defer ccancel()
	if conn, err := pgx.Connect(cctx, p.DSN("")); err == nil {
		conn.Close(cctx)
		t.Fatal("connected to a killed primary")
	}
	if err := s.Promote(ctx); err != nil {
		t.Fatalf("Promote: %v", err)
	}
	exec(t, s.DSN(""), "INSERT INTO t VALUES (4)")
	if got := queryString(t, s.DSN(""), "SELECT sum(v)::text FROM t"); got != "7" {
		t.Fatalf("promoted sum = %s, want 7", got)
	}
	// The killed primary restarts with crash recovery.
	if err := p.Restart(ctx); err != nil {
		t.Fatalf("Restart after Kill: %v", err)
	}
	if got := queryString(t, p.DSN(""), "SELECT sum(v)::text FROM t"); got != "3" {
		t.Fatalf("old primary sum = %s, want 3", got)
	}
}

func waitFor(t *testing.T, d time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
