package publisher

// Tests of topic preparation: creation, refusals, transient admin errors, learning a topic's limit.

import (
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
				c.Client = append(c.Client, kgo.RetryTimeout(300*time.Millisecond), kgo.MetadataMinAge(10*time.Millisecond))
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
		c.Client = append(c.Client, kgo.RetryTimeout(100*time.Millisecond))
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
