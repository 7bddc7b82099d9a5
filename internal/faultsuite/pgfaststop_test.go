package faultsuite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/slotrecord"
	"github.com/walrelay/walrelay/internal/testenv"
)

// fastStopWithin is how long a `pg_ctl stop -m fast` may take before the
// scenario calls it hung: a hang check (a walsender waiting for a client
// that never confirms waits for ever), not a speed assertion.
const fastStopWithin = 45 * time.Second

// testPostgresFastRestart stops a private cluster with -m fast (what
// systemctl restart, a minor upgrade or a switchover's first step does)
// and starts it again, with the relay and the writers running. At
// shutdown a logical walsender waits until its client confirms everything
// it sent, and walrelay confirms only what it recorded, which a server
// shutting down refuses: the relay must end its session instead, so that
// the stop completes. Required: every stop completes, the same relay
// process carries on by itself, the verifier finds nothing lost
// (exactly-once: no duplicate either), and the slot record is not marked
// jumped (the slot was never confirmed past it).
func testPostgresFastRestart(t *testing.T, row *result, d delivery) {
	c := testenv.PrivateCluster(t, localpg.Options{})
	f := newFixtureOn(t, c.DSN("postgres"), d)
	w := startWorkload(t, f.dsn, defaultLoad)
	p := startRelay(t, "relay", f.env)
	waitPublished(t, f.adm, 200, time.Minute)
	stops := pick(2, 6)
	var maxRec, maxStop time.Duration
	for range stops {
		time.Sleep(1500 * time.Millisecond)
		ctx, cancel := context.WithTimeout(t.Context(), fastStopWithin)
		begin := time.Now()
		err := c.Stop(ctx, "fast")
		cancel()
		if err != nil {
			t.Fatalf("pg_ctl stop -m fast did not complete within %s while walrelay relayed: %v", fastStopWithin, err)
		}
		maxStop = max(maxStop, time.Since(begin))
		time.Sleep(2 * time.Second)
		ctx, cancel = context.WithTimeout(t.Context(), 2*time.Minute)
		err = c.Restart(ctx)
		cancel()
		if err != nil {
			t.Fatalf("restarting postgres: %v", err)
		}
		maxRec = max(maxRec, recoverAfter(t, f.dsn, time.Now()))
		requireRunning(t, p, "across a fast Postgres restart")
	}
	if !p.logHas("postgres is shutting down and the slot's position cannot be recorded: ending the replication session") {
		t.Error("the relay never logged that it ended its session for a shutdown: the stops prove nothing about it")
	}
	rep, read := f.verify(t, w)
	s, err := slotrecord.Read(t.Context(), testenv.Connect(t, f.dsn), slotrecord.Table{Schema: "public"}, slotFor(f.dsn))
	switch {
	case err != nil:
		t.Errorf("reading the slot record: %v", err)
	case s.Record == nil:
		t.Error("no slot record")
	case s.Record.JumpedAt != nil || s.Jumped() != "":
		t.Errorf("the slot record is marked jumped after fast restarts: %q (found now: %q)", s.Record.Jump, s.Jumped())
	}
	stopClean(t, p)
	fill(row, rep, read)
	row.recovery = maxRec
	row.notes = fmt.Sprintf("%d × pg_ctl stop -m fast (longest %s), 2s down, restart; same relay process", stops, maxStop.Round(time.Millisecond))
	if rep.Duplicates != 0 { // at-least-once: not asserted (exactly-once is, by verify)
		t.Logf("%d duplicates after reconnects, e.g. %v", rep.Duplicates, rep.DuplicateIDs)
	}
}
