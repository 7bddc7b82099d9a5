package publisher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// results collects what Done reports, per record.
type results struct {
	mu   sync.Mutex
	errs map[*kgo.Record]error
	n    atomic.Int64
}

func newResults() *results { return &results{errs: make(map[*kgo.Record]error)} }

func (rs *results) done(r *kgo.Record, err error) {
	rs.mu.Lock()
	if _, dup := rs.errs[r]; dup {
		panic(fmt.Sprintf("Done called twice for record %q", r.Value))
	}
	rs.errs[r] = err
	rs.mu.Unlock()
	rs.n.Add(1)
}

// wait waits until n records have their outcome.
func (rs *results) wait(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for rs.n.Load() < int64(n) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d records answered within %s", rs.n.Load(), n, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (rs *results) err(r *kgo.Record) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.errs[r]
}

// newPublisher returns a publisher on broker reporting to rs, closed at
// cleanup.
func newPublisher(t *testing.T, broker *testenv.Broker, rs *results, mutate func(*Config)) *Publisher {
	t.Helper()
	cfg := Config{Brokers: broker.Addrs(), Done: rs.done, CreateTopics: true, TopicPartitions: 5, TopicReplicationFactor: 1, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// countRequests counts the requests of one kind the kfake broker sees.
func countRequests(b *testenv.Broker, key kmsg.Key) *atomic.Int64 {
	var n atomic.Int64
	b.Cluster.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
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

func TestPrepareTopic(t *testing.T) {
	broker := testenv.Kafka(t)
	if broker.Cluster == nil {
		t.Skip("needs kfake to count requests")
	}
	creates := countRequests(broker, kmsg.CreateTopics)
	p := newPublisher(t, broker, newResults(), nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	topic := testenv.UniqueName(t, "created")
	for i := range 3 {
		if err := p.Prepare(ctx, topic); err != nil {
			t.Fatalf("Prepare #%d: %v", i+1, err)
		}
	}
	if got := partitionsOf(t, broker, topic); got != 5 {
		t.Fatalf("created topic has %d partitions, configured 5", got)
	}
	if n := creates.Load(); n != 1 {
		t.Fatalf("3 Prepare calls sent %d CreateTopics requests, want 1 (cached after the first)", n)
	}

	existing := testenv.UniqueName(t, "existing")
	broker.CreateTopic(t, existing, 3)
	before := creates.Load()
	if err := p.Prepare(ctx, existing); err != nil {
		t.Fatalf("Prepare on an existing topic: %v", err)
	}
	if n := creates.Load(); n != before {
		t.Fatalf("Prepare on an existing topic sent %d CreateTopics requests, want none", n-before)
	}
	if got := partitionsOf(t, broker, existing); got != 3 {
		t.Fatalf("existing topic now has %d partitions, want its own 3", got)
	}
}

func TestPrepareCreationOff(t *testing.T) {
	broker := testenv.Kafka(t)
	rs := newResults()
	p := newPublisher(t, broker, rs, func(c *Config) { c.CreateTopics = false })
	topic := testenv.UniqueName(t, "absent")
	err := p.Prepare(t.Context(), topic)
	if !errors.Is(err, ErrTopicRejected) || !strings.Contains(err.Error(), "kafka.create_topics is off") {
		t.Fatalf("Prepare of a missing topic with creation off = %v, want ErrTopicRejected naming kafka.create_topics", err)
	}
	if got := partitionsOf(t, broker, topic); got != 0 {
		t.Fatalf("CreateTopics off, but topic %s exists with %d partitions", topic, got)
	}
	// Its records get the refusal, each once.
	r := &kgo.Record{Topic: topic, Value: []byte("v")}
	p.Produce(r)
	rs.wait(t, 1, 10*time.Second)
	if err := rs.err(r); !errors.Is(err, ErrTopicRejected) {
		t.Fatalf("record for a refused topic: %v, want ErrTopicRejected", err)
	}
}

func TestProducePartitions(t *testing.T) {
	broker := testenv.Kafka(t)
	rs := newResults()
	p := newPublisher(t, broker, rs, nil)
	topic := testenv.UniqueName(t, "produce")

	key := []byte("foobar")
	hashed := int32(int32(-790332482)&0x7fffffff) % 5 // Kafka's partition for "foobar" of 5
	manualPart := (hashed + 2) % 5

	keyed := &kgo.Record{Topic: topic, Key: key, Value: []byte("keyed")}
	p.Produce(keyed)
	manual := &kgo.Record{Topic: topic, Key: key, Value: []byte("manual")}
	SetPartition(manual, manualPart)
	p.Produce(manual)
	beyond := &kgo.Record{Topic: topic, Key: key, Value: []byte("beyond")}
	SetPartition(beyond, 5)
	p.Produce(beyond)
	rs.wait(t, 3, 30*time.Second)
	for _, r := range []*kgo.Record{keyed, manual} {
		if err := rs.err(r); err != nil {
			t.Fatalf("produce %s: %v", r.Value, err)
		}
	}
	if err := rs.err(beyond); !errors.Is(err, ErrPartitionOutOfRange) || !strings.Contains(err.Error(), "has 5 partitions") {
		t.Errorf("record for partition 5 of 5: %v, want ErrPartitionOutOfRange naming the 5 partitions", err)
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
	off, on := testenv.Kafka(t), testenv.Kafka(t)
	if off.Cluster == nil {
		t.Skip("needs kfake to observe requests")
	}
	offCount, onCount := countRequests(off, kmsg.GetTelemetrySubscriptions), countRequests(on, kmsg.GetTelemetrySubscriptions)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, c := range []struct {
		broker  *testenv.Broker
		metrics bool
	}{{off, false}, {on, true}} {
		rs := newResults()
		p := newPublisher(t, c.broker, rs, func(cfg *Config) { cfg.TopicPartitions, cfg.ClientMetrics = 1, c.metrics })
		r := &kgo.Record{Topic: testenv.UniqueName(t, "telemetry"), Value: []byte("v")}
		p.Produce(r)
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := rs.err(r); err != nil {
			t.Errorf("produce: %v", err)
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
		p, err := New(Config{Brokers: []string{"127.0.0.1:1"}, Linger: linger, Done: func(*kgo.Record, error) {}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.client.OptValue(kgo.ProducerLinger); got != linger {
			t.Errorf("Linger %v: the client lingers %v", linger, got)
		}
		p.Close()
	}
}

// A topic whose max.message.bytes is below BatchMaxBytes: batches of
// records that each fit are never refused as a whole, whatever the broker
// lets walrelay read. With DescribeConfigs allowed, batches are sized to
// the topic and no record is retried; refused, the broker's batch refusals
// are retried record by record, the topic goes one record at a time, and
// per-key order holds. Only the record too large on its own fails, with
// ErrRecordTooLarge.
func TestBatchLimitBelowBatchMaxBytes(t *testing.T) {
	for _, tc := range []struct {
		name            string
		describeRefused bool
	}{
		{"topic limit learned", false},
		{"describe configs refused", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			broker := testenv.Kafka(t)
			if broker.Cluster == nil {
				t.Skip("needs kfake for its topic limit and faults")
			}
			topic := testenv.UniqueName(t, "limited")
			adm := kadm.NewClient(broker.Client(t))
			limit := "4000"
			resp, err := adm.CreateTopic(t.Context(), 2, 1, map[string]*string{"max.message.bytes": &limit}, topic)
			if err == nil {
				err = resp.Err
			}
			if err != nil {
				t.Fatalf("creating %s: %v", topic, err)
			}
			if tc.describeRefused {
				broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.DescribeConfigs}, Resource: topic, Err: kerr.TopicAuthorizationFailed, Count: -1})
			}
			rs := newResults()
			p := newPublisher(t, broker, rs, func(c *Config) { c.BatchMaxBytes = 1 << 20; c.Linger = 50 * time.Millisecond })

			// 40 records of ~450 bytes over 4 keys, in one burst: batches
			// of 1 MiB would hold them all.
			var recs []*kgo.Record
			for i := range 40 {
				v := fmt.Sprintf(`{"seq":%03d,"pad":"%s"}`, i, strings.Repeat("x", 420))
				recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i%4), Value: []byte(v)})
			}
			big := &kgo.Record{Topic: topic, Key: []byte("k0"), Value: []byte(strings.Repeat("y", 5000))}
			for i, r := range recs {
				p.Produce(r)
				if i == 20 {
					p.Produce(big)
				}
			}
			rs.wait(t, len(recs)+1, 60*time.Second)
			for i, r := range recs {
				if err := rs.err(r); err != nil {
					t.Fatalf("record %d (%d bytes, fits the topic alone): %v", i, len(r.Value), err)
				}
			}
			if err := rs.err(big); !errors.Is(err, ErrRecordTooLarge) {
				t.Fatalf("5000-byte record on a 4000-byte topic: %v, want ErrRecordTooLarge", err)
			}

			got := broker.ReadAll(t, []string{topic}, len(recs), 30*time.Second)
			last := map[string]string{}
			for _, r := range got {
				if string(r.Value) <= last[string(r.Key)] {
					t.Fatalf("key %s: %.10s after %.10s: per-key order broken", r.Key, r.Value, last[string(r.Key)])
				}
				last[string(r.Key)] = string(r.Value)
			}
			if len(got) != len(recs) {
				t.Fatalf("read %d records, want %d", len(got), len(recs))
			}
			st := p.Stats()
			if tc.describeRefused {
				if st.RetriedAlone == 0 || st.OneAtATimeTopics != 1 {
					t.Errorf("stats %+v: want records retried alone and one topic one record at a time", st)
				}
			} else if st.RetriedAlone != 0 || st.OneAtATimeTopics != 0 {
				t.Errorf("stats %+v: the topic's limit was known, nothing should have been refused", st)
			}
			if st.OrderAtRisk != 0 {
				t.Errorf("stats %+v: records at risk of reordering", st)
			}
		})
	}
}

// A record the broker refuses for itself, within a batch of others it
// accepts: only that record gets the verdict, the others are delivered in
// order. A refusal of what the record holds (INVALID_TIMESTAMP) sends the
// topic back to batches; MESSAGE_TOO_LARGE for a record walrelay thought
// fits means the topic's limit is not what walrelay knows, so the topic
// goes one record at a time.
func TestBatchRefusedForOneRecord(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        *kerr.Error
		want       error
		oneAtATime int64
	}{
		{"INVALID_TIMESTAMP", kerr.InvalidTimestamp, ErrRecordRejected, 0},
		{"MESSAGE_TOO_LARGE", kerr.MessageTooLarge, ErrRecordTooLarge, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			broker := testenv.Kafka(t)
			if broker.Cluster == nil {
				t.Skip("needs kfake for its faults")
			}
			topic := testenv.UniqueName(t, "poisoned")
			broker.CreateTopic(t, topic, 1)
			poison := []byte("poison")
			broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: tc.err, Count: -1,
				When: func(req kmsg.Request) bool {
					for _, rt := range req.(*kmsg.ProduceRequest).Topics {
						for _, rp := range rt.Partitions {
							if bytes.Contains(rp.Records, poison) {
								return true
							}
						}
					}
					return false
				}})
			rs := newResults()
			p := newPublisher(t, broker, rs, func(c *Config) { c.Linger = 50 * time.Millisecond })
			var recs []*kgo.Record
			for i := range 10 {
				v := fmt.Appendf(nil, "v%02d", i)
				if i == 4 {
					v = poison
				}
				recs = append(recs, &kgo.Record{Topic: topic, Key: []byte("k"), Value: v})
			}
			for _, r := range recs {
				p.Produce(r)
			}
			rs.wait(t, len(recs), 30*time.Second)
			for i, r := range recs {
				err := rs.err(r)
				if i == 4 {
					if !errors.Is(err, tc.want) || !errors.Is(err, tc.err) {
						t.Errorf("the refused record: %v, want %v wrapping %v", err, tc.want, tc.err)
					}
					continue
				}
				if err != nil {
					t.Errorf("record %d: %v", i, err)
				}
			}
			if st := p.Stats(); st.OneAtATimeTopics != tc.oneAtATime || st.RetriedAlone == 0 {
				t.Errorf("stats %+v: want records retried alone and %d topics one record at a time", st, tc.oneAtATime)
			}
			got := broker.ReadAll(t, []string{topic}, 9, 20*time.Second)
			for i, r := range got {
				if want := fmt.Sprintf("v%02d", i+min(i/4, 1)); string(r.Value) != want {
					t.Fatalf("record %d on the topic is %s, want %s (order)", i, r.Value, want)
				}
			}
		})
	}
}

