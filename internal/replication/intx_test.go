package replication

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/testenv"
)

// Issue 32, item 6: a session that ends inside a transaction leaves the
// stream outside any transaction. The stream passes a keepalive's WAL end
// to the Checkpointer only outside a transaction (Begin to Commit); when
// the next session does not send the interrupted transaction again (after
// a WAL-history reset the handler starts from another position; here the
// slot is advanced past it between the sessions), a stream that kept its
// in-transaction flag would pass on no keepalive until the next Commit,
// and an idle slot would pin WAL. Both ways a session ends inside a
// transaction are covered: the walsender terminated (the connection is
// lost) and the Handler restarting the session (ErrRestartSession, what
// the relay does when a checkpoint is disproved at a Begin).
func TestStreamLeavesTheTransactionWhenASessionEnds(t *testing.T) {
	for _, how := range []string{"walsender terminated", "handler restarts the session"} {
		t.Run(how, func(t *testing.T) {
			f := newStreamFixture(t)
			advanced := make(chan error, 1)
			// The next xid: the test's transaction has it or a later one.
			// (PostgreSQL 14 also sends empty transactions, which come
			// before it and must not be the one interrupted.)
			next := uint32(testenv.QueryValue[int64](t, f.dsn, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint`))
			f.rec.mu.Lock()
			if how == "handler restarts the session" {
				restarted := false
				f.rec.onBegin = func(xid uint32) error {
					if restarted || xid < next {
						return nil
					}
					restarted = true
					return fmt.Errorf("checkpoint disproved at xid %d: %w", xid, ErrRestartSession)
				}
			}
			// The second session starts past the interrupted transaction,
			// as a session on another WAL history starts elsewhere.
			f.rec.onStart = func(n int, _ Session) error {
				if n != 2 {
					return nil
				}
				lsn, err := advanceSlot(f.dsn)
				if err == nil {
					f.cp.set(lsn)
				}
				advanced <- err
				return err
			}
			f.rec.mu.Unlock()
			rows := 1
			if how == "walsender terminated" {
				// Large enough that its Commit is not in the socket's
				// buffers when the walsender goes, slow until then.
				rows = 300000
				f.rec.slow.Store(int64(100 * time.Millisecond))
			}

			xid := f.commitTx(t, rows)
			f.waitFor(t, "the transaction's Begin", func(evs []event) bool {
				for _, e := range evs {
					if e.kind == "begin" && e.xid == xid {
						return true
					}
				}
				return false
			})
			if how == "walsender terminated" {
				pid := testenv.QueryValue[int32](t, f.dsn, `SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1`, testSlot)
				testenv.Exec(t, f.dsn, `SELECT pg_terminate_backend($1)`, pid)
				f.rec.slow.Store(0)
			}
			select {
			case err := <-advanced:
				if err != nil {
					t.Fatalf("advancing the slot between the sessions: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("no second session started")
			}
			f.waitActive(t)
			if evs := f.rec.snapshot(); commitOf(evs, xid, 0) >= 0 {
				t.Fatalf("the interrupted transaction was committed to the handler; the test proves nothing: %v", evs)
			}

			// WAL the publication does not cover: no transaction is sent
			// (PostgreSQL 15 skips empty ones), only keepalives.
			testenv.Exec(t, f.dsn, `CREATE TABLE IF NOT EXISTS filler (x int); INSERT INTO filler VALUES (1)`)
			end := testenv.ParseLSN(t, testenv.QueryValue[string](t, f.dsn, `SELECT pg_current_wal_lsn()::text`))
			deadline := time.Now().Add(20 * time.Second)
			for pglogrepl.LSN(f.cp.walEnd.Load()) < end {
				f.running(t)
				if time.Now().After(deadline) {
					t.Fatalf("no idle keepalive reached the checkpointer after the session ended inside transaction %d: WAL end seen %s, server at %s",
						xid, pglogrepl.LSN(f.cp.walEnd.Load()), end)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// advanceSlot moves the (inactive) slot to the server's WAL position and
// returns it.
func advanceSlot(dsn string) (pglogrepl.LSN, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var s string
	if err := conn.QueryRow(ctx, `SELECT end_lsn::text FROM pg_replication_slot_advance($1, pg_current_wal_lsn())`, testSlot).Scan(&s); err != nil {
		return 0, err
	}
	return pglogrepl.ParseLSN(s)
}
