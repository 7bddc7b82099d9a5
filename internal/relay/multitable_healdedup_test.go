package relay_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/testenv"
)

// sharedID is the event id of a row in each table (two outbox tables with
// id sequences or generators of their own can share ids).
const sharedID = "6f1c6c39-5f5e-4e43-9a53-0d6c2a4b7e11"

// idRow is an INSERT of a row with event id id and key k2 into table.
func idRow(table, id string, seq int) string {
	return fmt.Sprintf(`INSERT INTO %s (id, aggregatetype, aggregateid, type, payload) VALUES ('%s', 'order', 'k2', 'T', '{"seq": %d}')`, table, id, seq)
}

// healNow heals the dropped slot as walrelay slot heal does and returns
// what it did.
func healNow(t *testing.T, f *fixture) relay.HealResult {
	t.Helper()
	r, err := relay.New(f.cfg, f.logs.logger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	res, err := r.Heal(ctx)
	if err != nil {
		t.Fatalf("heal: %v", err)
	}
	return res
}

// A record on Kafka with an event id that two gap rows carry (one in each
// table) proves neither delivered: the heal publishes both again rather
// than skip the one never published. The record here is the one walrelay
// would have produced for public.outbox's row before the slot was lost.
func TestHealSharedEventIDInTheGap(t *testing.T) {
	f := newFixtureTables(t, nil)
	f.cfg.Outbox.OnSlotLoss = config.SlotLossHeal
	f.broker.CreateTopic(t, "outbox.event.order", 4)
	execTx(t, f.dsn, idRow(tableA, sharedID, 1))
	execTx(t, f.dsn, idRow(tableB, sharedID, 2))
	cl := f.broker.Client(t)
	rec := &kgo.Record{Topic: "outbox.event.order", Key: []byte("k2"), Value: []byte(`{"seq": 1}`), Headers: []kgo.RecordHeader{{Key: "id", Value: []byte(sharedID)}}}
	if err := cl.ProduceSync(t.Context(), rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, f.dsn, `SELECT pg_drop_replication_slot('walrelay')`)

	res := healNow(t, f)
	t.Logf("heal: %+v", res)
	got, _ := seqsOf(t, f, "k2")
	if !slices.Contains(got, 2) {
		t.Fatalf("key k2 after the heal: seq %v: billing.outbox's row (seq 2) was never published; a record of public.outbox's row with the same event id was taken for it", got)
	}
	if res.OnKafka != 0 {
		t.Errorf("heal %+v: OnKafka %d, want 0 (a shared event id proves nothing)", res, res.OnKafka)
	}
	if n := len(f.logs.lines("event ids found on kafka that several gap rows carry")); n != 1 {
		t.Errorf("%d warnings about event ids of several gap rows, want 1", n)
	}
}

// The same with the delivered row before the record's covered fence: the
// heal's gap holds only billing.outbox's row, and the record of
// public.outbox's row with the same event id must not be taken for it.
func TestHealSharedEventIDBeforeTheFence(t *testing.T) {
	f := newFixtureTables(t, nil)
	run := f.start(t)
	xid := execTx(t, f.dsn, idRow(tableA, sharedID, 1))
	// Fillers move the position until a fence taken after those rows is
	// covered: they precede it, so they are no gap rows.
	deadline := time.Now().Add(60 * time.Second)
	for testenv.QueryValue[bool](t, f.dsn, `SELECT coalesce(covered_xmin, 0) <= $1 FROM walrelay_slot_positions WHERE slot_name = 'walrelay'`, int64(xid)) {
		if time.Now().After(deadline) {
			t.Fatal("no covered fence past the rows after 60s")
		}
		insertRowInto(t, f.dsn, tableA, "order", "filler", `{"seq": -1}`)
		time.Sleep(300 * time.Millisecond)
	}
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
	execTx(t, f.dsn, idRow(tableB, sharedID, 2))
	testenv.WaitSlotFree(t, f.dsn, "walrelay", 10*time.Second)
	testenv.Exec(t, f.dsn, `SELECT pg_drop_replication_slot('walrelay')`)

	f.cfg.Outbox.OnSlotLoss = config.SlotLossHeal
	res := healNow(t, f)
	t.Logf("heal: %+v", res)
	if res.FenceLSN == "" {
		t.Fatalf("heal %+v: no fence used; the test needs one", res)
	}
	got, _ := seqsOf(t, f, "k2")
	if !slices.Contains(got, 2) {
		t.Fatalf("key k2 after the heal: seq %v: billing.outbox's row (seq 2) was never published; the record of public.outbox's row with the same event id (before the fence) was taken for it", got)
	}
	if n := len(f.logs.lines("event ids found on kafka that rows before the fence carry too")); n != 1 {
		t.Errorf("%d warnings about event ids of rows before the fence, want 1", n)
	}
}
