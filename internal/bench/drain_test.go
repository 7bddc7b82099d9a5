package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestSplitPassword(t *testing.T) {
	cases := []struct {
		name, dsn, conninfo, password string
	}{
		{"url without password", "postgres://walrelay@127.0.0.1:5432/postgres?sslmode=disable", "postgres://walrelay@127.0.0.1:5432/postgres?sslmode=disable", ""},
		{"url with password", "postgres://u:s3cret@db:5432/app", "postgres://u@db:5432/app", "s3cret"},
		{"url password parameter", "postgresql://u@db/app?password=s3cret&sslmode=require", "postgresql://u@db/app?sslmode=require", "s3cret"},
		{"key value", "host=db user=u password=s3cret dbname=app", "host=db user=u dbname=app", "s3cret"},
		{"quoted key value", "host=db password='a b' dbname=app", "host=db dbname=app", "a b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, p := splitPassword(tc.dsn)
			if c != tc.conninfo || p != tc.password {
				t.Fatalf("splitPassword(%q) = %q, %q; want %q, %q", tc.dsn, c, p, tc.conninfo, tc.password)
			}
		})
	}
}

// TestCommittedRecords counts what a read_committed consumer sees after a
// drain's start offsets: committed records only, not aborted ones, not
// transaction markers, not what was there before. End offsets, which the
// at-least-once count uses, count all of them.
func TestCommittedRecords(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	const topic = "outbox.event.test"
	admCl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	e := &env{admin: adm}

	// Records of an earlier drain, not transactional.
	plain, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	produce(ctx, t, plain, 5, "earlier")
	from, err := e.endOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}

	txn, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic), kgo.TransactionalID("bench-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	inTxn := func(n int, commit bool) {
		t.Helper()
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		produce(ctx, t, txn, n, "txn")
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	inTxn(10, true)
	inTxn(4, false)
	inTxn(6, true)

	got, err := committedRecords(ctx, brokers, adm, topic, from)
	if err != nil {
		t.Fatal(err)
	}
	if got != 16 {
		t.Errorf("committedRecords after the earlier drain = %d, want 16 (10 + 6 committed)", got)
	}
	if all, err := committedRecords(ctx, brokers, adm, topic, nil); err != nil || all != 21 {
		t.Errorf("committedRecords from the start = %d, %v; want 21 (5 earlier + 16)", all, err)
	}
	ends, err := e.endOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var offsets int64
	for p, o := range ends {
		offsets += o - from[p]
	}
	if offsets <= 20 {
		t.Errorf("end offsets grew by %d: want more than the 20 produced (markers take offsets)", offsets)
	}

	// A transaction left open: its records may yet commit.
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(ctx, t, txn, 3, "open")
	if _, err := committedRecords(ctx, brokers, adm, topic, from); err == nil || !strings.Contains(err.Error(), "transaction is open") {
		t.Errorf("committedRecords with an open transaction: err = %v, want one saying so", err)
	}
	if err := txn.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
}

// TestEndOffsetsMissingTopic: a topic walrelay has not created yet has no
// offsets.
func TestEndOffsetsMissingTopic(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	e := &env{admin: kadm.NewClient(cl)}
	got, err := e.endOffsets(context.Background(), "outbox.event.missing")
	if err != nil || len(got) != 0 {
		t.Fatalf("endOffsets(missing topic) = %v, %v; want none, nil", got, err)
	}
}

// produce produces n records with keys prefix-i, synchronously.
func produce(ctx context.Context, t *testing.T, cl *kgo.Client, n int, prefix string) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "%s-%d", prefix, i), Value: []byte("v")}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}
