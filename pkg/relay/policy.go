package relay

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/pkg/checkpoint"
	"github.com/walrelay/walrelay/pkg/config"
)

// Error classes of records the broker refuses, besides the router's.
const (
	classRecordTooLarge = "record_too_large"
	classTopicRejected  = "topic_rejected"
)

// origin identifies the outbox row behind a record, for logs and dead
// letters.
type origin struct {
	lsn   pglogrepl.LSN
	id    string // the outbox id ("" when the row has none)
	table string
}

// pending is a record's place in the tracker: acked once, when the record
// (or the dead-letter copy standing in for it) is acknowledged.
type pending struct {
	tx   *checkpoint.Tx
	size int
}

// deadLetterJob is a refused record's dead-letter copy, produced by the
// dead-letter worker (promises must not produce; see kgo.Client.Produce).
type deadLetterJob struct {
	rec     *kgo.Record
	origin  origin
	pending pending
}

// produceErrorClass maps a broker refusal to its relay.on_error class. Other
// errors (and retriable ones franz-go gave up on) have no class: they stop
// the relay.
func produceErrorClass(err error) (string, bool) {
	switch {
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		return classRecordTooLarge, true
	case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.PolicyViolation),
		errors.Is(err, kerr.InvalidTopicException), errors.Is(err, kerr.UnknownTopicOrPartition):
		return classTopicRejected, true
	}
	return "", false
}

// reject logs and counts a row walrelay cannot publish as routed and
// returns the policy that applies to its class.
func (r *Relay) reject(o origin, class string, err error, msg string) string {
	policy, _ := r.cfg.Relay.OnError.Policy(class)
	r.metrics.RowsRejected.WithLabelValues(class, policy).Inc()
	r.metrics.PublishErrors.WithLabelValues(class).Inc()
	attrs := []any{"lsn", o.lsn.String(), "outbox_id", o.id, "table", o.table, "class", class, "policy", policy, "err", err}
	switch policy {
	case config.PolicyStop:
		r.log.Error(msg+"; stopping", attrs...)
	case config.PolicyLog:
		r.log.Error(msg+"; skipped", attrs...)
	default:
		r.log.Error(msg+"; sending it to the dead-letter topic", append(attrs, "topic", r.cfg.Relay.DeadLetterTopic)...)
	}
	return policy
}

// refused handles a record franz-go failed. It runs in a promise, so it
// never blocks: a dead-letter copy is queued for the worker.
func (r *Relay) refused(rec *kgo.Record, err error, o origin, p pending) {
	class, known := produceErrorClass(err)
	if !known || rec.Topic == r.cfg.Relay.DeadLetterTopic {
		r.metrics.PublishErrors.WithLabelValues("produce").Inc()
		r.log.Error("kafka gave up on a record; stopping", "topic", rec.Topic, "lsn", o.lsn.String(), "outbox_id", o.id, "err", err)
		r.fail.set(fmt.Errorf("producing outbox event %s (lsn %s) to %q: %w", o.id, o.lsn, rec.Topic, err))
		return
	}
	switch r.reject(o, class, err, "kafka refused a record") {
	case config.PolicyStop:
		r.fail.set(fmt.Errorf("%w: outbox row %s at %s: %w", ErrStopped, o.id, o.lsn, err))
	case config.PolicyLog:
		r.tracker.Ack(p.tx, p.size)
	default:
		select {
		case r.deadLetters <- deadLetterJob{rec: deadLetterOf(rec, r.cfg.Relay.DeadLetterTopic, o, class, err), origin: o, pending: p}:
		default: // cannot happen: the queue holds as many jobs as records can be in flight
			r.fail.set(fmt.Errorf("dead-letter queue full at outbox row %s (lsn %s)", o.id, o.lsn))
		}
	}
}

// runDeadLetters produces queued dead-letter copies until ctx is done. The
// original record is acknowledged in the tracker when its copy is.
func (r *Relay) runDeadLetters(ctx context.Context) {
	published := r.metrics.Published(r.cfg.Relay.DeadLetterTopic)
	for {
		select {
		case <-ctx.Done():
			return
		case job := <-r.deadLetters:
			// Blocking is fine here (not in a promise): the topic is
			// created on first use like any other.
			if err := r.pub.EnsureTopic(ctx, job.rec.Topic); err != nil {
				r.fail.set(fmt.Errorf("preparing relay.dead_letter_topic for outbox event %s (lsn %s): %w", job.origin.id, job.origin.lsn, err))
				continue
			}
			r.pub.Produce(job.rec, func(rec *kgo.Record, err error) {
				if err != nil {
					r.metrics.PublishErrors.WithLabelValues("produce").Inc()
					r.log.Error("kafka refused a dead-letter record; stopping", "topic", rec.Topic, "lsn", job.origin.lsn.String(), "outbox_id", job.origin.id, "err", err)
					r.fail.set(fmt.Errorf("producing dead letter for outbox event %s (lsn %s): %w", job.origin.id, job.origin.lsn, err))
					return
				}
				r.tracker.Ack(job.pending.tx, job.pending.size)
				published.Inc()
			})
		}
	}
}
