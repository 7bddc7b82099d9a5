package replication

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/setup"
	"github.com/walrelay/walrelay/internal/testenv"
)

// logLines decodes a JSON log and returns the lines whose message
// contains msg.
func logLines(log *testenv.SyncBuffer, msg string) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(log.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && strings.Contains(m["msg"].(string), msg) {
			out = append(out, m)
		}
	}
	return out
}

// Pointed at a standby whose slot is a synchronized copy of the primary's
// failover slot (PostgreSQL 17+), the stream waits with one log line that
// says so, not as for a slot "active in another process" (the slot sync
// worker holds the copy at times), and starts streaming once the standby
// is promoted.
func TestStreamWaitsOnSyncedCopy(t *testing.T) {
	pair := testenv.StartFailoverPair(t)
	primary := pair.Primary.DSN("postgres")
	names := setup.Names{Schema: "public", Table: "outbox", Publication: weirdPublication, Slot: testSlot, LeaveSlot: true}
	if _, err := setup.Run(t.Context(), testenv.Connect(t, primary), names); err != nil {
		t.Fatalf("setup: %v", err)
	}
	testenv.Exec(t, primary, `SELECT pg_create_logical_replication_slot($1, 'pgoutput', failover => true)`, testSlot)
	pair.WaitSynced(t, testSlot, time.Minute)

	log := &testenv.SyncBuffer{}
	rec := &recorder{}
	cfg := testConfig(pair.Standby.DSN("postgres"), testSlot, weirdPublication)
	cfg.MinBackoff, cfg.MaxBackoff = 10*time.Millisecond, 50*time.Millisecond
	s := newStream(t, cfg, rec, &fakeCheckpointer{}, slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v after cancel", err)
		}
		if t.Failed() {
			t.Logf("stream log:\n%s", log.String())
		}
	}()
	// Several attempts, so that a line per attempt would show.
	deadline := time.Now().Add(30 * time.Second)
	for len(logLines(log, "still waiting for this standby's promotion")) < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than 5 attempts on the synchronized copy within 30s; LastError: %v", s.LastError())
		}
		time.Sleep(20 * time.Millisecond)
	}
	err := s.LastError()
	if !errors.Is(err, ErrSlotSynced) || errors.Is(err, ErrSlotActive) {
		t.Errorf("LastError = %v, want ErrSlotSynced (not ErrSlotActive)", err)
	}
	for _, want := range []string{testSlot, "synchronized copy", "usable when this server is promoted"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("LastError = %v, want it to say %q", err, want)
		}
	}
	if n := len(logLines(log, "waiting for this standby's promotion to stream")); n != 1 {
		t.Errorf("%d lines about waiting for the promotion, want exactly 1", n)
	}
	if n := len(logLines(log, "replication session lost")); n != 0 {
		t.Errorf("%d \"replication session lost\" lines while waiting on the synchronized copy, want none", n)
	}
	if n := len(sessions(rec.snapshot())); n != 0 {
		t.Errorf("the handler was given %d sessions on the synchronized copy", n)
	}

	pctx, pcancel := context.WithTimeout(t.Context(), time.Minute)
	defer pcancel()
	if err := pair.Standby.Promote(pctx); err != nil {
		t.Fatalf("Promote: %v", err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for len(sessions(rec.snapshot())) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no session on the promoted server within 30s; LastError: %v", s.LastError())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Every error the stream shows keeps Postgres's DETAIL, which
// pgconn.PgError.Error leaves out and which says why: here, starting
// replication on a slot max_slot_wal_keep_size invalidated.
func TestStreamErrorsKeepPostgresDetail(t *testing.T) {
	c := testenv.PrivateCluster(t, localpg.Options{Settings: map[string]string{"max_slot_wal_keep_size": "1MB"}})
	dsn := c.DSN("postgres")
	setupSlot(t, dsn)
	for range 4 { // WAL past max_slot_wal_keep_size, then a checkpoint invalidates the slot
		testenv.Exec(t, dsn, `CREATE TABLE IF NOT EXISTS filler (x int); INSERT INTO filler VALUES (1); SELECT pg_switch_wal()`)
	}
	testenv.Exec(t, dsn, `CHECKPOINT`)
	if st := testenv.QueryValue[string](t, dsn, `SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1`, testSlot); st != "lost" {
		t.Fatalf("wal_status %q, want lost (the test could not invalidate the slot)", st)
	}
	log := &testenv.SyncBuffer{}
	cfg := testConfig(dsn, testSlot, weirdPublication)
	cfg.MinBackoff, cfg.MaxBackoff = 10*time.Millisecond, 50*time.Millisecond
	s := newStream(t, cfg, &recorder{}, &fakeCheckpointer{}, slog.New(slog.NewJSONHandler(log, nil)))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	for s.LastError() == nil && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	runErr := <-done
	err := s.LastError()
	t.Logf("LastError: %v; Run: %v", err, runErr)
	// "This slot has been invalidated because it exceeded the maximum
	// reserved size." (14-17), "This replication slot has been
	// invalidated due to "wal_removed"." (18).
	hasDetail := func(s string) bool {
		_, d, ok := strings.Cut(s, "(DETAIL: This ")
		return ok && strings.Contains(d, "invalidated")
	}
	if err == nil || !hasDetail(err.Error()) {
		t.Errorf("LastError = %v, want Postgres's DETAIL saying the slot was invalidated", err)
	}
	if runErr != nil && !hasDetail(runErr.Error()) {
		t.Errorf("Run = %v, want Postgres's DETAIL saying the slot was invalidated", runErr)
	}
	for _, l := range logLines(log, "replication session lost") {
		if e, _ := l["err"].(string); !hasDetail(e) {
			t.Errorf("logged error %q lacks Postgres's DETAIL saying the slot was invalidated", e)
		}
	}
}
