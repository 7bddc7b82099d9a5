package replication

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/setup"
	"github.com/walrelay/walrelay/internal/testenv"
)

// blockingHandler is a recorder whose first Insert blocks for block,
// calling KeepAlive every 50ms meanwhile when keepAlive is set, as a
// handler waiting for a schema registry does.
type blockingHandler struct {
	*recorder
	block     time.Duration
	keepAlive bool
	blocked   atomic.Bool
}

func (b *blockingHandler) Insert(ctx context.Context, rel *pglogrepl.RelationMessage, m *pglogrepl.InsertMessage, lsn pglogrepl.LSN, buf *Buffer) error {
	if b.blocked.CompareAndSwap(false, true) {
		for end := time.Now().Add(b.block); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if !b.keepAlive {
				continue
			}
			if err := KeepAlive(ctx); err != nil {
				return err
			}
		}
	}
	return b.recorder.Insert(ctx, rel, m, lsn, buf)
}

// A Handler that blocks for twice wal_sender_timeout keeps its session
// with KeepAlive (no reconnect, each of two rows handled once), and loses it
// without (the walsender ends the session: the stream reconnects and
// Postgres sends the transaction again). KeepAlive is a no-op on a
// context the stream did not pass.
func TestKeepAliveWhileHandlerBlocks(t *testing.T) {
	if err := KeepAlive(t.Context()); err != nil {
		t.Fatalf("KeepAlive on a context the stream did not pass: %v", err)
	}
	const timeout = 2 * time.Second
	c := testenv.PrivateCluster(t, localpg.Options{Settings: map[string]string{"wal_sender_timeout": fmt.Sprint(timeout.Milliseconds(), "ms")}})
	for i, keepAlive := range []bool{true, false} {
		t.Run(fmt.Sprintf("keepalive=%t", keepAlive), func(t *testing.T) {
			db := fmt.Sprintf("ka%d", i)
			testenv.Exec(t, c.DSN("postgres"), "CREATE DATABASE "+db)
			dsn := c.DSN(db)
			slot := fmt.Sprintf("walrelay_keepalive_%d", i)
			if _, err := setup.Run(t.Context(), testenv.Connect(t, dsn), setup.Names{Schema: "public", Table: "outbox", Publication: weirdPublication, Slot: slot}); err != nil {
				t.Fatalf("setup: %v", err)
			}
			h := &blockingHandler{recorder: &recorder{}, block: 2 * timeout, keepAlive: keepAlive}
			cp := &fakeCheckpointer{}
			start, _ := testenv.SlotLSNs(t, dsn, slot)
			cp.set(start)
			cfg := testConfig(dsn, slot, weirdPublication)
			cfg.StatusInterval = 100 * time.Millisecond
			cfg.MinBackoff, cfg.MaxBackoff = 20*time.Millisecond, 100*time.Millisecond
			s := newStream(t, cfg, h, cp, nil)
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- s.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
			}()
			f := &streamFixture{dsn: dsn, cp: cp, rec: h.recorder, done: done}
			waitSlotActive(t, dsn, slot, done)
			xid := f.commitTx(t, 1)
			f.waitFor(t, "the row's commit", func(evs []event) bool { return commitOf(evs, xid, 0) >= 0 })
			// A second transaction, read once the stream is past the
			// first: on the same session if it was kept, on a new one
			// (after the first is sent again) if it was lost.
			xid2 := f.commitTx(t, 1)
			evs := f.waitFor(t, "the second transaction's commit", func(evs []event) bool { return commitOf(evs, xid2, 0) >= 0 })
			inserts, lost := 0, 0
			for _, e := range evs {
				switch e.kind {
				case "insert":
					inserts++
				case "lost":
					lost++
				}
			}
			t.Logf("keepalive=%t: reconnects %d, sessions lost %d, inserts handled %d, last error: %v", keepAlive, s.Reconnects(), lost, inserts, s.LastError())
			if keepAlive {
				if s.Reconnects() != 0 || lost != 0 || inserts != 2 {
					t.Errorf("with KeepAlive the session was lost (reconnects %d, lost %d, inserts %d; last error %v); want it kept",
						s.Reconnects(), lost, inserts, s.LastError())
				}
			} else if s.Reconnects() == 0 || lost == 0 {
				t.Errorf("without KeepAlive the session survived a handler blocked for %s with wal_sender_timeout %s: the test proves nothing", 2*timeout, timeout)
			}
		})
	}
}

// waitSlotActive waits until a walsender holds slot; it fails the test if
// the stream (done) stopped meanwhile.
func waitSlotActive(t *testing.T, dsn, slot string, done chan error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !testenv.QueryValue[bool](t, dsn, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, slot) {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("stream stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream never became active on slot %s", slot)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
