// Package publisher produces walrelay's records to Kafka with franz-go.
//
// In: records (topic, key, value, headers, timestamp, optional partition)
// and a callback per record. Out: the callback, called exactly once per
// record from a franz-go goroutine, with nil once the broker has durably
// acknowledged it (acks=all) or with the error that made franz-go give up.
//
// The producer is idempotent (franz-go's default) with acks=all, so retries
// neither duplicate nor reorder records within a partition. Keys are
// partitioned with Kafka's default murmur2 hash, exactly as the Java client
// and Kafka Connect do, so an aggregate lands on the same partition Debezium
// put it on and per-aggregate order holds. Records that carry an explicit
// partition (Debezium's "partition" placement) go to that partition.
// Retriable broker errors (leader moves, broker down, timeouts) are retried
// by franz-go without limit: a record either arrives or stops the relay; it
// is never dropped.
//
// TLS (with an optional client certificate) and SASL PLAIN or SCRAM are
// franz-go's own; CheckAccess tells authentication and certificate
// failures, which retrying cannot fix, from a broker that is down.
//
// Topics are created on first use with kadm (partitions, replication factor
// and configs from Config) unless CreateTopics is off.
//
// It does not route, track LSNs or decide what to do with a failed record.
package publisher

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
)

// Config configures a Publisher.
type Config struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string
	// ClientID is sent to the brokers (default "walrelay").
	ClientID string
	// CreateTopics creates a topic with kadm the first time a record is
	// routed to it.
	CreateTopics bool
	// TopicPartitions for created topics; -1 uses the broker's default.
	TopicPartitions int32
	// TopicReplicationFactor for created topics; -1 uses the broker's default.
	TopicReplicationFactor int16
	// TopicConfigs are set on created topics (e.g. cleanup.policy).
	TopicConfigs map[string]string
	// Linger is how long a partition waits to fill a batch; 0 sends each
	// batch as soon as a request can carry it. (walrelay's kafka.linger
	// defaults to 5ms.)
	Linger time.Duration
	// MaxBufferedRecords bounds franz-go's own buffer; keep it at or above
	// the relay's in-flight cap so Produce does not block.
	MaxBufferedRecords int
	// BatchMaxBytes is the largest batch sent (default 1 MiB, Kafka's
	// default max.message.bytes).
	BatchMaxBytes int32
	// ClientMetrics lets franz-go push client metrics to brokers that
	// subscribe to them (KIP-714). Off, no client telemetry is collected:
	// setting up a push costs a burst of about 17 MB of compressor buffers,
	// a lot for a daemon that otherwise lives in tens of megabytes.
	ClientMetrics bool
	// TLS, when not nil, dials the brokers with TLS (see TLSConfig).
	TLS *tls.Config
	// SASL, when not nil, authenticates every connection (see SASLMechanism).
	SASL sasl.Mechanism
	// ExtraOpts are appended to the franz-go options (metrics hooks).
	ExtraOpts []kgo.Opt
}

// Publisher produces records. Create it with New; Close it when done.
type Publisher struct {
	cfg    Config
	client *kgo.Client
	admin  *kadm.Client
	log    *slog.Logger

	mu    sync.Mutex
	known map[string]struct{} // topics ensured to exist

	saslFailures *atomic.Int64 // SASLAuthenticate requests that failed (see CheckAccess)
}

// New creates the franz-go client. It does not contact the brokers; the
// first produce or Ping does.
func New(cfg Config, log *slog.Logger) (*Publisher, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("creating kafka client: no brokers configured")
	}
	if cfg.ClientID == "" {
		cfg.ClientID = "walrelay"
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(newPartitioner()),
		kgo.ProducerLinger(cfg.Linger),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	}
	if cfg.MaxBufferedRecords > 0 {
		opts = append(opts, kgo.MaxBufferedRecords(cfg.MaxBufferedRecords))
	}
	if cfg.BatchMaxBytes > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(cfg.BatchMaxBytes))
	}
	if !cfg.ClientMetrics {
		opts = append(opts, kgo.DisableClientMetrics())
	}
	if cfg.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(cfg.TLS))
	}
	saslFailures := new(atomic.Int64)
	if cfg.SASL != nil {
		opts = append(opts, kgo.SASL(cfg.SASL), kgo.WithHooks(saslHook{saslFailures}))
	}
	opts = append(opts, cfg.ExtraOpts...)
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("creating kafka client: %w", err)
	}
	return &Publisher{
		cfg:    cfg,
		client: client,
		admin:  kadm.NewClient(client),
		log:    log,
		known:  make(map[string]struct{}),

		saslFailures: saslFailures,
	}, nil
}

// Client is the underlying franz-go client (for metrics and admin).
func (p *Publisher) Client() *kgo.Client { return p.client }

// Ping checks that a broker answers.
func (p *Publisher) Ping(ctx context.Context) error {
	if err := p.client.Ping(ctx); err != nil {
		return fmt.Errorf("reaching kafka brokers %v: %w", p.cfg.Brokers, err)
	}
	return nil
}

// EnsureTopic creates topic on first use when CreateTopics is on; an
// existing topic is fine. It is cached, so later calls are a map lookup.
func (p *Publisher) EnsureTopic(ctx context.Context, topic string) error {
	p.mu.Lock()
	_, ok := p.known[topic]
	p.mu.Unlock()
	if ok || !p.cfg.CreateTopics {
		return nil
	}
	configs := make(map[string]*string, len(p.cfg.TopicConfigs))
	for k, v := range p.cfg.TopicConfigs {
		configs[k] = &v
	}
	resp, err := p.admin.CreateTopic(ctx, p.cfg.TopicPartitions, p.cfg.TopicReplicationFactor, configs, topic)
	if err == nil {
		err = resp.Err
	}
	switch {
	case err == nil:
		p.log.Info("created topic", "topic", topic, "partitions", resp.NumPartitions, "replication_factor", resp.ReplicationFactor)
	case errors.Is(err, kerr.TopicAlreadyExists):
	default:
		return fmt.Errorf("creating topic %q: %w", topic, err)
	}
	p.mu.Lock()
	p.known[topic] = struct{}{}
	p.mu.Unlock()
	return nil
}

// Produce hands r to franz-go; done is called once with the outcome.
//
// The record is deliberately not tied to a caller's context: franz-go fails
// buffered records whose context is cancelled, and a shutdown must be able
// to drain what is in flight. Close fails whatever is left. Produce blocks
// only when franz-go's buffer is full (see MaxBufferedRecords).
func (p *Publisher) Produce(r *kgo.Record, done func(*kgo.Record, error)) {
	p.client.Produce(context.Background(), r, done)
}

// Flush waits until every buffered record has been acknowledged or failed.
func (p *Publisher) Flush(ctx context.Context) error {
	if err := p.client.Flush(ctx); err != nil {
		return fmt.Errorf("flushing kafka producer: %w", err)
	}
	return nil
}

// Close closes the client; records still buffered fail with kgo.ErrClientClosed.
func (p *Publisher) Close() { p.client.Close() }
