package publisher

// Tests of the caller's own records and topics (own.go).

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/testenv"
)

// CreateTopic creates the topic with the settings asked for, and a second
// call returns the broker's TOPIC_ALREADY_EXISTS for the caller to judge.
func TestCreateTopic(t *testing.T) {
	broker := testenv.Kafka(t)
	p := newPublisher(t, broker, newResults(), nil)
	topic := testenv.UniqueName(t, "own")
	ctx := t.Context()
	compact := "compact"
	if err := p.CreateTopic(ctx, topic, 1, 1, map[string]*string{"cleanup.policy": &compact}); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	adm := kadm.NewClient(broker.Client(t))
	details, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if d := details[topic]; d.Err != nil || len(d.Partitions) != 1 {
		t.Errorf("created topic: %d partitions, err %v; want 1 partition", len(d.Partitions), d.Err)
	}
	cfgs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := cfgs.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	var policy string
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" && c.Value != nil {
			policy = *c.Value
		}
	}
	if policy != "compact" {
		t.Errorf("cleanup.policy = %q, want compact", policy)
	}
	if err := p.CreateTopic(ctx, topic, 1, 1, nil); !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Errorf("CreateTopic of an existing topic: %v, want TOPIC_ALREADY_EXISTS", err)
	}
}

// In a Kafka transaction: a record produced with ProduceSync in an aborted
// transaction is never visible to a read_committed consumer, one produced
// with ProduceAwait in a committed one is, and neither is a verdict for
// Config.Done. ProduceAwait returns when ctx ends before the broker
// answers without failing the record: it is produced afterwards and
// commits with its transaction (a record tied to ctx, as ProduceSync's
// is, would be failed).
func TestProduceInTransaction(t *testing.T) {
	broker := testenv.Kafka(t)
	topic := testenv.UniqueName(t, "own")
	broker.CreateTopic(t, topic, 1)
	rs := newResults()
	p := newPublisher(t, broker, rs, func(c *Config) { c.TransactionalID = testenv.UniqueName(t, "txn") })
	ctx := t.Context()

	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("aborted")}); err != nil {
		t.Fatalf("ProduceSync: %v", err)
	}
	if err := p.EndTransaction(ctx, false); err != nil {
		t.Fatalf("aborting: %v", err)
	}

	// A producer that lingers: its record waits in franz-go's buffer
	// until Flush, after ctx ended.
	lingering := newPublisher(t, broker, rs, func(c *Config) {
		c.TransactionalID = testenv.UniqueName(t, "txn2")
		c.Linger = time.Minute
	})
	if err := lingering.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := lingering.ProduceAwait(done, &kgo.Record{Topic: topic, Value: []byte("committed")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("ProduceAwait with ctx done: %v, want context.Canceled", err)
	}
	if err := lingering.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lingering.EndTransaction(ctx, true); err != nil {
		t.Fatalf("committing: %v", err)
	}

	cl := broker.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	var got []string
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	for len(got) < 1 && rctx.Err() == nil {
		cl.PollFetches(rctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if !slices.Equal(got, []string{"committed"}) {
		t.Errorf("read_committed consumer got %q, want only the committed transaction's record", got)
	}
	if n := rs.n.Load(); n != 0 {
		t.Errorf("Config.Done was called %d times for the caller's own records, want 0", n)
	}
}
