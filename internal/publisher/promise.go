package publisher

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// This file turns franz-go's answer for each record into a verdict on that
// record alone, holding a record refused with its batch for a retry on its
// own.

// promise is every record's franz-go promise.
func (p *Publisher) promise(r *kgo.Record, err error) {
	defer p.inFranz.Add(-1)
	t := p.topic(r.Topic)
	t.mu.Lock()
	t.outstanding--
	alone := t.alone == r
	retried := alone && t.aloneRetried
	if alone {
		t.alone = nil
	}
	if err != nil && !alone && batchRefusal(err) && !p.closing.Load() {
		// An answer about a batch: hold the record for a retry alone.
		if t.mode == modeBatches {
			t.mode, t.aloneWent, t.sizeRefused = modeRecovering, false, false
			p.log.Warn("kafka refused a batch as a whole; holding the topic's new records and sending the refused ones again one at a time",
				"topic", r.Topic, "partition", r.Partition, "err", err)
		}
		t.sizeRefused = t.sizeRefused || isTooLarge(err)
		t.retry = append(t.retry, r)
		t.refused[r.Partition] = struct{}{}
		p.retriedAlone.Add(1)
		p.kickLocked(t)
		t.mu.Unlock()
		return
	}
	if err == nil && !alone && t.mode != modeBatches {
		if _, ok := t.refused[r.Partition]; ok {
			p.orderAtRisk.Add(1)
			p.log.Error("a record reached kafka before an earlier record of its partition that is being retried alone: per-key order may be broken for its key",
				"topic", r.Topic, "partition", r.Partition, "key", string(r.Key))
		}
	}
	if retried && err == nil {
		t.aloneWent = true
	}
	if t.mode == modeRecovering && len(t.retry) == 0 && t.outstanding == 0 && !t.handing {
		p.endRecoveryLocked(t)
	}
	if t.mode != modeBatches || len(t.queue) > 0 {
		p.kickLocked(t)
	}
	t.mu.Unlock()
	p.cfg.Done(r, p.verdict(t, r, err, alone))
}

// endRecoveryLocked ends a recovery once every refused record has its
// verdict. If batches were refused as too large and some of their records
// went through alone, batches are too large for the topic's real limit,
// which walrelay could not learn: the topic stays one record at a time.
// Otherwise (a refusal of records for what they hold, or only records too
// large on their own) it goes back to batches.
func (p *Publisher) endRecoveryLocked(t *topic) {
	clear(t.refused)
	if !t.sizeRefused || !t.aloneWent {
		t.mode = modeBatches
		return
	}
	t.mode = modeOneAtATime
	p.oneAtATime.Add(1)
	p.log.Warn("kafka refused batches of records that it accepts one by one: the topic's limit is below what walrelay could learn; producing to it one record at a time from now on. "+
		"Grant DESCRIBE_CONFIGS on the topic, or set kafka.batch_max_bytes at or below its max.message.bytes, and restart",
		"topic", t.name, "batch_limit", t.limit.Load())
}

// verdict turns franz-go's answer for r into the error Done gets.
func (p *Publisher) verdict(t *topic, r *kgo.Record, err error, alone bool) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kgo.ErrClientClosed):
		return fmt.Errorf("%w: %w", ErrClosed, err)
	case !alone && batchRefusal(err):
		// Refused with its batch while the publisher closes: no retry
		// will come.
		return fmt.Errorf("%w: refused with its batch while closing: %w", ErrClosed, err)
	case alone && batchRefusal(err):
		if isTooLarge(err) {
			return fmt.Errorf("%w: the broker refused it sent alone: %w", ErrRecordTooLarge, err)
		}
		return fmt.Errorf("%w: the broker refused it sent alone: %w", ErrRecordRejected, err)
	case topicRefusal(err):
		return topicError(r.Topic, produceRefusalHint(err), err)
	case isManual(r) && !t.partitionOK(r.Partition):
		return fmt.Errorf("%w: partition %d of topic %q, which has %d partitions: %w", ErrPartitionOutOfRange, r.Partition, r.Topic, t.partitions.Load(), err)
	}
	return err
}
