package relay

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/eoscheckpoint"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/replication"
	"github.com/walrelay/walrelay/internal/testenv"
)

// A checkpoint-only Kafka transaction of the old WAL history (the Commit
// of a Postgres transaction the last checkpoint ended inside) that the
// loop has taken when the stream moves to a new history (SessionStart's
// restart) says the old history, with the old history's position: the
// session travels with the reset item and is applied in queue order.
// The loop's steps are run here one by one, with restart between its
// take and its commit, the interleaving nothing in the loop waits for.
func TestTransactionsRestartKeepsTheOldHistoryForWhatIsQueued(t *testing.T) {
	broker := testenv.Kafka(t)
	cfg := config.Default()
	cfg.Postgres.DSN = "postgres://walrelay@127.0.0.1:1/app" // parsed, never contacted
	cfg.Kafka.Brokers = broker.Addrs()
	cfg.Relay.Delivery = config.ExactlyOnce
	r, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// What prepare does with the server's identity, which this test has
	// no server for.
	id := postgres.TxnID{ID: "walrelay-app-walrelay-7000000000000000001", Database: "app", SystemID: "7000000000000000001"}
	tx := r.delivery.(*transactions)
	if err := tx.use(id); err != nil {
		t.Fatal(err)
	}
	defer r.pub.Close()
	ctx := t.Context()
	if err := tx.ensureTopic(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tx.start(ctx); err != nil {
		t.Fatalf("fencing: %v", err)
	}
	old := replication.Session{SystemID: "7000000000000000001", Timeline: 1, XLogPos: 0x9000, SlotConfirmed: 0x100}
	next := replication.Session{SystemID: "7000000000000000002", Timeline: 1, XLogPos: 0x400, SlotConfirmed: 0x50}
	tx.restart(old.SlotConfirmed, old, eoscheckpoint.Last{})
	if !tx.produceItems(tx.take(ctx, nil, nil)) {
		t.Fatal("produceItems stopped")
	}
	// The last checkpoint ended inside a Postgres transaction; its Commit
	// comes, and the loop takes it.
	tx.openCommitted = true
	tx.commit(0x200, eoscheckpoint.Last{})
	items := tx.take(ctx, nil, nil)
	// The stream moves to another WAL history meanwhile.
	tx.restart(next.SlotConfirmed, next, eoscheckpoint.Last{})
	// The rest of the loop's iteration (run): the checkpoint-only
	// transaction.
	if !tx.produceItems(items) {
		t.Fatal("produceItems stopped")
	}
	if err := r.pub.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	tx.inTxn = true
	if err := tx.finish(ctx); err != nil {
		t.Fatalf("committing the checkpoint-only transaction: %v", err)
	}
	read := func() eoscheckpoint.Checkpoint {
		t.Helper()
		cp, found, err := eoscheckpoint.Read(ctx, cfg.Relay.CheckpointTopic, string(tx.key), kgo.SeedBrokers(broker.Addrs()...))
		if err != nil || !found {
			t.Fatalf("reading the checkpoint: found %t, %v", found, err)
		}
		return cp
	}
	if cp := read(); cp.LSN != 0x200 || cp.SystemID != old.SystemID {
		t.Errorf("checkpoint of the old history's Commit = lsn %s system %s, want lsn 0/200 system %s (the old history's)", cp.LSN, cp.SystemID, old.SystemID)
	}
	// The reset comes next: checkpoints from then on say the new history.
	if !tx.produceItems(tx.take(ctx, nil, nil)) {
		t.Fatal("produceItems stopped")
	}
	if !reflect.DeepEqual(tx.session, next) || tx.last != next.SlotConfirmed {
		t.Errorf("after the reset: session %v at %s, want %v at %s", tx.session, tx.last, next, next.SlotConfirmed)
	}
}
