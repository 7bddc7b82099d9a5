package replication

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// DESIGN.md invariant 1: the positions sent to Postgres are the Checkpointer's,
// never what the stream received nor a keepalive's WAL end.
func TestStreamReportsOnlyCheckpointerPosition(t *testing.T) {
	f := newStreamFixture(t)
	xids := []uint32{f.commitTx(t, 2), f.commitTx(t, 3), f.commitTx(t, 1)}
	evs := f.waitFor(t, "three commits", func(evs []event) bool { return commitOf(evs, xids[2], 0) >= 0 })
	// Only the test's own transactions: PostgreSQL 14's pgoutput also
	// sends BEGIN and COMMIT for transactions with no published change
	// (15 stopped sending empty transactions), such as one of the
	// fixture's own right after the slot was created.
	var ends []pglogrepl.LSN
	inserts := 0
	for _, e := range evs {
		if !slices.Contains(xids, e.xid) {
			continue
		}
		switch e.kind {
		case "commit":
			ends = append(ends, e.lsn)
		case "insert":
			inserts++
		}
	}
	if len(ends) != 3 || inserts != 6 || !(f.start < ends[0] && ends[0] < ends[1] && ends[1] < ends[2]) {
		t.Fatalf("want 3 commits with increasing end LSNs after %s and 6 inserts; got %v", f.start, evs)
	}
	// Keepalives told the stream the server's WAL end; it must still
	// report only what the checkpointer confirms.
	deadline := time.Now().Add(10 * time.Second)
	for pglogrepl.LSN(f.cp.walEnd.Load()) < ends[2] {
		if time.Now().After(deadline) {
			t.Fatalf("no keepalive reported a WAL end at or past %s (saw %s)", ends[2], pglogrepl.LSN(f.cp.walEnd.Load()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.holds(t, f.start, 500*time.Millisecond)

	// Confirm the first transaction only: the slot moves exactly there.
	f.cp.set(ends[0])
	f.waitConfirmed(t, ends[0])
	f.holds(t, ends[0], 500*time.Millisecond)

	// Then everything received.
	f.cp.set(ends[2])
	f.waitConfirmed(t, ends[2])
	f.holds(t, ends[2], 200*time.Millisecond)
	f.running(t)
}

// A stream busy with a long run of messages, which it reads from its
// buffer without waiting on the socket, still sends a status update about
// every StatusInterval (50ms here): the walsender ends a session that has
// been silent for wal_sender_timeout, and the slot's position is only as
// fresh as the last update.
func TestStreamReportsWhileBusy(t *testing.T) {
	f := newStreamFixture(t)
	const rows = 2000
	f.rec.slow.Store(int64(time.Millisecond)) // about 2s of work for the handler
	xid := f.commitTx(t, rows)
	replies := map[string]bool{}
	for {
		f.running(t)
		replies[testenv.QueryValue[string](t, f.dsn, `
			SELECT coalesce(max(r.reply_time::text), '')
			FROM pg_stat_replication r JOIN pg_replication_slots s ON s.active_pid = r.pid
			WHERE s.slot_name = $1`, testSlot)] = true
		if commitOf(f.rec.snapshot(), xid, 0) >= 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The loop reads the clock every clockEvery (64) messages, here one
	// per row, so about every 64ms: some 30 updates in 2s. Updates only at
	// socket reads would give a handful.
	if len(replies) < 10 {
		t.Errorf("%d distinct status update times while the stream handled %d rows for 2s+, want 10 or more", len(replies), rows)
	}
}

// After its walsender is terminated the stream reconnects, tells the
// handler the session was lost, and resumes from the slot: what was
// confirmed is not re-sent, what was not confirmed is.
func TestStreamReconnectsAfterWalsenderTerminated(t *testing.T) {
	f := newStreamFixture(t)
	confirmedXid := f.commitTx(t, 1)
	evs := f.waitFor(t, "the first commit", func(evs []event) bool { return commitOf(evs, confirmedXid, 0) >= 0 })
	f.cp.set(evs[commitOf(evs, confirmedXid, 0)].lsn)
	f.waitConfirmed(t, f.cp.Confirmed())

	pendingXid := f.commitTx(t, 2)
	f.waitFor(t, "the second commit", func(evs []event) bool { return commitOf(evs, pendingXid, 0) >= 0 })

	oldPid := testenv.QueryValue[int32](t, f.dsn, `SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1`, testSlot)
	testenv.Exec(t, f.dsn, `SELECT pg_terminate_backend($1)`, oldPid)

	evs = f.waitFor(t, "SessionLost and the unconfirmed transaction re-sent", func(evs []event) bool {
		for i, e := range evs {
			if e.kind == "lost" {
				return commitOf(evs, pendingXid, i) >= 0
			}
		}
		return false
	})
	lost := -1
	for i, e := range evs {
		if e.kind == "lost" {
			lost = i
			break
		}
	}
	after := evs[lost+1:]
	if commitOf(after, confirmedXid, 0) >= 0 {
		t.Errorf("transaction %d was confirmed before the session was lost but was re-sent after it: %v", confirmedXid, after)
	}
	if len(after) < 2 || after[0].kind != "start" || after[1].kind != "begin" && after[1].kind != "relation" {
		t.Errorf("after reconnecting the handler should see the new session start, then the re-sent transaction from its start; got %v", after)
	}
	resentInserts := 0
	for _, e := range after {
		if e.kind == "insert" && e.xid == pendingXid {
			resentInserts++
		}
	}
	if resentInserts != 2 {
		t.Errorf("re-sent transaction %d had %d inserts, want 2: %v", pendingXid, resentInserts, after)
	}
	if pid := testenv.QueryValue[int32](t, f.dsn, `SELECT coalesce(active_pid, 0) FROM pg_replication_slots WHERE slot_name = $1`, testSlot); pid == oldPid {
		t.Errorf("slot still held by the terminated walsender %d", pid)
	}

	// The new session streams new transactions as well.
	newXid := f.commitTx(t, 1)
	f.waitFor(t, "a transaction committed after reconnecting", func(evs []event) bool { return commitOf(evs, newXid, 0) >= 0 })
	f.running(t)
}

// A permanent error (the slot does not exist) stops Run instead of
// retrying forever.
func TestStreamStopsOnMissingSlot(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	cfg := testConfig(dsn, "no_such_slot", "p")
	cfg.MinBackoff = 10 * time.Millisecond
	s := newStream(t, cfg, &recorder{}, &fakeCheckpointer{}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err := s.Run(ctx)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("Run on a missing slot: err=%v ctx=%v; want a permanent error before the timeout", err, ctx.Err())
	}
	if !strings.Contains(err.Error(), "no_such_slot") {
		t.Errorf("error does not name the slot: %v", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run timed out instead of failing: %v", err)
	}
}

// The stream has no defaults of its own: a config with a timing unset or
// out of range is refused by New, naming the field, rather than filled in.
// A zero ShutdownTimeout is valid: no wait for in-flight records.
func TestNewRefusesUnsetTimings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   string // "" = accepted
	}{
		{"walrelay's", func(*Config) {}, ""},
		{"no status interval", func(c *Config) { c.StatusInterval = 0 }, "Config.StatusInterval 0s must be positive"},
		{"negative shutdown timeout", func(c *Config) { c.ShutdownTimeout = -time.Second }, "Config.ShutdownTimeout -1s must not be negative"},
		{"no shutdown wait", func(c *Config) { c.ShutdownTimeout = 0 }, ""},
		{"no min backoff", func(c *Config) { c.MinBackoff = 0 }, "Config.MinBackoff 0s must be positive"},
		{"no max backoff", func(c *Config) { c.MaxBackoff = 0 }, "Config.MaxBackoff 0s must be at least Config.MinBackoff 250ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig("", "s", "p")
			tc.mutate(&cfg)
			_, err := New(cfg, &recorder{}, &fakeCheckpointer{}, nil)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("New = %v, want it accepted", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("New = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
