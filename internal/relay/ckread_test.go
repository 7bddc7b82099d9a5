package relay_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/eoscheckpoint"
	"github.com/walrelay/walrelay/internal/testenv"
)

// otherDeployment is the transactional id of a second deployment writing
// checkpoints to the same (default) checkpoint topic: another database
// and slot.
const otherDeployment = "walrelay-otherdb-walrelay"

// openOtherTransaction begins a transaction as another deployment would,
// produces its checkpoint to topic and leaves the transaction open (as a
// process killed or frozen between its produce and its commit does),
// with a transaction timeout of 10 minutes: only the test ends it.
func openOtherTransaction(t *testing.T, f *fixture, topic string) *kgo.Client {
	t.Helper()
	other := f.broker.Client(t, kgo.TransactionalID(otherDeployment), kgo.TransactionTimeout(10*time.Minute))
	if err := other.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	cp := eoscheckpoint.Checkpoint{LSN: 0x1000000, SystemID: "1", Timeline: 1, Database: "otherdb", Slot: "walrelay", Written: time.Now()}
	if err := other.ProduceSync(t.Context(), &kgo.Record{Topic: topic, Key: []byte(otherDeployment), Value: cp.Marshal()}).FirstErr(); err != nil {
		t.Fatalf("the other deployment's checkpoint: %v", err)
	}
	return other
}

// highWatermarks adds up the end offsets (read_uncommitted: open and
// aborted transactions included) of topics.
func highWatermarks(t *testing.T, f *fixture, topics ...string) int64 {
	t.Helper()
	listed, err := kadm.NewClient(f.broker.Client(t)).ListEndOffsets(t.Context(), topics...)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		t.Fatalf("listing end offsets: %v", err)
	}
	var n int64
	listed.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// waitCommitted waits until the last started relay committed at least n
