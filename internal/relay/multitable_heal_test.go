package relay_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/testenv"
)

// Issue 37, "Done when" 5: a heal with two outbox tables republishes the
// gap rows of a key in commit order across the tables (invariant 5), not
// table after table.

// seqRow is an INSERT of a row of key into table with payload {"seq": seq}.
func seqRow(table, key string, seq int) string {
	return fmt.Sprintf(`INSERT INTO %s (aggregatetype, aggregateid, type, payload) VALUES ('order', '%s', 'T', '{"seq": %d}')`, table, key, seq)
}

// seqsOf reads outbox.event.order from the start until nothing more comes
// (every record the test expects was acknowledged before) and returns the
// seq of key's records in their partition's order, and the partitions
// they were on.
func seqsOf(t *testing.T, f *fixture, key string) (seqs []int, partitions map[int32]bool) {
	t.Helper()
	return keySeqs(t, f.broker.ReadAll(t, []string{"outbox.event.order"}, 0, 3*time.Second), key)
}

// keySeqs is seqsOf over records read already.
func keySeqs(t *testing.T, recs []*kgo.Record, key string) (seqs []int, partitions map[int32]bool) {
	t.Helper()
	partitions = map[int32]bool{}
	for _, r := range recs {
		if string(r.Key) != key {
			continue
		}
		var v struct{ Seq int }
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("record value %q: %v", r.Value, err)
		}
		seqs = append(seqs, v.Seq)
		partitions[r.Partition] = true
	}
	return seqs, partitions
}

// checkSeqs fails the test unless key's records are exactly 1..n, in that
// order, on one partition.
func checkSeqs(t *testing.T, f *fixture, key string, n int) {
	t.Helper()
	got, parts := seqsOf(t, f, key)
	wantSeqs(t, got, parts, key, n)
}

// wantSeqs fails the test unless got is 1..n and parts holds one partition.
func wantSeqs(t *testing.T, got []int, parts map[int32]bool, key string, n int) {
	t.Helper()
	want := make([]int, n)
	for i := range want {
		want[i] = i + 1
	}
	if !slices.Equal(got, want) {
		t.Errorf("key %s after the heal: seq %v, want %v (commit order across %s and %s)", key, got, want, tableA, tableB)
	}
	if len(parts) != 1 {
		t.Errorf("key %s on partitions %v, want one", key, parts)
	}
}

// A dropped slot (walrelay run stopped first, so nothing of the gap was
// streamed) with gap rows of key k1 in both tables, written in interleaved
// transactions (A, B, A, B) and within transactions (A, B, A; B, A, B):
// walrelay run with outbox.on_slot_loss: heal republishes them in commit
// order across the tables, on one partition, then streams on.
func TestHealTwoTablesInCommitOrder(t *testing.T) {
	f := newFixtureTables(t, nil)
	run := f.start(t)
	insertRowInto(t, f.dsn, tableA, "order", "k0", `{"seq": 0}`)
	insertRowInto(t, f.dsn, tableB, "order", "k0", `{"seq": 0}`)
	f.broker.ReadAll(t, []string{"outbox.event.order"}, 2, 30*time.Second)
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}

	execTx(t, f.dsn, seqRow(tableA, "k1", 1))
	execTx(t, f.dsn, seqRow(tableB, "k1", 2))
	execTx(t, f.dsn, seqRow(tableA, "k1", 3))
	execTx(t, f.dsn, seqRow(tableB, "k1", 4))
	execTx(t, f.dsn, seqRow(tableA, "k1", 5), seqRow(tableB, "k1", 6), seqRow(tableA, "k1", 7))
	execTx(t, f.dsn, seqRow(tableB, "k1", 8), seqRow(tableA, "k1", 9), seqRow(tableB, "k1", 10))
	testenv.WaitSlotFree(t, f.dsn, "walrelay", 10*time.Second)
	testenv.Exec(t, f.dsn, `SELECT pg_drop_replication_slot('walrelay')`)

	f.cfg.Outbox.OnSlotLoss = config.SlotLossHeal
	f.start(t)
	f.logs.waitLog(t, "slot healed: created it at its consistent point; streaming from there", nil, 60*time.Second)
	execTx(t, f.dsn, seqRow(tableB, "k1", 11)) // streamed after the heal
	f.waitCaughtUp(t, 30*time.Second)
	checkSeqs(t, f, "k1", 11)
}

