package publisher

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// topicState is where a topic is in its preparation.
type topicState uint8

const (
	topicPreparing topicState = iota // its records wait for the preparation
	topicReady                       // records go to franz-go
	topicRejected                    // Kafka refuses it; records fail until retryAt
)

// mode is how records of a ready topic reach franz-go.
type mode uint8

const (
	modeBatches    mode = iota // as produced; franz-go batches them
	modeRecovering             // a batch was refused: held back, the refused ones retried alone
	modeOneAtATime             // each record alone, after the one before it is answered
)

// topic is the publisher's state of one topic. Its mutex guards everything
// but limit and partitions, which franz-go's goroutines read.
type topic struct {
	name string

	// limit is the batch limit franz-go applies: BatchMaxBytes, or the
	// topic's max.message.bytes when lower. partitions is the partition
	// count the partitioner last saw (for explicit partitions).
	limit       atomic.Int32
	limitSource string
	partitions  atomic.Int32

	mu      sync.Mutex
	state   topicState
	err     error         // topicRejected: why (wraps ErrTopicRejected)
	retryAt time.Time     // topicRejected: when to prepare again
	changed chan struct{} // closed and replaced when state changes (Prepare)

	mode        mode
	outstanding int         // records handed to franz-go, not yet answered
	handing     bool        // the worker is handing a held-back record to franz-go
	alone       *kgo.Record // the record sent alone (modes other than modeBatches)
	// aloneRetried says alone is one of retry's; aloneWent that one of
	// them was accepted during this recovery; sizeRefused that a batch
	// was refused as too large.
	aloneRetried, aloneWent, sizeRefused bool
	retry                                []*kgo.Record      // refused with their batch: to send again alone, in order
	queue                                []*kgo.Record      // held back, in order
	refused                              map[int32]struct{} // partitions with a refused batch in this recovery
	kicked                               bool               // on the worker's pending list
}

// topic returns the state of name, creating it and starting its
// preparation the first time.
func (p *Publisher) topic(name string) *topic {
	if v, ok := p.topics.Load(name); ok {
		return v.(*topic)
	}
	t := &topic{name: name, changed: make(chan struct{}), refused: make(map[int32]struct{})}
	t.limit.Store(p.cfg.BatchMaxBytes)
	t.limitSource = "kafka.batch_max_bytes"
	if v, loaded := p.topics.LoadOrStore(name, t); loaded {
		return v.(*topic)
	}
	t.mu.Lock()
	p.startPreparing(t)
	t.mu.Unlock()
	return t
}

// holdsBackLocked reports whether a new record must wait behind others.
func (t *topic) holdsBackLocked() bool {
	return t.state != topicReady || t.handing || len(t.queue) > 0 || len(t.retry) > 0 ||
		(t.mode != modeBatches && t.outstanding > 0)
}

// checkLocked refuses a record that cannot fit a batch of its own.
func (t *topic) checkLocked(r *kgo.Record) error {
	if n, limit := AloneSize(r), int(t.limit.Load()); n > limit {
		return fmt.Errorf("%w: %d bytes in a batch of its own, over the limit of %d bytes for topic %q (%s)", ErrRecordTooLarge, n, limit, t.name, t.limitSource)
	}
	return nil
}

// partitionOK reports whether partition exists as far as the partitioner
// last saw.
func (t *topic) partitionOK(partition int32) bool {
	return partition >= 0 && partition < t.partitions.Load()
}

// setStateLocked moves t to state and wakes Prepare's waiters.
func (t *topic) setStateLocked(s topicState) {
	t.state = s
	close(t.changed)
	t.changed = make(chan struct{})
}

// batchLimit is franz-go's ProducerBatchMaxBytesFn: it asks when it first
// sees a partition, which is after the topic was prepared.
func (p *Publisher) batchLimit(name string) int32 {
	if v, ok := p.topics.Load(name); ok {
		return v.(*topic).limit.Load()
	}
	return p.cfg.BatchMaxBytes
}

// retryRejectedLocked prepares a rejected topic again once its
// RejectedTopicRetry has passed (t.mu held).
func (p *Publisher) retryRejectedLocked(t *topic) {
	if t.state == topicRejected && !time.Now().Before(t.retryAt) {
		p.startPreparing(t)
	}
}

// startPreparing prepares t on a goroutine of the publisher (t.mu held).
func (p *Publisher) startPreparing(t *topic) {
	p.lifeMu.Lock()
	defer p.lifeMu.Unlock()
	if p.closing.Load() {
		t.err = fmt.Errorf("%w: %w", ErrClosed, kgo.ErrClientClosed)
		t.retryAt = time.Now().Add(24 * time.Hour)
		t.setStateLocked(topicRejected)
		return
	}
	t.setStateLocked(topicPreparing)
	p.wg.Add(1)
	go p.prepare(t)
}