// Kafka transactions.
func (f *fixture) waitCommitted(t *testing.T, n float64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got, _ := testenv.FindMetric(t, f.reg, "walrelay_kafka_transactions_total", map[string]string{"result": "committed"})
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v kafka transactions committed after %s, want %v", got, timeout, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestExactlyOnceSharedCheckpointTopicOpenTransaction: another deployment
// sharing the checkpoint topic leaves a transaction open on it (killed
// between its produce and its commit) while this relay commits newer
// checkpoints above it, inside a Postgres transaction larger than the
// in-flight cap. The relay is stopped hard and started again while that
// transaction is still open: it must not resume from an older checkpoint
// of its own (the last one below the other's transaction, all a read to
// the last stable offset sees). It waits, publishing nothing, until the
// other transaction ends, then resumes from its newest checkpoint: every
// row reaches a read_committed consumer once.
func TestExactlyOnceSharedCheckpointTopicOpenTransaction(t *testing.T) {
	const rows = 3000
	f := newFixture(t, func(c *config.Config) {
		exactlyOnce(c)
		c.Relay.MaxInFlightRecords = 100
		c.Relay.ShutdownTimeout = 0
	})
	f.createProbe(t)
	topic := f.cfg.Relay.CheckpointTopic
	x := execTx(t, f.dsn, fmt.Sprintf(`INSERT INTO outbox (aggregatetype, aggregateid, type, payload) SELECT 'order', 'o-' || (i %% 7), 'T', jsonb_build_object('i', i) FROM generate_series(1, %d) i`, rows))
	end := f.txEnd(t, x)
	slow := f.slowProduce(20 * time.Millisecond)
	run := f.start(t)
	before := f.waitOpenCheckpoint(t, 100)

	other := openOtherTransaction(t, f, topic)
	committed := testenv.MetricValue(t, f.reg, "walrelay_kafka_transactions_total", map[string]string{"result": "committed"})
	f.waitCommitted(t, committed+3, 60*time.Second) // three checkpoints above the other's open transaction
	if err := run.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if confirmed, _ := f.slot(t); confirmed >= end {
		t.Fatalf("slot confirmed %s, at or past the unfinished transaction's end %s", confirmed, end)
	}
	t.Logf("a checkpoint before the other deployment's open transaction: %d of %d rows; 3 or more committed after it", before.Open.Rows, rows)

	slow.Store(false)
	outbox := highWatermarks(t, f, "outbox.event.order")
	run = f.start(t)
	// The other transaction stays open a while: the relay publishes
	// nothing meanwhile (it does not know where to resume).
	time.Sleep(2 * time.Second)
	if n := highWatermarks(t, f, "outbox.event.order"); n != outbox {
		t.Errorf("the relay published %d records while another deployment's transaction held the checkpoint topic", n-outbox)
	}
	if run.exited() {
		t.Fatalf("relay exited while waiting: %v", run.err)
	}
	if err := other.EndTransaction(t.Context(), kgo.TryAbort); err != nil {
		t.Fatalf("aborting the other deployment's transaction: %v", err)
	}
	testenv.WaitConfirmed(t, f.dsn, "walrelay", end, 60*time.Second)
	f.readCommittedOnce(t, "outbox.event.order", rows)
	if err := run.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// TestExactlyOnceCheckpointReadBound: while another deployment's
// transaction stays open on the checkpoint topic past the bound of the
// checkpoint read (kafka.transaction_timeout), the start logs why it
// cannot read the checkpoint (the partition, the offset held, the other
// producer) and what to do, reads nothing from the slot, publishes
// nothing and confirms nothing; once the transaction is aborted it
// resumes from its newest checkpoint, publishing each row once.
func TestExactlyOnceCheckpointReadBound(t *testing.T) {
	f := newFixture(t, func(c *config.Config) {
		exactlyOnce(c)
		c.Kafka.TransactionTimeout = 2 * time.Second
	})
	f.createProbe(t)
	topic := f.cfg.Relay.CheckpointTopic
	run := f.start(t)
	id1, x1 := insertRow(t, f.dsn, "order", "o-1", `{"n": 1}`)
	testenv.WaitConfirmed(t, f.dsn, "walrelay", f.txEnd(t, x1), 30*time.Second)
	other := openOtherTransaction(t, f, topic)
	id2, x2 := insertRow(t, f.dsn, "order", "o-2", `{"n": 2}`)
	end2 := f.txEnd(t, x2)
	testenv.WaitConfirmed(t, f.dsn, "walrelay", end2, 30*time.Second)
	if err := run.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	id3, x3 := insertRow(t, f.dsn, "order", "o-3", `{"n": 3}`)

	outbox := highWatermarks(t, f, "outbox.event.order")
	run = f.start(t)
	line := f.logs.waitLog(t, "cannot read the checkpoint yet; retrying", nil, 30*time.Second)
	msg, _ := line["err"].(string)
	why, _ := line["why"].(string)
	t.Logf("logged: why=%q err=%q", why, msg)
	for _, want := range []string{"partition 0", "producer id", otherDeployment, "relay.checkpoint_topic", "kafka-transactions.sh"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not name %q: %s", want, msg)
		}
	}
	if why == "" {
		t.Error("the retry log says no why")
	}
	if n := highWatermarks(t, f, "outbox.event.order"); n != outbox {
		t.Errorf("the relay published %d records while it could not read its checkpoint", n-outbox)
	}
	end3 := f.txEnd(t, x3)
	if confirmed, _ := f.slot(t); confirmed >= end3 {
		t.Errorf("slot confirmed %s, row 3's end %s, while the relay could not read its checkpoint", confirmed, end3)
	}
	if err := other.EndTransaction(t.Context(), kgo.TryAbort); err != nil {
		t.Fatalf("aborting the other deployment's transaction: %v", err)
	}
	testenv.WaitConfirmed(t, f.dsn, "walrelay", end3, 30*time.Second)
	got, dup := ids(f.readCommitted(t, []string{"outbox.event.order"}, 3))
	want := []string{id1, id2, id3}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) || len(dup) > 0 {
		t.Errorf("read_committed consumer got %v (duplicates %v), want %v once each", got, dup, want)
	}
	if err := run.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// TestExactlyOnceUnreadableCheckpointStops: a last checkpoint of the
// relay's key that does not parse (a newer walrelay's version, after a
// downgrade; bytes that are not JSON) stops the relay with
// eoscheckpoint.ErrUnreadable naming the record and the fix, instead of
// reading it again for ever. The tombstone the error gives (kcat, when
// installed) lets the relay start from the slot.
func TestExactlyOnceUnreadableCheckpointStops(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"newer version", `{"version":2,"lsn":"0/16B3748","system_id":"7312","timeline":1,"next":{}}`},
		{"not JSON", "\x00\x01binary garbage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, exactlyOnce)
			topic := f.cfg.Relay.CheckpointTopic
			key := f.txnID(t)
			f.broker.CreateTopic(t, topic, 1)
			if err := f.broker.Client(t).ProduceSync(t.Context(), &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(tc.value)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			run := f.start(t)
			err := run.wait(30 * time.Second)
			if !errors.Is(err, eoscheckpoint.ErrUnreadable) {
				t.Fatalf("Run = %v, want an error wrapping eoscheckpoint.ErrUnreadable", err)
			}
			t.Logf("Run: %v", err)
			for _, want := range []string{topic, "partition 0", "offset 0", key, "walrelay version that wrote it", "kcat -P"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not name %q", want)
				}
			}
			if n := len(f.logs.lines("cannot read the checkpoint yet; retrying")); n > 0 {
				t.Errorf("the unreadable checkpoint was read again %d times", n)
			}

			// The fix the error gives, run as given.
			if _, err := exec.LookPath("kcat"); err != nil {
				t.Skip("kcat not installed: the tombstone command is not tried")
			}
			_, cmdline, _ := strings.Cut(err.Error(), "delete it with a tombstone: ")
			cmdline = strings.ReplaceAll(cmdline, "BROKER", f.broker.Addrs()[0])
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			if out, err := exec.CommandContext(ctx, "sh", "-c", cmdline).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", cmdline, err, out)
			}
			run = f.start(t)
			id, _ := insertRow(t, f.dsn, "order", "o-1", `{"n": 1}`)
			got, _ := ids(f.readCommitted(t, []string{"outbox.event.order"}, 1))
			if !slices.Equal(got, []string{id}) {
				t.Errorf("after the tombstone, read_committed consumer got %v, want %s", got, id)
			}
			f.logs.waitLog(t, "no checkpoint yet: publishing from the slot's position", nil, 5*time.Second)
			if err := run.stop(); err != nil {
				t.Fatalf("stop: %v", err)
			}
		})
	}
}
