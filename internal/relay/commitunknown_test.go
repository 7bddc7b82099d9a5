package relay_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
)

// applyThenFail makes the broker apply the relay's next Kafka commit and
// answer it with an error: the relay's EndTxn(commit) is forwarded as it
// is through another client (kfake's control function cannot ask its own
// cluster synchronously: it sleeps while the forwarded request runs on
// another connection, and lets that one through), then answered with
// answer. With drop, the connection is closed instead of answering, and
// every retry of that commit (its producer id and epoch; franz-go
// retries on a lost connection) is dropped too: franz-go gives up with a
// connection error. The returned counter is how many commits the broker
// applied this way.
func (f *fixture) applyThenFail(t *testing.T, answer *kerr.Error, drop bool) (applied *atomic.Int32) {
	t.Helper()
	other := f.broker.Client(t)
	applied = new(atomic.Int32)
	var forwarding atomic.Bool
	var target atomic.Pointer[kmsg.EndTxnRequest] // the commit applied
	f.broker.Cluster.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		end := req.(*kmsg.EndTxnRequest)
		if forwarding.Load() || !end.Commit { // the relay is the only transactional producer
			if drop {
				f.broker.Cluster.KeepControl()
			}
			return nil, nil, false
		}
		if drop && applied.Load() > 0 {
			// A retry of the commit already applied: drop it too.
			f.broker.Cluster.KeepControl()
			if at := target.Load(); at == nil || end.ProducerID != at.ProducerID || end.ProducerEpoch != at.ProducerEpoch {
				return nil, nil, false
			}
			return nil, errors.New("connection dropped (test)"), true
		}
		f.broker.Cluster.SleepControl(func() {
			forwarding.Store(true)
			defer forwarding.Store(false)
			fwd := *end
			resp, err := fwd.RequestWith(context.Background(), other)
			if err == nil {
				err = kerr.ErrorForCode(resp.ErrorCode)
			}
			if err != nil {
				t.Errorf("forwarding the relay's commit: %v", err)
				return
			}
			target.Store(end)
			applied.Add(1)
		})
		if drop {
			f.broker.Cluster.KeepControl()
			return nil, errors.New("connection dropped (test)"), true
		}
		resp := end.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = answer.Code
		return resp, nil, true
	})
	return applied
}

// TestExactlyOnceCommitAppliedAnswerLost: the broker applied the relay's
// commit and answered UNKNOWN_SERVER_ERROR. The relay must not take that
// as an abort and produce the transaction again (a read_committed
// consumer would see its records twice): it starts its exactly-once
// pipeline again in-process, and the new producer's fence and checkpoint
// read find the commit. Every row reaches a read_committed consumer once,
// the slot is confirmed past them, and the relay keeps running.
func TestExactlyOnceCommitAppliedAnswerLost(t *testing.T) {
	f := newFixture(t, exactlyOnce)
	f.createProbe(t)
	applied := f.applyThenFail(t, kerr.UnknownServerError, false)
	run := f.start(t)
	want, end := insertRows(t, f, 5)
	testenv.WaitConfirmed(t, f.dsn, "walrelay", end, 60*time.Second)
	if applied.Load() != 1 {
		t.Fatalf("the broker applied %d commits answered with an error, want 1", applied.Load())
	}
	requireOnce(t, f, want)
	f.logs.waitLog(t, "restarting the exactly-once pipeline in-process", map[string]string{"reason": "the outcome of a kafka commit is unknown"}, time.Second)
	if run.exited() {
		t.Fatalf("relay stopped: %v", run.err)
	}
	// It goes on publishing after the restart.
	more, end2 := insertRows(t, f, 3)
	testenv.WaitConfirmed(t, f.dsn, "walrelay", end2, 30*time.Second)
	requireOnce(t, f, append(want, more...))
	if err := run.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// TestExactlyOnceCommitAppliedConnectionLost: as
// TestExactlyOnceCommitAppliedAnswerLost, with the connection closed
// instead of an answer, and on every retry of the commit, until franz-go
// gives up (a connection closed before its first answer is final to it:
// "is SASL missing?").
func TestExactlyOnceCommitAppliedConnectionLost(t *testing.T) {
	f := newFixture(t, exactlyOnce)
	f.createProbe(t)
	applied := f.applyThenFail(t, nil, true)
	run := f.start(t)
	want, end := insertRows(t, f, 5)
	testenv.WaitConfirmed(t, f.dsn, "walrelay", end, 60*time.Second)
	if applied.Load() != 1 {
		t.Fatalf("the broker applied %d commits whose connection was dropped, want 1", applied.Load())
	}
	requireOnce(t, f, want)
	f.logs.waitLog(t, "restarting the exactly-once pipeline in-process", map[string]string{"reason": "the outcome of a kafka commit is unknown"}, time.Second)
	if err := run.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// insertRows inserts n outbox rows in one Postgres transaction and
// returns their ids and the transaction's end LSN.
func insertRows(t *testing.T, f *fixture, n int) (ids []string, end pglogrepl.LSN) {
	t.Helper()
	conn := testenv.Connect(t, f.dsn)
	defer conn.Close(context.WithoutCancel(t.Context()))
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		var id string
		if err := tx.QueryRow(t.Context(), `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', $1, 'T', '{}') RETURNING id::text`, fmt.Sprint("o-", i)).Scan(&id); err != nil {
			t.Fatalf("inserting row: %v", err)
		}
		ids = append(ids, id)
	}
	var xid uint32
	if err := tx.QueryRow(t.Context(), `SELECT txid_current()::text::bigint`).Scan(&xid); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	return ids, f.txEnd(t, xid)
}

// requireOnce requires a read_committed consumer to read exactly the
// records with ids want on outbox.event.order, each once.
func requireOnce(t *testing.T, f *fixture, want []string) {
	t.Helper()
	got, dup := ids(f.readCommitted(t, []string{"outbox.event.order"}, len(want)))
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(slices.Compact(slices.Clone(got)), want) || len(dup) > 0 {
		t.Errorf("read_committed consumer got %d records, %d of them duplicates (%v), want %d once each", len(got), len(dup), dup, len(want))
	}
}
