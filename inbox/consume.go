package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ConsumerConfig configures Consume.
type ConsumerConfig struct {
	// Brokers are the seed brokers (host:port). Required.
	Brokers []string
	// Group is the consumer group whose committed offsets say where to
	// resume. Required.
	Group string
	// Topics to consume, e.g. outbox.event.order. Required.
	Topics []string
	// ClientOpts are added to the franz-go client's: TLS, SASL, session
	// timeouts. Consume's own (group, topics, read_committed, manual
	// commits, blocking rebalances while a batch is processed) come first.
	ClientOpts []kgo.Opt
	// MaxPollRecords bounds the records processed between two offset
	// commits. Default 500.
	MaxPollRecords int
	// MaxAttempts is how often a record whose processing fails is tried
	// before Consume returns the error; 0 tries until ctx ends (a record
	// is never skipped, so a poison event stops its partition: have the
	// Handler record it and return nil if it should be skipped).
	MaxAttempts int
	// RetryBackoff is the first wait after a failure, doubled up to
	// 10s. Default 100ms.
	RetryBackoff time.Duration
}

func (c *ConsumerConfig) check() error {
	switch {
	case len(c.Brokers) == 0:
		return fmt.Errorf("%w: Brokers is empty", ErrInvalidConfig)
	case c.Group == "":
		return fmt.Errorf("%w: Group is empty: offsets are committed to a consumer group", ErrInvalidConfig)
	case len(c.Topics) == 0:
		return fmt.Errorf("%w: Topics is empty", ErrInvalidConfig)
	case c.MaxPollRecords < 0:
		return fmt.Errorf("%w: MaxPollRecords %d is negative", ErrInvalidConfig, c.MaxPollRecords)
	case c.MaxAttempts < 0:
		return fmt.Errorf("%w: MaxAttempts %d is negative", ErrInvalidConfig, c.MaxAttempts)
	}
	if c.MaxPollRecords == 0 {
		c.MaxPollRecords = 500
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = 100 * time.Millisecond
	}
	return nil
}

// maxBackoff caps the wait between two attempts at a record.
const maxBackoff = 10 * time.Second

// commitTimeout bounds the offset commit of a batch processed before a
// stop, when ctx is already done.
const commitTimeout = 10 * time.Second

// Consume reads cfg.Topics as member of cfg.Group and processes each
// record with Process and h, in partition order, until ctx ends (it then
// returns nil) or a record cannot be processed (it returns the error).
//
// A new group starts at the topics' beginning. Records of aborted Kafka
// transactions are never read (read_committed). Offsets are committed
// only for records processed, after each batch and before returning, and
// never automatically; rebalances wait for the batch at hand. So a crash
// after a database commit but before the offset commit makes the group
// read those records again, and the inbox skips them.
//
// It owns its franz-go client: after an error, call Consume again (with
// a backoff of your own) to resume from the committed offsets.
func (in *Inbox) Consume(ctx context.Context, db Beginner, cfg ConsumerConfig, h Handler, log *slog.Logger) error {
	if err := cfg.check(); err != nil {
		return err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
	}, cfg.ClientOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("creating the inbox consumer of group %q: %w", cfg.Group, err)
	}
	defer cl.Close() // leaves the group

	for {
		fetches := cl.PollRecords(ctx, cfg.MaxPollRecords)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			cl.AllowRebalance()
			return nil
		}
		var fetchErr error
		fetches.EachError(func(topic string, p int32, err error) {
			switch {
			case errors.Is(err, context.Canceled):
			case kerr.IsRetriable(err):
				log.Warn("inbox: fetch error; franz-go retries", "topic", topic, "partition", p, "err", err)
			default:
				fetchErr = errors.Join(fetchErr, fmt.Errorf("fetching %s[%d]: %w", topic, p, err))
			}
		})
		if fetchErr != nil {
			cl.AllowRebalance()
			return fmt.Errorf("consuming group %q: %w", cfg.Group, fetchErr)
		}
		recs := fetches.Records()
		var done []*kgo.Record
		var procErr error
		for _, rec := range recs {
			if procErr = in.processRetrying(ctx, db, rec, h, cfg, log); procErr != nil {
				break
			}
			done = append(done, rec)
		}
		commitErr := commit(ctx, cl, done)
		cl.AllowRebalance()
		if procErr != nil && ctx.Err() != nil {
			return commitErr // stopped while retrying: a clean stop
		}
		if err := errors.Join(procErr, commitErr); err != nil {
			return fmt.Errorf("consuming group %q: %w", cfg.Group, err)
		}
	}
}

// commit commits the offsets after recs, also when ctx is done: what was
// processed should not be read again.
func commit(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) error {
	if len(recs) == 0 {
		return nil
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	if err := cl.CommitRecords(cctx, recs...); err != nil {
		return fmt.Errorf("committing offsets of %d processed records (they will be read again, and skipped): %w", len(recs), err)
	}
	return nil
}

// processRetrying processes rec until it succeeds, ctx ends, or
// cfg.MaxAttempts attempts failed. A record without an event id is not
// retried.
func (in *Inbox) processRetrying(ctx context.Context, db Beginner, rec *kgo.Record, h Handler, cfg ConsumerConfig, log *slog.Logger) error {
	wait := cfg.RetryBackoff
	for attempt := 1; ; attempt++ {
		applied, err := in.Process(ctx, db, rec, h)
		if err == nil {
			if !applied {
				log.Debug("inbox: event processed before; skipped", "id", in.EventID(rec), "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset)
			}
			return nil
		}
		if errors.Is(err, ErrNoEventID) || ctx.Err() != nil || (cfg.MaxAttempts > 0 && attempt >= cfg.MaxAttempts) {
			return err
		}
		log.Warn("inbox: processing an event failed; trying again", "id", in.EventID(rec), "topic", rec.Topic,
			"partition", rec.Partition, "offset", rec.Offset, "attempt", attempt, "retry_in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, maxBackoff)
	}
}
