package publisher

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Config configures a Publisher.
type Config struct {
	// Client are the franz-go options that reach the brokers and observe
	// the client: seed brokers, client id, TLS, SASL, franz-go's log and
	// metric hooks (internal/kafkaconf builds them from config.Kafka; the
	// publisher reads the brokers and TLS back from the client for its
	// messages and CheckAccess). Required: at least kgo.SeedBrokers.
	Client []kgo.Opt
	// Done receives the outcome of every record given to Produce: nil once
	// the broker acknowledged it, or an error about that record alone (see
	// errors.go). It is called once per record, from a franz-go or a
	// publisher goroutine, or from Produce itself for a record refused
	// before it was produced. It must not block and must not call Produce.
	// Required.
	Done func(*kgo.Record, error)
	// CreateTopics creates a topic with kadm the first time a record is
	// produced to it, if it does not exist.
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
	// the records the caller can have in flight so franz-go never blocks.
	MaxBufferedRecords int
	// BatchMaxBytes is the largest batch sent (walrelay's kafka.batch_max_bytes,
	// 1 MiB by default, Kafka's default max.message.bytes); lower for a
	// topic whose max.message.bytes is lower. Required.
	BatchMaxBytes int32
	// ClientMetrics lets franz-go push client metrics to brokers that
	// subscribe to them (KIP-714). Off, no client telemetry is collected:
	// setting up a push allocates its compressors' buffers in one burst,
	// large next to the rest of walrelay's heap (docs/benchmarks.md,
	// "Profile findings").
	ClientMetrics bool
	// MinBackoff and MaxBackoff bound the wait between attempts to prepare
	// a topic after a transient error (walrelay's: 250ms and 30s, set by
	// internal/kafkaconf). Required, MaxBackoff at least MinBackoff.
	MinBackoff, MaxBackoff time.Duration
	// RejectedTopicRetry is how long a topic Kafka refused stays refused
	// before the next record for it prepares it again (walrelay's: 30s), so
	// an ACL granted later is noticed without a restart. Required.
	RejectedTopicRetry time.Duration
	// TransactionalID, when set, makes the producer transactional
	// (exactly-once delivery): every record must be produced between
	// BeginTransaction and EndTransaction, and the first transaction's
	// InitProducerID fences any older producer with the same id.
	TransactionalID string
	// TransactionTimeout is the transaction.timeout.ms asked of the
	// broker (default franz-go's, 40s).
	TransactionTimeout time.Duration
}

// Stats are the publisher's counters, read at any time.
type Stats struct {
	// AdminRetries counts transient failures while preparing topics.
	AdminRetries int64
	// RetriedAlone counts records sent again alone after the broker
	// refused their batch as a whole.
	RetriedAlone int64
	// OneAtATimeTopics is how many topics are produced one record at a
	// time because the broker refused batches of records that fit alone.
	OneAtATimeTopics int64
	// OrderAtRisk counts records that reached the broker ahead of an
	// earlier record of their partition that was refused with its batch
	// and retried.
	OrderAtRisk int64
	// DataLoss counts partitions franz-go found had lost records the
	// broker had acknowledged.
	DataLoss int64
}

// Publisher produces records. Create it with New; Close it when done.
type Publisher struct {
	cfg    Config
	client *kgo.Client
	admin  *kadm.Client
	log    *slog.Logger
	// brokers and tls are the client's seed brokers and TLS config (nil:
	// plaintext), for messages and CheckAccess's probe.
	brokers []string
	tls     *tls.Config

	ctx    context.Context // ends with Close: stops the publisher's goroutines
	cancel context.CancelFunc
	wg     sync.WaitGroup // the worker and topic preparations
	// lifeMu orders wg.Add in startPreparing before Close's wg.Wait;
	// closing is set once Close begins.
	lifeMu  sync.Mutex
	closing atomic.Bool

	topics sync.Map // topic name -> *topic

	// pending are topics with held-back records to hand to franz-go; wake
	// tells the worker there are some.
	pendingMu sync.Mutex
	pending   []*topic
	wake      chan struct{}

	saslFailures *atomic.Int64 // SASLAuthenticate requests that failed (see CheckAccess)

	adminRetries, retriedAlone, oneAtATime, orderAtRisk, dataLoss atomic.Int64
	// inFranz counts records handed to franz-go whose Done has not
	// returned yet (Close waits for them).
	inFranz atomic.Int64
}