// fixtureTablesOnCluster is newFixtureTables on a private cluster with
// settings.
func fixtureTablesOnCluster(t *testing.T, settings map[string]string) *fixture {
	t.Helper()
	c := testenv.PrivateCluster(t, localpg.Options{Settings: settings})
	f := newFixtureOn(t, c.DSN("postgres"), nil, func(c *config.Config) {
		c.Postgres.Table = config.StringList{tableA, tableB}
		c.Outbox.OnSlotLoss = config.SlotLossHeal
	})
	execTx(t, f.dsn,
		`CREATE SCHEMA billing`,
		`CREATE TABLE billing.outbox (LIKE public.outbox INCLUDING ALL)`,
		`ALTER PUBLICATION walrelay_outbox ADD TABLE billing.outbox`)
	return f
}

// With track_commit_timestamp on, the heal's order is the commit order
// itself, across the tables: here a transaction with the oldest xid
// writes to A first and commits after transactions on B and A, so xid
// order would be wrong and commit order is what Kafka must show.
// walrelay slot heal (Relay.Heal) on the dropped slot republishes every
// row (no relay ran: the record has no fence) in commit order.
func TestSlotHealTwoTablesCommitTimestampOrder(t *testing.T) {
	f := fixtureTablesOnCluster(t, map[string]string{"track_commit_timestamp": "on"})
	conn := testenv.Connect(t, f.dsn)
	old, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Exec(t.Context(), seqRow(tableA, "k1", 3)); err != nil { // the oldest xid, committed third
		t.Fatal(err)
	}
	execTx(t, f.dsn, seqRow(tableB, "k1", 1))
	execTx(t, f.dsn, seqRow(tableA, "k1", 2))
	if err := old.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	execTx(t, f.dsn, seqRow(tableB, "k1", 4), seqRow(tableA, "k1", 5), seqRow(tableB, "k1", 6))
	execTx(t, f.dsn, seqRow(tableA, "k1", 7))
	testenv.Exec(t, f.dsn, `SELECT pg_drop_replication_slot('walrelay')`)

	if res := healNow(t, f); res.Rows != 7 || !res.Created {
		t.Errorf("heal %+v, want 7 rows republished and the slot created", res)
	}
	checkSeqs(t, f, "k1", 7)
}

// The same with exactly-once delivery: the heal publishes the gap through
// the transaction loop (at most 3 records in flight, so it waits for
// acknowledgements as it goes), and a read_committed consumer sees k1's
// rows once each, in commit order across the tables.
func TestHealTwoTablesInCommitOrderExactlyOnce(t *testing.T) {
	f := newFixtureTables(t, func(c *config.Config) {
		exactlyOnce(c)
		c.Relay.MaxInFlightRecords = 3
	})
	run := f.start(t)
	insertRowInto(t, f.dsn, tableA, "order", "k0", `{"seq": 0}`)
	insertRowInto(t, f.dsn, tableB, "order", "k0", `{"seq": 0}`)
	f.readCommitted(t, []string{"outbox.event.order"}, 2)
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
	execTx(t, f.dsn, seqRow(tableB, "k1", 1))
	execTx(t, f.dsn, seqRow(tableA, "k1", 2))
	execTx(t, f.dsn, seqRow(tableA, "k1", 3), seqRow(tableB, "k1", 4), seqRow(tableA, "k1", 5))
	execTx(t, f.dsn, seqRow(tableB, "k1", 6))
	execTx(t, f.dsn, seqRow(tableA, "k1", 7))
	testenv.WaitSlotFree(t, f.dsn, "walrelay", 10*time.Second)
	testenv.Exec(t, f.dsn, `SELECT pg_drop_replication_slot('walrelay')`)

	f.cfg.Outbox.OnSlotLoss = config.SlotLossHeal
	f.start(t)
	f.logs.waitLog(t, "slot healed: created it at its consistent point; streaming from there", nil, 60*time.Second)
	got, parts := keySeqs(t, f.readCommitted(t, []string{"outbox.event.order"}, 2+7), "k1")
	wantSeqs(t, got, parts, "k1", 7)
}
