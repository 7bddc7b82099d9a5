package publisher

// Helpers shared by the publisher tests: TestMain, Done outcomes, test publishers, request counts, logging.

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/config"
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
	cfg := testConfig(broker.Addrs()...)
	cfg.Done, cfg.CreateTopics, cfg.TopicPartitions, cfg.TopicReplicationFactor = rs.done, true, 5, 1
	cfg.MinBackoff, cfg.MaxBackoff = 20*time.Millisecond, 200*time.Millisecond
	cfg.Linger = 0 // each batch sent at once, unless a test lingers
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

// testConfig is a publisher's config for brokers as walrelay builds it
// (internal/kafkaconf, which imports this package): kafka.* from
// config.Default, walrelay's fixed preparation timings, no Done.
func testConfig(brokers ...string) Config {
	k := config.Default().Kafka
	return Config{
		Client:                 []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ClientID(k.ClientID)},
		CreateTopics:           k.CreateTopics,
		TopicPartitions:        k.TopicPartitions,
		TopicReplicationFactor: k.TopicReplicationFactor,
		TopicConfigs:           k.TopicConfigs,
		Linger:                 k.Linger,
		BatchMaxBytes:          k.BatchMaxBytes,
		TransactionTimeout:     k.TransactionTimeout,
		MinBackoff:             250 * time.Millisecond,
		MaxBackoff:             30 * time.Second,
		RejectedTopicRetry:     30 * time.Second,
	}
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

// testLogger writes the publisher's log to the test's log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}
