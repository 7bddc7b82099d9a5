package replication

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/setup"
	"github.com/walrelay/walrelay/internal/testenv"
)

// sessions returns the Sessions the handler was given, in order.
func sessions(evs []event) []Session {
	var out []Session
	for _, e := range evs {
		if e.kind == "start" {
			out = append(out, e.session)
		}
	}
	return out
}

// Every session starts by telling the handler which server it is on and
// where the slot is, before anything is streamed: the system and timeline
// as the server reports them, and the slot's confirmed_flush_lsn as it is
// when the session starts (moved on by the last session's reports).
func TestStreamSessionStart(t *testing.T) {
	f := newStreamFixture(t)
	system := testenv.QueryValue[string](t, f.dsn, `SELECT system_identifier::text FROM pg_control_system()`)
	timeline := testenv.QueryValue[int32](t, f.dsn, `SELECT timeline_id FROM pg_control_checkpoint()`)
	xid := f.commitTx(t, 1)
	evs := f.waitFor(t, "the first commit", func(evs []event) bool { return commitOf(evs, xid, 0) >= 0 })
	if evs[0].kind != "start" {
		t.Fatalf("first handler call %q, want the session's start: %v", evs[0].kind, evs)
	}
	first := evs[0].session
	if first.SystemID != system || first.Timeline != timeline || first.SlotConfirmed != f.start || first.XLogPos < f.start {
		t.Errorf("first session %+v; want system %s, timeline %d, slot at %s, WAL at or past it", first, system, timeline, f.start)
	}

	end := evs[commitOf(evs, xid, 0)].lsn
	f.cp.set(end)
	f.waitConfirmed(t, end)
	pid := testenv.QueryValue[int32](t, f.dsn, `SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1`, testSlot)
	testenv.Exec(t, f.dsn, `SELECT pg_terminate_backend($1)`, pid)
	evs = f.waitFor(t, "a second session", func(evs []event) bool { return len(sessions(evs)) == 2 })
	second := sessions(evs)[1]
	if second.SystemID != system || second.Timeline != timeline || second.SlotConfirmed != end || second.XLogPos < end {
		t.Errorf("second session %+v; want system %s, timeline %d, slot at %s, WAL at or past it", second, system, timeline, end)
	}
}

// A handler that refuses a session stops the stream for good, before it
// streams: the slot is never started on, nor reported to.
func TestStreamStopsWhenSessionStartFails(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	f := &streamFixture{dsn: dsn}
	setupSlot(t, dsn)
	before, _ := f.slot(t)
	refusal := errors.New("refused")
	rec := &recorder{startErr: refusal}
	cfg := testConfig(dsn, testSlot, weirdPublication)
	cfg.MinBackoff = 10 * time.Millisecond
	s := newStream(t, cfg, rec, &fakeCheckpointer{}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err := s.Run(ctx)
	if !errors.Is(err, refusal) || ctx.Err() != nil {
		t.Fatalf("Run = %v (ctx %v); want the handler's error before the timeout", err, ctx.Err())
	}
	if n := len(sessions(rec.snapshot())); n != 1 {
		t.Errorf("%d sessions started, want 1 (no retry)", n)
	}
	// The session's connection is closed when Run returns; its walsender
	// exits on its own time after that (a loaded machine: tenths of a
	// second). One still there after 5s is a session left open.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		started := testenv.QueryValue[int64](t, dsn, `SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'walsender' AND datname = current_database()`)
		if started == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%d walsenders of this database still there 5s after the refusal", started)
			break
		}
	}
	if after, _ := f.slot(t); after != before {
		t.Errorf("the slot moved from %s to %s", before, after)
	}
}