// Transient errors while preparing a topic are retried, counted and never
// passed on: its records wait and are delivered once the broker recovers.
// franz-go's own retries are cut short so the error reaches the publisher.
// (kfake applies a CreateTopics it answers REQUEST_TIMED_OUT, as a broker
// may: the retry then finds the topic.)
func TestPrepareRetriesTransientErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  kmsg.Key
		err  *kerr.Error
	}{
		{"metadata REQUEST_TIMED_OUT", kmsg.Metadata, kerr.RequestTimedOut},
		{"CreateTopics NOT_CONTROLLER", kmsg.CreateTopics, kerr.NotController},
		{"CreateTopics REQUEST_TIMED_OUT", kmsg.CreateTopics, kerr.RequestTimedOut},
	} {
		t.Run(tc.name, func(t *testing.T) {
			broker := testenv.Kafka(t)
			if broker.Cluster == nil {
				t.Skip("needs kfake for its faults")
			}
			topic := testenv.UniqueName(t, "transient")
			h := broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{tc.key}, Topic: topic, Err: tc.err, Count: -1})
			rs := newResults()
			p := newPublisher(t, broker, rs, func(c *Config) {
				c.ExtraOpts = append(c.ExtraOpts, kgo.RetryTimeout(300*time.Millisecond), kgo.MetadataMinAge(10*time.Millisecond))
			})
			r := &kgo.Record{Topic: topic, Value: []byte("v")}
			p.Produce(r)
			deadline := time.Now().Add(30 * time.Second)
			for p.Stats().AdminRetries < 1 {
				if time.Now().After(deadline) {
					t.Fatalf("no retries counted within 30s (fault hits %d)", h.Hits())
				}
				time.Sleep(10 * time.Millisecond)
			}
			h.Remove()
			rs.wait(t, 1, 30*time.Second)
			if err := rs.err(r); err != nil {
				t.Fatalf("record after transient admin errors: %v", err)
			}
			t.Logf("fault hits %d, admin retries %d", h.Hits(), p.Stats().AdminRetries)
		})
	}
}

