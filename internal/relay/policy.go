package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/walrelay/walrelay/internal/checkpoint"
	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/deadletter"
	"github.com/walrelay/walrelay/internal/publisher"
	"github.com/walrelay/walrelay/internal/router"
)

// deadLetterJob is a dead letter to produce, standing for a record in the
// tracker: the original record's place (tx, size), acked when the dead
// letter is. The dead-letter worker produces it (Done, where refusals
// arrive, must not produce; see publisher.Config.Done).
type deadLetterJob struct {
	letter *deadletter.Letter
	tx     *checkpoint.Tx
	size   int
	// withValue is false once the dead letter with its value was too large
	// for the dead-letter topic.
	withValue bool
	// committed is the row's commit time on Relay.clock, for latencies.
	committed time.Duration
	pos       rowPos
}

// produceErrorClass maps the publisher's verdict on a record to its
// relay.on_error class. Other errors have no class: they stop the relay.
func produceErrorClass(err error) (router.ErrorClass, bool) {
	switch {
	case errors.Is(err, publisher.ErrRecordTooLarge):
		return router.ClassRecordTooLarge, true
	case errors.Is(err, publisher.ErrTopicRejected):
		return router.ClassTopicRejected, true
	case errors.Is(err, publisher.ErrPartitionOutOfRange),
		errors.Is(err, publisher.ErrRecordRejected) && errors.Is(err, kerr.InvalidTimestamp):
		// A value of the row (the partition column, the timestamp column)
		// the broker cannot take.
		return router.ClassPayloadInvalid, true
	}
	return 0, false
}

// reject logs and counts a row walrelay cannot publish as routed and
// returns the policy that applies to its class.
func (r *Relay) reject(o deadletter.Origin, class router.ErrorClass, err error, msg string) string {
	policy, _ := r.cfg.Relay.OnError.Policy(class)
	r.metrics.RowsRejected.WithLabelValues(class.String(), policy).Inc()
	r.metrics.PublishErrors.WithLabelValues(class.String()).Inc()
	attrs := []any{"lsn", o.LSN.String(), "outbox_id", o.ID, "table", o.Table, "class", class.String(), "policy", policy, "err", err}
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

// refused handles a record the publisher did not deliver and returns what
// became of it, for the delivery to settle (a record skipped by policy log
// is acked then, or with exactly-once delivery when its Kafka transaction
// commits). It may run in a franz-go promise or
// in Produce, so it never blocks: a dead letter is queued for the worker.
func (r *Relay) refused(out *outRecord, err error) disposition {
	o := out.origin()
	if errors.Is(err, publisher.ErrClosed) {
		// A shutdown closed the client before the broker answered; the
		// record stays unconfirmed and Postgres re-sends it next time.
		r.abandoned.add(out.lsn)
		return dispRetry
	}
	if out.dead != nil {
		return r.deadLetterRefused(out, err)
	}
	class, known := produceErrorClass(err)
	if !known {
		if r.delivery.failed(out, err) {
			return dispRetry
		}
		r.metrics.PublishErrors.WithLabelValues("produce").Inc()
		r.log.Error("kafka gave up on a record; stopping", "topic", out.rec.Topic, "lsn", o.LSN.String(), "outbox_id", o.ID, "err", err)
		r.fail.set(fmt.Errorf("producing outbox event %s (lsn %s) to %q: %w", o.ID, o.LSN, out.rec.Topic, err))
		return dispRetry
	}
	switch r.reject(o, class, err, "kafka refused a record") {
	case config.PolicyStop:
		r.fail.set(fmt.Errorf("%w: outbox row %s at %s: %w: %s", ErrStopped, o.ID, o.LSN, err, stopFix(r.cfg.Postgres.Slot, o.ID)))
		return dispRetry
	case config.PolicyLog:
		return dispSkipped // acked by the delivery (settle)
	default:
		r.queueDeadLetter(deadLetterJob{letter: deadletter.FromRefused(&out.rec, o, class.String(), err), tx: out.tx, size: out.size, withValue: true, committed: out.committed, pos: out.pos})
		return dispReplaced
	}
}

// deadLetterRefused handles a dead letter the publisher did not deliver:
// one too large for the dead-letter topic goes again without its value;
// any other refusal stops the relay, the row unconfirmed.
func (r *Relay) deadLetterRefused(out *outRecord, err error) disposition {
	job := *out.dead
	job.tx, job.size, job.pos = out.tx, out.size, out.pos // the place in the tracker (and the WAL) it stands for
	o := job.letter.Origin
	if errors.Is(err, publisher.ErrRecordTooLarge) && job.withValue {
		r.log.Warn("dead letter too large for the dead-letter topic; sending it without its value (its size is in "+deadletter.HeaderOriginalSize+")",
			"lsn", o.LSN.String(), "outbox_id", o.ID, "value_bytes", job.letter.ValueSize(), "err", err)
		job.withValue = false
		r.queueDeadLetter(job)
		return dispReplaced
	}
	if _, known := produceErrorClass(err); !known && r.delivery.failed(out, err) {
		return dispRetry
	}
	r.metrics.PublishErrors.WithLabelValues("produce").Inc()
	r.log.Error("kafka refused a dead-letter record; stopping", "topic", out.rec.Topic, "lsn", o.LSN.String(), "outbox_id", o.ID, "err", err)
	r.fail.set(fmt.Errorf("producing the dead letter of outbox event %s (lsn %s) to %q: %w", o.ID, o.LSN, out.rec.Topic, err))
	return dispRetry
}

// queueDeadLetter hands job to the dead-letter worker without blocking.
func (r *Relay) queueDeadLetter(job deadLetterJob) {
	select {
	case r.deadLetters <- job:
	default: // cannot happen: the queue holds as many jobs as records can be in flight
		r.fail.set(fmt.Errorf("dead-letter queue full at outbox row %s (lsn %s)", job.letter.Origin.ID, job.letter.Origin.LSN))
	}
}

// runDeadLetters produces queued dead letters until ctx is done. Each is a
// record of its own (Relay.onProduced), standing for the original in the
// tracker: acked when the broker acknowledges the dead letter.
func (r *Relay) runDeadLetters(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case job := <-r.deadLetters:
			r.delivery.replace(r.deadLetterRecord(job))
		}
	}
}

// deadLetterRecord wraps job's dead letter for the producer.
func (r *Relay) deadLetterRecord(job deadLetterJob) *outRecord {
	out := &outRecord{
		rec:       *job.letter.Record(r.cfg.Relay.DeadLetterTopic, job.withValue),
		lsn:       job.letter.Origin.LSN,
		table:     job.letter.Origin.Table,
		tx:        job.tx,
		size:      job.size,
		dead:      &job,
		published: r.deadLettersPublished,
		committed: job.committed,
		pos:       job.pos,
	}
	out.rec.Context = out
	return out
}

// abandonment counts the records a shutdown gave up on (the client closed
// before the broker answered) and their LSNs, for one line in the log.
type abandonment struct {
	mu       sync.Mutex
	n        int
	min, max pglogrepl.LSN
}

func (a *abandonment) add(lsn pglogrepl.LSN) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == 0 || lsn < a.min {
		a.min = lsn
	}
	a.max = max(a.max, lsn)
	a.n++
}

func (a *abandonment) get() (n int, min, max pglogrepl.LSN) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n, a.min, a.max
}
