package testenv

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Broker is a Kafka-protocol broker for one test.
type Broker struct {
	// Cluster is the in-process kfake cluster, for fault injection
	// (Cluster.ControlKey, ...). It is nil when the brokers are external
	// (WALRELAY_TEST_KAFKA_BROKERS) or a container.
	Cluster *kfake.Cluster
	addrs   []string
	opts    []kgo.Opt // for every client of the test's (As)
}

// As returns the broker with opts added to every client the test makes
// with Client, CreateTopic and ReadAll: credentials, for a broker with
// SASL.
func (b *Broker) As(opts ...kgo.Opt) *Broker {
	c := *b
	c.opts = append(slices.Clone(b.opts), opts...)
	return &c
}

// Kafka returns a broker for this test: a new single-broker kfake cluster
// (opts are appended to kfake.NumBrokers(1), so they can override it),
// closed at cleanup; or the brokers named by WALRELAY_TEST_KAFKA_BROKERS;
// or, with WALRELAY_TEST_BACKEND=docker, the package's Kafka container.
// With external brokers or a container, opts are ignored: create topics
// with CreateTopic and name them with UniqueName.
func Kafka(tb testing.TB, opts ...kfake.Opt) *Broker {
	tb.Helper()
	if v := os.Getenv(EnvKafkaBrokers); v != "" {
		if len(opts) > 0 {
			tb.Logf("testenv: %s is set; ignoring %d kfake options", EnvKafkaBrokers, len(opts))
		}
		var addrs []string
		for _, a := range strings.Split(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				addrs = append(addrs, a)
			}
		}
		return &Broker{addrs: addrs}
	}
	b, err := backend()
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	if b == BackendDocker {
		if len(opts) > 0 {
			tb.Logf("testenv: kafka runs in a container; ignoring %d kfake options", len(opts))
		}
		addrs, err := env.kafkaBrokers()
		if err != nil {
			tb.Fatalf("testenv: kafka container unavailable: %v", err)
		}
		return &Broker{addrs: addrs}
	}
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		tb.Fatalf("testenv: starting kfake cluster: %v", err)
	}
	tb.Cleanup(c.Close)
	return &Broker{Cluster: c, addrs: c.ListenAddrs()}
}

// Addrs returns the seed broker addresses (host:port).
func (b *Broker) Addrs() []string { return slices.Clone(b.addrs) }

// Client returns a franz-go client seeded with the broker addresses and
// opts, closed at cleanup.
func (b *Broker) Client(tb testing.TB, opts ...kgo.Opt) *kgo.Client {
	tb.Helper()
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(b.addrs...)}, b.opts...), opts...)...)
	if err != nil {
		tb.Fatalf("testenv: creating kafka client: %v", err)
	}
	tb.Cleanup(cl.Close)
	return cl
}

// CreateTopic creates a topic with the given partitions (replication
// factor 1); it fails the test on error.
func (b *Broker) CreateTopic(tb testing.TB, topic string, partitions int32) {
	tb.Helper()
	adm := kadm.NewClient(b.Client(tb))
	ctx, cancel := context.WithTimeout(tb.Context(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		tb.Fatalf("testenv: creating topic %q: %v", topic, err)
	}
}

// ReadAll reads the given topics from the start, without a consumer group,
// until it has at least want records or timeout passes, and returns what it
// read in fetch order (per partition, offset order). If want > 0 and fewer
// records arrive in time, it fails the test with a per-partition count. If
// want <= 0 it reads for the whole timeout and returns what it got, for
// asserting that nothing (more) arrives.
func (b *Broker) ReadAll(tb testing.TB, topics []string, want int, timeout time.Duration) []*kgo.Record {
	tb.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(b.addrs...),
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200 * time.Millisecond),
	}, b.opts...)...)
	if err != nil {
		tb.Fatalf("testenv: creating kafka consumer: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(tb.Context(), timeout)
	defer cancel()

	var recs []*kgo.Record
	var fetchErrs []error
	for want <= 0 || len(recs) < want {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fetches.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				fetchErrs = append(fetchErrs, fmt.Errorf("%s[%d]: %w", topic, p, err))
			}
		})
		recs = append(recs, fetches.Records()...)
	}
	if want > 0 && len(recs) < want {
		errSummary := "none"
		if len(fetchErrs) > 0 {
			errSummary = errors.Join(fetchErrs...).Error()
		}
		tb.Fatalf("testenv: read %d of %d records from %v within %v; per partition: %s; fetch errors: %s",
			len(recs), want, topics, timeout, countByPartition(recs), errSummary)
	}
	return recs
}

func countByPartition(recs []*kgo.Record) string {
	if len(recs) == 0 {
		return "none"
	}
	counts := make(map[string]int)
	for _, r := range recs {
		counts[fmt.Sprintf("%s[%d]", r.Topic, r.Partition)]++
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, counts[k]))
	}
	return strings.Join(parts, " ")
}

// Header returns the value of the record's first header named key, or ""
// if it has none.
func Header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