// testLogger writes the publisher's log to the test's log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// A principal the broker does not let describe the topic (Metadata answers
// TOPIC_AUTHORIZATION_FAILED, which kadm turns into the request's error)
// gets ErrTopicRejected naming the ACL, not endless retries.
func TestPrepareDescribeRefused(t *testing.T) {
	broker := testenv.Kafka(t)
	if broker.Cluster == nil {
		t.Skip("needs kfake for its faults")
	}
	topic := testenv.UniqueName(t, "hidden")
	broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Metadata}, Topic: topic, Err: kerr.TopicAuthorizationFailed, Count: -1})
	p := newPublisher(t, broker, newResults(), nil)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	err := p.Prepare(ctx, topic)
	if !errors.Is(err, ErrTopicRejected) || !strings.Contains(err.Error(), "DESCRIBE") {
		t.Fatalf("Prepare = %v, want ErrTopicRejected naming DESCRIBE", err)
	}
	if n := p.Stats().AdminRetries; n != 0 {
		t.Errorf("%d admin retries for a refusal", n)
	}
}

// DescribeConfigs failing for a while (REQUEST_TIMED_OUT) delays the topic
// until it answers, so its limit is learned: no batch of it is refused.
func TestPrepareWaitsForTheTopicLimit(t *testing.T) {
	broker := testenv.Kafka(t)
	if broker.Cluster == nil {
		t.Skip("needs kfake for its faults")
	}
	topic := testenv.UniqueName(t, "limited")
	limit := "4000"
	resp, err := kadm.NewClient(broker.Client(t)).CreateTopics(t.Context(), 1, 1, map[string]*string{"max.message.bytes": &limit}, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	h := broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.DescribeConfigs}, Resource: topic, Err: kerr.RequestTimedOut, Count: 5})
	rs := newResults()
	p := newPublisher(t, broker, rs, func(c *Config) {
		c.Linger = 50 * time.Millisecond
		c.ExtraOpts = append(c.ExtraOpts, kgo.RetryTimeout(100*time.Millisecond))
	})
	for i := range 20 {
		p.Produce(&kgo.Record{Topic: topic, Key: []byte("k"), Value: fmt.Appendf(nil, "%03d%s", i, strings.Repeat("x", 450))})
	}
	rs.wait(t, 20, 60*time.Second)
	rs.mu.Lock()
	for r, err := range rs.errs {
		if err != nil {
			t.Errorf("record %.3s: %v", r.Value, err)
		}
	}
	rs.mu.Unlock()
	if h.Hits() == 0 {
		t.Fatal("DescribeConfigs was never faulted")
	}
	if st := p.Stats(); st.RetriedAlone != 0 || st.AdminRetries == 0 {
		t.Errorf("stats %+v: want the limit learned after admin retries, no record retried alone", st)
	}
}