// prepare makes t ready, retrying transient failures with backoff until
// the publisher closes, or rejects it when Kafka refuses it.
func (p *Publisher) prepare(t *topic) {
	defer p.wg.Done()
	backoff := p.cfg.MinBackoff
	for {
		info, err := p.examine(p.ctx, t.name)
		if p.ctx.Err() != nil {
			return // Close fails the held-back records
		}
		if err == nil {
			p.ready(t, info)
			return
		}
		if errors.Is(err, ErrTopicRejected) {
			p.reject(t, err)
			return
		}
		p.adminRetries.Add(1)
		p.log.Warn("preparing a kafka topic failed; retrying", "topic", t.name, "err", err, "backoff", backoff)
		select {
		case <-p.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, p.cfg.MaxBackoff)
	}
}

// ready lets t's records go.
func (p *Publisher) ready(t *topic, info topicInfo) {
	t.limit.Store(info.limit)
	t.mu.Lock()
	t.limitSource = info.limitSource
	t.partitions.Store(info.partitions)
	t.setStateLocked(topicReady)
	if len(t.queue) > 0 {
		p.kickLocked(t)
	}
	t.mu.Unlock()
	p.log.Info("kafka topic ready", "topic", t.name, "partitions", info.partitions, "batch_limit", info.limit, "limit_from", info.limitSource)
}

// reject fails t's held-back records with err, and the records produced
// to t until RejectedTopicRetry has passed.
func (p *Publisher) reject(t *topic, err error) {
	t.mu.Lock()
	t.err, t.retryAt = err, time.Now().Add(p.cfg.RejectedTopicRetry)
	t.setStateLocked(topicRejected)
	held := t.queue
	t.queue = nil
	t.mu.Unlock()
	p.log.Error("kafka refuses a topic", "topic", t.name, "err", err)
	for _, r := range held {
		p.cfg.Done(r, err)
	}
}

// topicInfo is what preparing a topic learned.
type topicInfo struct {
	partitions  int32
	limit       int32  // batch limit
	limitSource string // where limit comes from
}

// attemptTimeout bounds one admin request.
const attemptTimeout = 15 * time.Second

// examine prepares one topic: it finds it in the metadata, creates it if
// it is missing and creation is on, and learns its batch limit. An error
// wrapping ErrTopicRejected is final; any other is transient.
func (p *Publisher) examine(ctx context.Context, name string) (topicInfo, error) {
	exists, partitions, err := p.lookup(ctx, name)
	if err != nil {
		return topicInfo{}, err
	}
	created := false
	if !exists {
		if !p.cfg.CreateTopics {
			return topicInfo{}, topicError(name, "it does not exist and kafka.create_topics is off: create it, or turn kafka.create_topics on", nil)
		}
		if partitions, created, err = p.create(ctx, name); err != nil {
			return topicInfo{}, err
		}
	}
	info := topicInfo{partitions: partitions}
	if info.limit, info.limitSource, err = p.learnLimit(ctx, name, created); err != nil {
		return topicInfo{}, err
	}
	return info, nil
}

// lookup reads the topic's metadata: whether it exists and its partitions.
func (p *Publisher) lookup(ctx context.Context, name string) (exists bool, partitions int32, err error) {
	actx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	details, err := p.admin.ListTopics(actx, name)
	if errors.Is(err, kerr.TopicAuthorizationFailed) {
		// kadm turns the topic's authorization error into the request's.
		return false, 0, topicError(name, "the principal may not describe it: grant WRITE (which implies DESCRIBE) on the topic", err)
	}
	if err != nil {
		return false, 0, fmt.Errorf("reading the metadata of topic %q: %w", name, err)
	}
	d, ok := details[name]
	switch {
	case !ok, errors.Is(d.Err, kerr.UnknownTopicOrPartition):
		return false, 0, nil
	case d.Err == nil:
		return true, int32(len(d.Partitions)), nil
	case errors.Is(d.Err, kerr.TopicAuthorizationFailed):
		return false, 0, topicError(name, "the principal may not describe it: grant WRITE (which implies DESCRIBE) on the topic", d.Err)
	case errors.Is(d.Err, kerr.InvalidTopicException):
		return false, 0, topicError(name, "Kafka rejects the name", d.Err)
	}
	return false, 0, fmt.Errorf("reading the metadata of topic %q: %w", name, d.Err)
}

