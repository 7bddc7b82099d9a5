package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/testenv"
)

// insertStamped inserts one outbox event in its own transaction and returns
// the transaction's start (now()), which its commit time follows.
func insertStamped(t *testing.T, dsn, typ, aggregate string) time.Time {
	t.Helper()
	conn := testenv.Connect(t, dsn)
	defer conn.Close(context.Background())
	var start time.Time
	err := pgx.BeginFunc(t.Context(), conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(t.Context(), insertEvent(typ, aggregate)); err != nil {
			return err
		}
		return tx.QueryRow(t.Context(), `SELECT now()`).Scan(&start)
	})
	if err != nil {
		t.Fatalf("inserting %s/%s: %v", typ, aggregate, err)
	}
	return start
}

// The unpublished-event gauge and /status: 0 on an idle relay; while the
// broker refuses produce, the age of the refused event's transaction,
// growing; 0 again once the broker accepts and the slot is confirmed. In
// exactly-once delivery the event counts until its Kafka transaction
// commits.
func TestOldestUnpublishedEventAge(t *testing.T) {
	const gauge = "walrelay_oldest_unpublished_event_age_seconds"
	for _, tc := range []struct {
		name   string
		mutate func(*config.Config)
	}{
		{"at least once", nil},
		{"exactly once", exactlyOnce},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.mutate)
			if f.broker.Cluster == nil {
				t.Skip("needs kfake for fault injection")
			}
			// read_committed: in exactly-once delivery a record counts once
			// its Kafka transaction committed.
			reader := f.broker.As(kgo.FetchIsolationLevel(kgo.ReadCommitted()))
			run := f.start(t)
			insertStamped(t, f.dsn, "order", "warmup")
			reader.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)
			f.waitCaughtUp(t, 30*time.Second)

			// Idle: nothing unpublished.
			if v := testenv.MetricValue(t, f.reg, gauge, nil); v != 0 {
				t.Errorf("%s = %v on an idle relay, want 0", gauge, v)
			}
			if st := run.relay.Status(t.Context()); st.OldestUnpublishedAgeSeconds != 0 || st.OldestUnpublishedCommitTime != nil {
				t.Errorf("idle status: oldest unpublished %vs committed at %v, want 0 and none", st.OldestUnpublishedAgeSeconds, st.OldestUnpublishedCommitTime)
			}

			fault := f.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotEnoughReplicas, Count: -1})
			began := insertStamped(t, f.dsn, "order", "refused")
			// Events after it do not make it younger.
			insertStamped(t, f.dsn, "order", "refused-later")
			first := waitMetric(t, f.reg, gauge, nil, "> 1s", func(v float64) bool { return v > 1 })
			if bound := time.Since(began).Seconds(); first > bound {
				t.Errorf("%s = %v, more than the %vs since the transaction began", gauge, first, bound)
			}
			waitMetric(t, f.reg, gauge, nil, "growing past "+time.Duration(first*float64(time.Second)).String(), func(v float64) bool { return v > first+1 })

			st := run.relay.Status(t.Context())
			if st.OldestUnpublishedCommitTime == nil {
				t.Fatalf("status while the broker refuses: no oldest_unpublished_commit_time (%+v)", st)
			}
			if at := *st.OldestUnpublishedCommitTime; at.Before(began) || at.After(time.Now()) {
				t.Errorf("status: oldest unpublished committed at %v, want the refused transaction's commit (it began at %v)", at, began)
			}
			if age := time.Since(*st.OldestUnpublishedCommitTime).Seconds(); st.OldestUnpublishedAgeSeconds <= first || st.OldestUnpublishedAgeSeconds > age {
				t.Errorf("status: oldest unpublished %vs, want above %v and at most %v", st.OldestUnpublishedAgeSeconds, first, age)
			}

			fault.Remove()
			reader.ReadAll(t, []string{"outbox.event.order"}, 3, 30*time.Second)
			f.waitCaughtUp(t, 30*time.Second)
			waitMetric(t, f.reg, gauge, nil, "0 once published and confirmed", func(v float64) bool { return v == 0 })
			if st := run.relay.Status(t.Context()); st.OldestUnpublishedAgeSeconds != 0 || st.OldestUnpublishedCommitTime != nil {
				t.Errorf("status after recovery: oldest unpublished %vs committed at %v, want 0 and none", st.OldestUnpublishedAgeSeconds, st.OldestUnpublishedCommitTime)
			}
			if err := run.stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// In exactly-once delivery an event counts as unpublished until its Kafka
// transaction commits, not when the broker acknowledges its record: with
// the broker taking records but refusing to commit, the gauge grows once
// a commit was asked for (every record of the transaction had its
// outcome by then), and drops to 0 once commits go through.
func TestOldestUnpublishedEventAgeUntilKafkaCommit(t *testing.T) {
	const gauge = "walrelay_oldest_unpublished_event_age_seconds"
	f := newFixture(t, exactlyOnce)
	if f.broker.Cluster == nil {
		t.Skip("needs kfake for fault injection")
	}
	reader := f.broker.As(kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	run := f.start(t)
	insertStamped(t, f.dsn, "order", "warmup")
	reader.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)
	f.waitCaughtUp(t, 30*time.Second)

	fault := f.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.CoordinatorLoadInProgress, Count: -1,
		When: func(req kmsg.Request) bool { return req.(*kmsg.EndTxnRequest).Commit }})
	began := insertStamped(t, f.dsn, "order", "uncommitted")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := fault.Wait(ctx, 1); err != nil {
		t.Fatalf("no commit of a Kafka transaction was asked for: %v", err)
	}
	v := waitMetric(t, f.reg, gauge, nil, "> 1s", func(v float64) bool { return v > 1 })
	if bound := time.Since(began).Seconds(); v > bound {
		t.Errorf("%s = %v, more than the %vs since the transaction began", gauge, v, bound)
	}

	fault.Remove()
	reader.ReadAll(t, []string{"outbox.event.order"}, 2, 30*time.Second)
	f.waitCaughtUp(t, 30*time.Second)
	waitMetric(t, f.reg, gauge, nil, "0 once committed and confirmed", func(v float64) bool { return v == 0 })
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}
