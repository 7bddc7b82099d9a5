package publisher

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// countCreateTopics counts the CreateTopics requests the kfake broker sees
// (nil when the broker is not kfake).
func countCreateTopics(b *testenv.Broker) *atomic.Int64 {
	if b.Cluster == nil {
		return nil
	}
	var n atomic.Int64
	b.Cluster.ControlKey(int16(kmsg.CreateTopics), func(kmsg.Request) (kmsg.Response, error, bool) {
		n.Add(1)
		return nil, nil, false // observe only
	})
	return &n
}

func partitionsOf(t *testing.T, b *testenv.Broker, topic string) int {
	t.Helper()
	adm := kadm.NewClient(b.Client(t))
	td, err := adm.ListTopics(t.Context(), topic)
	if err != nil {
		t.Fatalf("listing topic %s: %v", topic, err)
	}
	d, ok := td[topic]
	if !ok || d.Err != nil {
		return 0
	}
	return len(d.Partitions)
}

func TestEnsureTopic(t *testing.T) {
	broker := testenv.Kafka(t)
	creates := countCreateTopics(broker)
	p, err := New(Config{Brokers: broker.Addrs(), CreateTopics: true, TopicPartitions: 5, TopicReplicationFactor: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	topic := testenv.UniqueName(t, "created")
	for i := range 3 {
		if err := p.EnsureTopic(ctx, topic); err != nil {
			t.Fatalf("EnsureTopic #%d: %v", i+1, err)
		}
	}
	if got := partitionsOf(t, broker, topic); got != 5 {
		t.Fatalf("created topic has %d partitions, configured 5", got)
	}
	if creates != nil && creates.Load() != 1 {
		t.Fatalf("3 EnsureTopic calls sent %d CreateTopics requests, want 1 (cached after the first)", creates.Load())
	}

	existing := testenv.UniqueName(t, "existing")
	broker.CreateTopic(t, existing, 3)
	if err := p.EnsureTopic(ctx, existing); err != nil {
		t.Fatalf("EnsureTopic on an existing topic: %v", err)
	}
	if got := partitionsOf(t, broker, existing); got != 3 {
		t.Fatalf("existing topic now has %d partitions, want its own 3", got)
	}
	// A second publisher (a restarted walrelay) finds the topic it created before.
	p2, err := New(Config{Brokers: broker.Addrs(), CreateTopics: true, TopicPartitions: 5, TopicReplicationFactor: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	if err := p2.EnsureTopic(ctx, topic); err != nil {
		t.Fatalf("EnsureTopic from a second publisher on a topic that exists: %v", err)
	}
}

func TestEnsureTopicDisabledCreatesNothing(t *testing.T) {
	broker := testenv.Kafka(t)
	p, err := New(Config{Brokers: broker.Addrs(), CreateTopics: false, TopicPartitions: 5}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	topic := testenv.UniqueName(t, "absent")
	if err := p.EnsureTopic(t.Context(), topic); err != nil {
		t.Fatalf("EnsureTopic with CreateTopics off: %v", err)
	}
	if got := partitionsOf(t, broker, topic); got != 0 {
		t.Fatalf("CreateTopics off, but topic %s exists with %d partitions", topic, got)
	}
}

func TestProducePartitions(t *testing.T) {
	broker := testenv.Kafka(t)
	p, err := New(Config{Brokers: broker.Addrs(), CreateTopics: true, TopicPartitions: 5, TopicReplicationFactor: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	topic := testenv.UniqueName(t, "produce")
	if err := p.EnsureTopic(ctx, topic); err != nil {
		t.Fatal(err)
	}

	key := []byte("foobar")
	hashed := int32(int32(-790332482)&0x7fffffff) % 5 // Kafka's partition for "foobar" of 5
	manualPart := (hashed + 2) % 5

	type result struct {
		part int32
		err  error
	}
	results := make(chan result, 2)
	done := func(r *kgo.Record, err error) { results <- result{r.Partition, err} }

	keyed := &kgo.Record{Topic: topic, Key: key, Value: []byte("keyed")}
	p.Produce(keyed, done)
	manual := &kgo.Record{Topic: topic, Key: key, Value: []byte("manual")}
	SetPartition(manual, manualPart)
	p.Produce(manual, done)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if r := <-results; r.err != nil {
			t.Fatalf("produce: %v", r.err)
		}
	}

	got := map[string]int32{}
	for _, r := range broker.ReadAll(t, []string{topic}, 2, 20*time.Second) {
		got[string(r.Value)] = r.Partition
	}
	if got["keyed"] != hashed {
		t.Errorf("keyed record landed on partition %d, Kafka's murmur2 says %d", got["keyed"], hashed)
	}
	if got["manual"] != manualPart {
		t.Errorf("record with SetPartition(%d) landed on partition %d (hash would give %d)", manualPart, got["manual"], hashed)
	}
}

// Client metrics (KIP-714) stay off unless asked for: a publisher with the
// default config never asks the broker for a telemetry subscription, while
// one with ClientMetrics does, both living as long against brokers that
// offer subscriptions (kfake does).
func TestClientMetricsOffByDefault(t *testing.T) {
	subscriptions := func(b *testenv.Broker) *atomic.Int64 {
		var n atomic.Int64
		b.Cluster.ControlKey(int16(kmsg.GetTelemetrySubscriptions), func(kmsg.Request) (kmsg.Response, error, bool) {
			n.Add(1)
			return nil, nil, false // observe only
		})
		return &n
	}
	off, on := testenv.Kafka(t), testenv.Kafka(t)
	if off.Cluster == nil {
		t.Skip("needs kfake to observe requests")
	}
	offCount, onCount := subscriptions(off), subscriptions(on)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, c := range []struct {
		broker  *testenv.Broker
		metrics bool
	}{{off, false}, {on, true}} {
		p, err := New(Config{Brokers: c.broker.Addrs(), CreateTopics: true, TopicPartitions: 1, ClientMetrics: c.metrics}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		topic := testenv.UniqueName(t, "telemetry")
		if err := p.EnsureTopic(ctx, topic); err != nil {
			t.Fatal(err)
		}
		p.Produce(&kgo.Record{Topic: topic, Value: []byte("v")}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for onCount.Load() == 0 {
		if ctx.Err() != nil {
			t.Fatal("the publisher with ClientMetrics never asked for a telemetry subscription")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := offCount.Load(); n != 0 {
		t.Errorf("the default publisher sent %d GetTelemetrySubscriptions requests, want 0", n)
	}
}

// TestLinger checks kafka.linger reaches the client as given, 0 included
// (no lingering), rather than 0 falling back to a default.
func TestLinger(t *testing.T) {
	for _, linger := range []time.Duration{0, 7 * time.Millisecond} {
		p, err := New(Config{Brokers: []string{"127.0.0.1:1"}, Linger: linger}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.client.OptValue(kgo.ProducerLinger); got != linger {
			t.Errorf("Linger %v: the client lingers %v", linger, got)
		}
		p.Close()
	}
}