// create creates the topic. created is false when it turned out to exist
// already (another process created it, or the principal may not create
// topics and it exists, which is no error).
func (p *Publisher) create(ctx context.Context, name string) (partitions int32, created bool, err error) {
	configs := make(map[string]*string, len(p.cfg.TopicConfigs))
	for k, v := range p.cfg.TopicConfigs {
		configs[k] = &v
	}
	actx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	resps, err := p.admin.CreateTopics(actx, p.cfg.TopicPartitions, p.cfg.TopicReplicationFactor, configs, name)
	resp, ok := resps[name]
	switch {
	case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed):
		resp.Err = err // as a refusal for the topic: below
	case err != nil:
		return 0, false, fmt.Errorf("creating topic %q: %w", name, err)
	case !ok:
		return 0, false, fmt.Errorf("creating topic %q: the broker's answer does not name it", name)
	}
	switch err := resp.Err; {
	case err == nil:
		p.log.Info("created kafka topic", "topic", name, "partitions", resp.NumPartitions, "replication_factor", resp.ReplicationFactor)
		return resp.NumPartitions, true, nil
	case errors.Is(err, kerr.TopicAlreadyExists):
	case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed):
		// As Kafka Connect does (TopicAdmin.createOrFindTopics): a refused
		// creation is fine when the topic is there.
		exists, partitions, lerr := p.lookup(ctx, name)
		switch {
		case lerr != nil:
			return 0, false, lerr
		case !exists:
			return 0, false, topicError(name, "it does not exist and the principal may not create it: grant CREATE on the topic (or the cluster), or create the topic beforehand", err)
		}
		return partitions, false, nil
	case errors.Is(err, kerr.PolicyViolation), errors.Is(err, kerr.InvalidTopicException),
		errors.Is(err, kerr.InvalidReplicationFactor), errors.Is(err, kerr.InvalidPartitions),
		errors.Is(err, kerr.InvalidConfig), errors.Is(err, kerr.InvalidRequest):
		why := "Kafka refused to create it"
		if resp.ErrMessage != "" {
			why += " (" + resp.ErrMessage + ")"
		}
		return 0, false, topicError(name, why+"; check kafka.topic_partitions, kafka.topic_replication_factor and kafka.topic_configs, or create the topic beforehand", err)
	default:
		return 0, false, fmt.Errorf("creating topic %q: %w", name, err)
	}
	_, partitions, err = p.lookup(ctx, name)
	return partitions, false, err
}

// learnLimit returns the topic's batch limit: BatchMaxBytes, or the
// topic's max.message.bytes when DescribeConfigs gives a lower one (or,
// refused, the max.message.bytes walrelay created the topic with). A
// refusal is no error: without the topic's own limit, batches are
// BatchMaxBytes and a batch the broker refuses is retried record by
// record. A transient failure is returned (the preparation is retried).
func (p *Publisher) learnLimit(ctx context.Context, name string, created bool) (int32, string, error) {
	limit, source := p.cfg.BatchMaxBytes, "kafka.batch_max_bytes"
	lower := func(v int64, from string) {
		if v > 0 && v < int64(limit) {
			limit, source = int32(max(v, minBatchBytes)), from
		}
	}
	v, err := p.describeMaxMessageBytes(ctx, name)
	if err == nil {
		lower(v, "the topic's max.message.bytes")
		return limit, source, nil
	}
	var kerrErr *kerr.Error
	refused := errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed)
	if !refused && !errors.Is(err, errNoLimit) && (!errors.As(err, &kerrErr) || kerrErr.Retriable) {
		// A timeout, a lost connection, a controller moving: prepare the
		// topic again later rather than batch it without its limit.
		return 0, "", fmt.Errorf("reading the configs of topic %q: %w", name, err)
	}
	if s, ok := p.cfg.TopicConfigs["max.message.bytes"]; ok && created {
		if v, perr := strconv.ParseInt(s, 10, 64); perr == nil {
			lower(v, "max.message.bytes in kafka.topic_configs")
		}
	}
	hint := ""
	if errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) {
		hint = " (grant DESCRIBE_CONFIGS on the topic to let walrelay read it)"
	}
	p.log.Warn("cannot read the topic's max.message.bytes"+hint+"; a batch the broker refuses as too large is sent again record by record",
		"topic", name, "batch_limit", limit, "limit_from", source, "err", err)
	return limit, source, nil
}

// describeMaxMessageBytes reads the topic's effective max.message.bytes.
func (p *Publisher) describeMaxMessageBytes(ctx context.Context, name string) (int64, error) {
	actx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	rcs, err := p.admin.DescribeTopicConfigs(actx, name)
	if err != nil {
		return 0, err
	}
	for _, rc := range rcs {
		if rc.Name != name {
			continue
		}
		if rc.Err != nil {
			return 0, rc.Err
		}
		for _, c := range rc.Configs {
			if c.Key == "max.message.bytes" && c.Value != nil {
				v, err := strconv.ParseInt(*c.Value, 10, 64)
				if err != nil {
					return 0, fmt.Errorf("%w: %w", errNoLimit, err)
				}
				return v, nil
			}
		}
		return 0, fmt.Errorf("%w: max.message.bytes is not in it", errNoLimit)
	}
	return 0, fmt.Errorf("%w: the topic is not in it", errNoLimit)
}

// errNoLimit is an answer to DescribeConfigs without a usable
// max.message.bytes: asking again would not help.
var errNoLimit = errors.New("the broker's configs give no limit")

// isTooLarge reports a size refusal.
func isTooLarge(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge)
}

// produceRefusalHint says what to fix when the broker refuses a topic
// on produce.
func produceRefusalHint(err error) string {
	switch {
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		return "the broker refused to take records for it: grant WRITE on the topic"
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return "the topic or partition does not exist (deleted?)"
	}
	return "the broker refused to take records for it"
}
