package faultsuite

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/verify"
)

// unmarked is a Kafka transaction that ended without a marker on one
// partition: producer's records from first on were followed by a record of
// a later transaction of the same producer id (a higher epoch) with no
// COMMIT or ABORT marker of it in between.
type unmarked struct {
	topic     string
	partition int32
	first     int64 // the transaction's first record on the partition
	producer  verify.Producer
	next      verify.Producer // the later transaction's producer epoch
}

func (u unmarked) String() string {
	return fmt.Sprintf("%s[%d] from offset %d: producer %s, then %s with no marker between", u.topic, u.partition, u.first, u.producer, u.next)
}

// unmarkedTransactions finds, in a read_uncommitted read of exactly-once
// delivery (every data record transactional, markers kept), transactions
// that ended without a marker. A Kafka broker never leaves one: the
// coordinator writes a COMMIT or ABORT marker to every partition of a
// transaction before the producer's next transaction can write there.
// kfake's crash recovery does (docs/reliability.md, "The test broker's
// limits"): it aborts the open transaction in its index only, and a
// read_committed consumer then skips every later record of that producer
// id, committed or not. Such records are missing because of the broker,
// not walrelay. A producer keeping one epoch across transactions (brokers
// before KIP-890) hides such a gap from this check; it never reports one
// falsely.
func unmarkedTransactions(read kafkaRead) []unmarked {
	type entry struct {
		offset   int64
		producer verify.Producer
		marker   bool
	}
	type tp struct {
		topic     string
		partition int32
	}
	parts := map[tp][]entry{}
	for _, r := range read.records {
		k := tp{r.Topic, r.Partition}
		parts[k] = append(parts[k], entry{offset: r.Offset, producer: verify.Producer{ID: r.ProducerID, Epoch: r.ProducerEpoch}})
	}
	for _, m := range read.markers {
		k := tp{m.topic, m.partition}
		parts[k] = append(parts[k], entry{offset: m.offset, producer: m.producer, marker: true})
	}
	var out []unmarked
	for k, es := range parts {
		slices.SortFunc(es, func(a, b entry) int { return cmp.Compare(a.offset, b.offset) })
		type run struct {
			first int64
			epoch int16
		}
		open := map[int64]run{} // producer id → its transaction without a marker yet
		for _, e := range es {
			o, isOpen := open[e.producer.ID]
			switch {
			case e.marker:
				delete(open, e.producer.ID)
			case !isOpen:
				open[e.producer.ID] = run{first: e.offset, epoch: e.producer.Epoch}
			case e.producer.Epoch > o.epoch:
				out = append(out, unmarked{topic: k.topic, partition: k.partition, first: o.first,
					producer: verify.Producer{ID: e.producer.ID, Epoch: o.epoch}, next: e.producer})
				open[e.producer.ID] = run{first: e.offset, epoch: e.producer.Epoch}
			}
		}
	}
	slices.SortFunc(out, func(a, b unmarked) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition), cmp.Compare(a.first, b.first))
	})
	return out
}

// TestUnmarkedTransactions: a transaction's records followed by a later
// epoch of the same producer id without a marker between are reported
// (what kfake's crash recovery leaves); a marker between, another
// producer's records between, or one epoch across transactions are not.
func TestUnmarkedTransactions(t *testing.T) {
	rec := func(off int64, id int64, epoch int16) verify.Record {
		return verify.Record{Topic: "t", Partition: 0, Offset: off, ProducerID: id, ProducerEpoch: epoch}
	}
	mark := func(off int64, id int64, epoch int16) marker {
		return marker{topic: "t", partition: 0, offset: off, producer: verify.Producer{ID: id, Epoch: epoch}, commit: true}
	}
	for _, tc := range []struct {
		name    string
		records []verify.Record
		markers []marker
		want    []string
	}{
		{name: "every transaction marked",
			records: []verify.Record{rec(0, 1, 0), rec(1, 1, 0), rec(3, 1, 1)}, markers: []marker{mark(2, 1, 0), mark(4, 1, 1)}},
		{name: "crash-aborted without a marker",
			records: []verify.Record{rec(0, 1, 0), rec(2, 1, 1), rec(3, 1, 2), rec(4, 1, 2)}, markers: []marker{mark(1, 1, 0), mark(5, 1, 2)},
			want: []string{"t[0] from offset 2: producer 1/1, then 1/2 with no marker between"}},
		{name: "another producer between",
			records: []verify.Record{rec(0, 1, 0), rec(1, 2, 0), rec(3, 1, 1)}, markers: []marker{mark(2, 1, 0), mark(4, 2, 0), mark(5, 1, 1)}},
		{name: "one epoch across transactions",
			records: []verify.Record{rec(0, 1, 0), rec(1, 1, 0), rec(2, 1, 0)}, markers: []marker{mark(3, 1, 0)}},
		{name: "open at the end of the read",
			records: []verify.Record{rec(0, 1, 0), rec(2, 1, 1)}, markers: []marker{mark(1, 1, 0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, u := range unmarkedTransactions(kafkaRead{records: tc.records, markers: tc.markers}) {
				got = append(got, u.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestUnmarkedTransactionsAfterKfakeCrash: kfake started on a copy of a
// running kfake's data directory (what a crash leaves) taken while a
// transaction is open recovers by aborting it without a marker; the
// producer's next transactions, committed, are then hidden from
// read_committed consumers, and unmarkedTransactions reports the cause.
// If this fails because nothing is hidden and no transaction is unmarked,
// kfake writes the markers now: docs/reliability.md, "The test broker's
// limits", and the graceful broker restarts of the exactly-once rows can
// be revisited.
func TestUnmarkedTransactionsAfterKfakeCrash(t *testing.T) {
	const topic = topicPrefix + "crash"
	dir := t.TempDir()
	first, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DataDir(dir), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	txn := func(cl *kgo.Client, commit bool) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for range 4 {
			if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if commit {
			if err := cl.EndTransaction(t.Context(), kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
		}
	}
	producer := func(c *kfake.Cluster) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("crash"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	p := producer(first)
	txn(p, true)
	txn(p, true)
	txn(p, false) // open when the copy is taken
	crashed := t.TempDir()
	if err := os.CopyFS(crashed, os.DirFS(dir)); err != nil {
		t.Fatalf("copying kfake's data directory: %v", err)
	}
	second, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DataDir(crashed))
	if err != nil {
		t.Fatalf("starting kfake on the copy: %v", err)
	}
	defer second.Close()
	p = producer(second) // a restarted process: same transactional id, next epoch
	txn(p, true)
	txn(p, true)

	committed := readKafka(t, second.ListenAddrs(), true)
	all := readKafka(t, second.ListenAddrs(), false)
	u := unmarkedTransactions(all)
	t.Logf("%d records committed; read_committed reads %d; read_uncommitted %d records, %d markers; transactions without a marker: %v",
		16, len(committed.records), len(all.records), len(all.markers), u)
	if len(u) != 1 || len(committed.records) >= 16 {
		t.Errorf("kfake's crash recovery: %d transactions without a marker, %d of 16 committed records read_committed; want 1 and fewer than 16 (see the doc comment)", len(u), len(committed.records))
	}
}