// A slot another process streams from fails the session before the
// handler is told of it: the position the slot has then is not where
// this process will start, once the other lets go.
func TestStreamWaitsForSlotHeldElsewhere(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	setupSlot(t, dsn)
	holder := testenv.HoldSlot(t, dsn, testSlot, pluginArgs([]string{weirdPublication})...)
	rec := &recorder{}
	cfg := testConfig(dsn, testSlot, weirdPublication)
	cfg.MinBackoff, cfg.MaxBackoff = 10*time.Millisecond, 50*time.Millisecond
	s := newStream(t, cfg, rec, &fakeCheckpointer{}, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for s.LastError() == nil {
		if time.Now().After(deadline) {
			t.Fatal("no session failed while the slot was held")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := s.LastError(); !errors.Is(err, ErrSlotActive) || !strings.Contains(err.Error(), testSlot) {
		t.Errorf("LastError = %v, want ErrSlotActive naming the slot", err)
	}
	// Each attempt ends anew: readiness tells a waiting standby from a
	// hung one by it.
	first, _ := s.LastSessionEnd()
	deadline = time.Now().Add(10 * time.Second)
	for at, err := s.LastSessionEnd(); !at.After(first) || !errors.Is(err, ErrSlotActive); at, err = s.LastSessionEnd() {
		if time.Now().After(deadline) {
			t.Fatalf("LastSessionEnd = %s, %v: still the first attempt's %s after 10s of retries every %s at most", at, err, first, cfg.MaxBackoff)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(sessions(rec.snapshot())); n != 0 {
		t.Errorf("the handler was given %d sessions while the slot was held elsewhere", n)
	}
	_ = holder.Close(t.Context())
	deadline = time.Now().Add(30 * time.Second)
	for len(sessions(rec.snapshot())) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stream did not take the slot once it was free")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v after cancel", err)
	}
}

// setupSlot creates the outbox table, the publication and the slot of the
// stream fixture in dsn's database.
func setupSlot(t *testing.T, dsn string) {
	t.Helper()
	names := setup.Names{Schema: "public", Table: "outbox", Publication: weirdPublication, Slot: testSlot}
	if _, err := setup.Run(t.Context(), testenv.Connect(t, dsn), names); err != nil {
		t.Fatalf("setup: %v", err)
	}
}

// A confirmed position that moves while records are in flight (an ack,
// on another goroutine) is reported soon, although the stream is waiting
// for data and the status interval is long; the interval only bounds the
// time between updates. Each of several moves reaches the slot within
// 10s, where the interval (1m) and Postgres's own requests for a reply
// (every wal_sender_timeout/2, 30s) would take longer.
func TestStreamReportsConfirmedPromptly(t *testing.T) {
	f := newStreamFixtureWith(t, func(c *Config) { c.StatusInterval = time.Minute })
	f.cp.inFlight.Store(1)
	for i := range 3 {
		xid := f.commitTx(t, 1)
		evs := f.waitFor(t, "the commit", func(evs []event) bool { return commitOf(evs, xid, 0) >= 0 })
		end := evs[commitOf(evs, xid, 0)].lsn
		time.Sleep(50 * time.Millisecond) // the stream is waiting for data now
		f.cp.set(end)
		moved := time.Now()
		for {
			got, _ := f.slot(t)
			if got == end {
				break
			}
			if time.Since(moved) > 10*time.Second {
				t.Fatalf("move %d: confirmed %s 10s ago; the slot is at %s", i, end, got)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	f.holds(t, f.cp.Confirmed(), 300*time.Millisecond)
}

func TestCheckServerVersion(t *testing.T) {
	for _, tc := range []struct {
		version string
		tooOld  bool
	}{
		{"15.4 (Debian 15.4-1.pgdg120+1)", false},
		{"14beta1", false},
		{"14.0", false},
		{"17.2", false},
		{"13.16", true},
		{"9.6.24", true},
		{"", false}, // unknown: START_REPLICATION decides
	} {
		err := CheckServerVersion(tc.version)
		if got := errors.Is(err, ErrServerTooOld); got != tc.tooOld {
			t.Errorf("CheckServerVersion(%q) = %v, want too old: %v", tc.version, err, tc.tooOld)
		}
	}
}
