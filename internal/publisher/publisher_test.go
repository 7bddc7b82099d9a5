package publisher

// Tests of producing: partitions, client options, and batches refused by the broker.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
)

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

// The publisher has no defaults of its own: a config with a required
// field unset or out of range is refused by New, naming the field,
// rather than filled in.
func TestNewRefusesIncompleteConfig(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"no client", func(c *Config) { c.Client = nil }, "Config.Client is required"},
		{"no done", func(c *Config) { c.Done = nil }, "Config.Done is required"},
		{"no batch max bytes", func(c *Config) { c.BatchMaxBytes = 0 }, "Config.BatchMaxBytes 0 must be positive"},
		{"no min backoff", func(c *Config) { c.MinBackoff = 0 }, "Config.MinBackoff 0s must be positive"},
		{"max backoff below min", func(c *Config) { c.MaxBackoff = c.MinBackoff / 2 }, "Config.MaxBackoff 125ms must be at least Config.MinBackoff 250ms"},
		{"no rejected topic retry", func(c *Config) { c.RejectedTopicRetry = 0 }, "Config.RejectedTopicRetry 0s must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig("127.0.0.1:1")
			cfg.Done = func(*kgo.Record, error) {}
			tc.mutate(&cfg)
			p, err := New(cfg, nil)
			if err == nil {
				p.Close()
				t.Fatalf("New succeeded, want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestLinger checks kafka.linger reaches the client as given, 0 included
// (no lingering), rather than 0 falling back to a default.
func TestLinger(t *testing.T) {
	for _, linger := range []time.Duration{0, 7 * time.Millisecond} {
		cfg := testConfig("127.0.0.1:1")
		cfg.Linger, cfg.Done = linger, func(*kgo.Record, error) {}
		p, err := New(cfg, nil)
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
