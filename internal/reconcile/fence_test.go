package reconcile_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/reconcile"
	"github.com/walrelay/walrelay/internal/testenv"
)

// TestVerifyUnconfirmedWhileBrokerRefuses: with a real relay and a broker
// that refuses produce, rows committed just before verify are not on
// their topic and the slot cannot confirm verify's fence: verify says so,
// reports them unconfirmed, none missing, and --republish sends nothing.
// Once the broker accepts and the relay confirms, verify is clean and each
// of those events is on its topic exactly once.
func TestVerifyUnconfirmedWhileBrokerRefuses(t *testing.T) {
	f := newFixture(t)
	if f.broker.Cluster == nil {
		t.Fatal("needs the in-process kfake broker for fault injection")
	}
	first := f.insert(t, 20, time.Time{})
	f.relayAll(t, len(first))

	fault := f.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotEnoughReplicas, Count: -1})
	late := f.insert(t, 10, time.Time{})
	logs := &testenv.SyncBuffer{}
	now := time.Now()
	// Bounded: a republish of a row while the broker refuses would wait
	// for its acknowledgement.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	rep, err := reconcile.Run(ctx, f.cfg, reconcile.Options{Since: now.Add(-time.Hour), Until: now.Add(time.Minute), Republish: true, Wait: 2 * time.Second},
		slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatalf("reconcile.Run: %v", err)
	}
	if rep.FenceConfirmed || !strings.Contains(rep.NotConfirmed, rep.FenceLSN) || !strings.Contains(rep.NotConfirmed, rep.ConfirmedLSN) || rep.Slot != "walrelay" {
		t.Errorf("fence confirmed %t (slot %q at %s, fence %s): %q; want not confirmed, saying where the slot and the fence are",
			rep.FenceConfirmed, rep.Slot, rep.ConfirmedLSN, rep.FenceLSN, rep.NotConfirmed)
	}
	if !strings.Contains(logs.String(), "did not confirm the fence") || !strings.Contains(logs.String(), "behind") {
		t.Errorf("verify did not say on its log that the slot is behind the fence:\n%s", logs.String())
	}
	if len(rep.Missing) != 0 || !slices.Equal(rep.Unconfirmed, sorted(late)) || rep.Rows != 30 {
		t.Fatalf("while the broker refuses: rows %d, missing %v, unconfirmed %v; want 30 rows, none missing, unconfirmed exactly %v", rep.Rows, rep.Missing, rep.Unconfirmed, sorted(late))
	}
	if r := rep.Republished; r == nil || r.Sent != 0 {
		t.Fatalf("republished %+v while the rows are unconfirmed, want nothing sent", r)
	}

	fault.Remove()
	f.broker.ReadAll(t, topics, 30, 60*time.Second)
	testenv.WaitCaughtUp(t, f.dsn, f.cfg.Postgres.Slot, 30*time.Second)
	rep = f.verify(t, false)
	if !rep.FenceConfirmed || rep.Rows != 30 || len(rep.Missing)+len(rep.Unconfirmed)+len(rep.Unknown)+len(rep.Duplicates) != 0 {
		t.Fatalf("after the broker accepts: fence confirmed %t, rows %d, missing %v unconfirmed %v unknown %v duplicates %v; want all 30 found",
			rep.FenceConfirmed, rep.Rows, rep.Missing, rep.Unconfirmed, rep.Unknown, rep.Duplicates)
	}
	ends, err := kadm.NewClient(f.broker.Client(t)).ListEndOffsets(t.Context(), topics...)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	count := map[string]int{}
	for _, r := range f.broker.ReadAll(t, topics, 30, 30*time.Second) {
		count[testenv.Header(r, "id")]++
	}
	for _, id := range late {
		if count[id] != 1 {
			t.Errorf("event %s is on its topic %d times, want once", id, count[id])
		}
	}
	if total != 30 {
		t.Errorf("%d records on the topics, want 30", total)
	}
}

// TestVerifyRowAfterFenceXminIsUnconfirmed: rows committed while an older
// transaction is still open have xids at or after the fence's xmin, so
// even with the fence confirmed verify cannot prove Kafka has them: with
// every record deleted, the rows before that transaction are missing (and
// republished), the rows after it unconfirmed (and not republished); once
// it ends, the next verify's fence covers them and they are missing.
func TestVerifyRowAfterFenceXminIsUnconfirmed(t *testing.T) {
	f := newFixture(t)
	early := f.insert(t, 10, time.Time{})
	open, err := testenv.Connect(t, f.dsn).Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = open.Rollback(t.Context()) }()
	if _, err := open.Exec(t.Context(), `SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	later := f.insert(t, 10, time.Time{})
	f.relayAll(t, 20)

	adm := kadm.NewClient(f.broker.Client(t))
	ends, err := adm.ListEndOffsets(t.Context(), topics...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.DeleteRecords(t.Context(), ends.Offsets()); err != nil {
		t.Fatalf("deleting every record: %v", err)
	}

	rep := f.verify(t, true)
	if !rep.FenceConfirmed || !slices.Equal(rep.Missing, sorted(early)) || !slices.Equal(rep.Unconfirmed, sorted(later)) {
		t.Fatalf("with a transaction open since before the later rows: fence confirmed %t (%s), missing %v, unconfirmed %v; want confirmed, missing %v, unconfirmed %v",
			rep.FenceConfirmed, rep.NotConfirmed, rep.Missing, rep.Unconfirmed, sorted(early), sorted(later))
	}
	if r := rep.Republished; r == nil || r.Sent != len(early) || r.Acknowledged != len(early) {
		t.Fatalf("republished %+v, want the %d missing rows only", r, len(early))
	}

	if err := open.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	rep = f.verify(t, false)
	if !rep.FenceConfirmed || !slices.Equal(rep.Missing, sorted(later)) || len(rep.Unconfirmed) != 0 || len(rep.Duplicates) != 0 {
		t.Fatalf("after the transaction ended: fence confirmed %t, missing %v, unconfirmed %v, duplicates %v; want missing %v",
			rep.FenceConfirmed, rep.Missing, rep.Unconfirmed, rep.Duplicates, sorted(later))
	}
}