// New validates cfg, creates the franz-go client and starts the
// publisher's worker. It does not contact the brokers; the first produce
// or Ping does. A Config with a required field unset is an error: the
// publisher has no defaults of its own (internal/kafkaconf's
// PublisherConfig fills every field from config.Kafka).
func New(cfg Config, log *slog.Logger) (*Publisher, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("creating kafka client: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Publisher{cfg: cfg, log: log, wake: make(chan struct{}, 1), saslFailures: new(atomic.Int64)}
	opts := append(slices.Clone(cfg.Client),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(newPartitioner(p)),
		kgo.ProducerLinger(cfg.Linger),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytesFn(p.batchLimit),
		kgo.ProducerOnDataLossDetected(p.onDataLoss),
		// Counts failed SASLAuthenticate requests (CheckAccess); there
		// are none without SASL.
		kgo.WithHooks(saslHook{p.saslFailures}),
	)
	if cfg.MaxBufferedRecords > 0 {
		opts = append(opts, kgo.MaxBufferedRecords(cfg.MaxBufferedRecords))
	}
	if !cfg.ClientMetrics {
		opts = append(opts, kgo.DisableClientMetrics())
	}
	if cfg.TransactionalID != "" {
		opts = append(opts, kgo.TransactionalID(cfg.TransactionalID))
		if cfg.TransactionTimeout > 0 {
			opts = append(opts, kgo.TransactionTimeout(cfg.TransactionTimeout))
		}
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("creating kafka client: %w", err)
	}
	p.brokers, _ = client.OptValue(kgo.SeedBrokers).([]string)
	p.tls, _ = client.OptValue(kgo.DialTLSConfig).(*tls.Config)
	p.client, p.admin = client, kadm.NewClient(client)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.wg.Add(1)
	go p.run()
	return p, nil
}

// validate reports the first required field of c that is unset or out of
// range.
func (c *Config) validate() error {
	switch {
	case len(c.Client) == 0:
		return errors.New("Config.Client is required (the seed brokers at least)")
	case c.Done == nil:
		return errors.New("Config.Done is required")
	case c.BatchMaxBytes <= 0:
		return fmt.Errorf("Config.BatchMaxBytes %d must be positive", c.BatchMaxBytes)
	case c.MinBackoff <= 0:
		return fmt.Errorf("Config.MinBackoff %s must be positive", c.MinBackoff)
	case c.MaxBackoff < c.MinBackoff:
		return fmt.Errorf("Config.MaxBackoff %s must be at least Config.MinBackoff %s", c.MaxBackoff, c.MinBackoff)
	case c.RejectedTopicRetry <= 0:
		return fmt.Errorf("Config.RejectedTopicRetry %s must be positive", c.RejectedTopicRetry)
	}
	return nil
}

// Stats returns the publisher's counters.
func (p *Publisher) Stats() Stats {
	return Stats{
		AdminRetries:     p.adminRetries.Load(),
		RetriedAlone:     p.retriedAlone.Load(),
		OneAtATimeTopics: p.oneAtATime.Load(),
		OrderAtRisk:      p.orderAtRisk.Load(),
		DataLoss:         p.dataLoss.Load(),
	}
}

// Ping checks that a broker answers.
func (p *Publisher) Ping(ctx context.Context) error {
	if err := p.client.Ping(ctx); err != nil {
		return fmt.Errorf("reaching kafka brokers %v: %w", p.brokers, err)
	}
	return nil
}

// Produce hands r to the publisher; Config.Done is called once with the
// outcome. It never waits on the network: a record for a topic being
// prepared, or held back behind records being retried, waits in the
// publisher. Produce blocks only when franz-go's buffer is full (see
// MaxBufferedRecords).
//
// The record is deliberately not tied to a caller's context: franz-go fails
// buffered records whose context is cancelled, and a shutdown must be able
// to drain what is in flight. Close fails whatever is left.
func (p *Publisher) Produce(r *kgo.Record) {
	t := p.topic(r.Topic)
	t.mu.Lock()
	p.retryRejectedLocked(t)
	switch {
	case t.state == topicRejected:
		err := t.err
		t.mu.Unlock()
		p.cfg.Done(r, err)
	case t.holdsBackLocked():
		t.queue = append(t.queue, r)
		t.mu.Unlock()
	default:
		p.sendLocked(t, r, false)
	}
}

// Prepare waits until topic is ready to produce to (it prepares it if no
// record did yet) or Kafka refused it, whose error it returns.
func (p *Publisher) Prepare(ctx context.Context, topic string) error {
	t := p.topic(topic)
	for {
		t.mu.Lock()
		p.retryRejectedLocked(t)
		state, err, changed := t.state, t.err, t.changed
		t.mu.Unlock()
		switch state {
		case topicReady:
			return nil
		case topicRejected:
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("preparing topic %q: %w", topic, ctx.Err())
		case <-changed:
		}
	}
}

// Flush waits until every record given to Produce has been acknowledged or
// failed.
func (p *Publisher) Flush(ctx context.Context) error {
	for {
		if err := p.client.Flush(ctx); err != nil {
			return fmt.Errorf("flushing kafka producer: %w", err)
		}
		held := false
		p.topics.Range(func(_, v any) bool {
			t := v.(*topic)
			t.mu.Lock()
			held = held || t.outstanding > 0 || len(t.queue) > 0 || len(t.retry) > 0
			t.mu.Unlock()
			return !held
		})
		if !held {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("flushing kafka producer: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// BeginTransaction starts a Kafka transaction (Config.TransactionalID):
// records produced from now on commit or abort together. It must not be
// called concurrently with EndTransaction.
func (p *Publisher) BeginTransaction() error {
	if err := p.client.BeginTransaction(); err != nil {
		return fmt.Errorf("beginning kafka transaction: %w", err)
	}
	return nil
}

// EndTransaction commits (commit true) or aborts the open Kafka
// transaction. Every record produced in it must have its outcome first
// (Flush): franz-go does not wait for them. An error wrapping
// kerr.ProducerFenced or kerr.TransactionalIDAuthorizationFailed means
// this producer may never commit again; after any other error the
// transaction is aborted with EndTransaction(ctx, false) and may be tried
// again in a new one.
func (p *Publisher) EndTransaction(ctx context.Context, commit bool) error {
	if err := p.client.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		what := "aborting"
		if commit {
			what = "committing"
		}
		return fmt.Errorf("%s kafka transaction: %w", what, err)
	}
	return nil
}

// Close stops the publisher's goroutines and closes the client. Records
// not yet acknowledged get Done with an error wrapping ErrClosed: those
// it held back at once, those franz-go held as franz-go fails them, which
// Close waits for (up to 10s).
func (p *Publisher) Close() {
	p.lifeMu.Lock()
	p.closing.Store(true)
	p.lifeMu.Unlock()
	p.cancel()
	p.wg.Wait()
	p.client.Close() // fails what franz-go still buffers
	// franz-go calls the promises of the records it failed on its own
	// goroutine; wait for them, so the caller knows every outcome.
	for deadline := time.Now().Add(10 * time.Second); p.inFranz.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	p.topics.Range(func(_, v any) bool {
		t := v.(*topic)
		t.mu.Lock()
		held := append(t.retry, t.queue...)
		t.retry, t.queue = nil, nil
		t.mu.Unlock()
		for _, r := range held {
			p.cfg.Done(r, fmt.Errorf("%w: %w", ErrClosed, kgo.ErrClientClosed))
		}
		return true
	})
}

// onDataLoss is franz-go's report that a partition lost records the broker
// had acknowledged (an unclean leader election, a truncated log).
func (p *Publisher) onDataLoss(topic string, partition int32) {
	p.dataLoss.Add(1)
	p.log.Error("kafka lost records it had acknowledged (franz-go detected an out-of-order sequence); events walrelay confirmed may be missing from the partition: see the runbook, WalrelayKafkaDataLoss",
		"topic", topic, "partition", partition)
}
