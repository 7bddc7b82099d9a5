// Package kafkalog reads a topic used as a log of state (Kafka Connect's
// offsets topic, walrelay's checkpoint topic) to its end, as Connect's
// KafkaBasedLog.readToEnd does: every partition from its start to the end
// offset listed when the read began, with read_committed isolation, so
// records of transactions still open or aborted are never seen.
//
// ReadToEnd reads to the last stable offsets: what a read_committed
// consumer may reach at once, which stops below the first transaction
// still open. ReadStable reads to the high watermarks, waiting until
// every transaction with records below them has ended: on a topic other
// producers write too, it is the read that sees every committed record
// written before it began.
//
// In: seed options for a franz-go client and a topic. Out: each committed
// record, in offset order per partition. It keeps nothing: what a record
// means is the caller's.
package kafkalog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrNoTopic is returned (wrapped) when the topic does not exist.
var ErrNoTopic = errors.New("topic does not exist")

// ErrHeld is returned (wrapped, by a *HeldError) by ReadStable when ctx
// ends while a transaction still open holds a partition's last stable
// offset below the end offset the read must reach.
var ErrHeld = errors.New("an open transaction holds the last stable offset below the end to read to")

// ReadToEnd calls each with every committed record of topic, from each
// partition's start to its last stable offset (the end a read_committed
// consumer may reach) when the read began, and returns the number of
// partitions. opts configure the clients (seed brokers, TLS, SASL);
// ReadToEnd adds what it needs to consume. Control records are read (and
// not passed on) so that a partition ending in a transaction marker is
// known to be read to its end.
func ReadToEnd(ctx context.Context, topic string, opts []kgo.Opt, each func(*kgo.Record)) (partitions int, err error) {
	adm, err := kgo.NewClient(opts...)
	if err != nil {
		return 0, fmt.Errorf("creating kafka client: %w", err)
	}
	defer adm.Close()
	ends, err := listOffsets(ctx, kadm.NewClient(adm).ListCommittedOffsets, topic)
	if err != nil {
		return 0, err
	}
	return read(ctx, kadm.NewClient(adm), topic, opts, ends, each)
}

// ReadStable calls each with every committed record of topic, from each
// partition's start to its end offset (high watermark) when the read
// began, and returns the number of partitions. It reads only once every
// transaction with records below those end offsets has ended: it lists the
// last stable offsets, with a backoff from 20ms to 1s, until each has
// reached its partition's end offset, for as long as ctx allows. A read
// right after fencing a transactional id (InitProducerID, which ends its
// transactions) so sees every record that id committed, whatever other
// producers leave open on the topic meanwhile, where ReadToEnd stops below
// the first transaction still open.
//
// When ctx ends while a partition's last stable offset is still below its
// end offset, the error is a *HeldError (wrapping ErrHeld and ctx's error)
// naming the partition, both offsets and, when the broker tells
// (DescribeProducers, ListTransactions), the transactions open on it.
// opts are as for ReadToEnd.
func ReadStable(ctx context.Context, topic string, opts []kgo.Opt, each func(*kgo.Record)) (partitions int, err error) {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return 0, fmt.Errorf("creating kafka client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := listOffsets(ctx, adm.ListEndOffsets, topic)
	if err != nil {
		return 0, err
	}
	var stable map[int32]int64
	for attempt := 0; ; attempt++ {
		lso, err := listOffsets(ctx, adm.ListCommittedOffsets, topic)
		if err == nil {
			stable = lso
		} else if ctx.Err() == nil {
			return 0, err
		}
		held := int32(-1)
		for p, end := range ends {
			if s, ok := stable[p]; (!ok || s < end) && (held < 0 || p < held) {
				held = p
			}
		}
		if held < 0 {
			break
		}
		wait := min(20*time.Millisecond<<min(attempt, 6), time.Second)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			s, ok := stable[held]
			if !ok {
				s = -1
			}
			if errors.Is(ctx.Err(), context.Canceled) {
				// Stopping: no time for the broker's description.
				return 0, &HeldError{Topic: topic, Partition: held, Stable: s, End: ends[held], Err: ctx.Err()}
			}
			return 0, heldError(context.WithoutCancel(ctx), adm, topic, held, s, ends[held], ctx.Err())
		}
	}
	return read(ctx, adm, topic, opts, ends, each)
}

// read calls each with every committed record of topic from each
// partition's start to its offset in ends.
func read(ctx context.Context, adm *kadm.Client, topic string, opts []kgo.Opt, ends map[int32]int64, each func(*kgo.Record)) (partitions int, err error) {
	starts, err := listOffsets(ctx, adm.ListStartOffsets, topic)
	if err != nil {
		return 0, err
	}
	todo := map[int32]int64{} // partition → end offset still to reach
	from := map[int32]kgo.Offset{}
	for p, end := range ends {
		if start := starts[p]; start < end {
			todo[p], from[p] = end, kgo.NewOffset().At(start)
		}
	}
	if len(todo) == 0 {
		return len(ends), nil
	}
	cl, err := kgo.NewClient(append(slices.Clone(opts),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return 0, fmt.Errorf("creating kafka consumer: %w", err)
	}
	defer cl.Close()
	for len(todo) > 0 {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("reading topic %q: %w (%d partition(s) not read to their end)", topic, err, len(todo))
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			ferr = errors.Join(ferr, fmt.Errorf("%s[%d]: %w", t, p, err))
		})
		if ferr != nil {
			return 0, fmt.Errorf("reading topic %q: %w", topic, ferr)
		}
		// A record at or past end-1 ends a partition, a transaction
		// marker too: a partition whose last record below end is of an
		// aborted transaction ends at that transaction's marker, above.
		fetches.EachRecord(func(r *kgo.Record) {
			if end, ok := todo[r.Partition]; ok && r.Offset+1 >= end {
				delete(todo, r.Partition)
			}
			if !r.Attrs.IsControl() {
				each(r)
			}
		})
	}
	return len(ends), nil
}

// HeldError is ReadStable's error when a transaction still open holds a
// partition's last stable offset below the end offset the read must
// reach.
type HeldError struct {
	Topic     string
	Partition int32
	// Stable is the partition's last stable offset (-1 if it could not
	// be listed), End the offset the read must reach.
	Stable, End int64
	// Open are the transactions open on the partition that began below
	// End, oldest first, as the broker describes them; nil when it did
	// not (DescribeProducers refused or unsupported) or was not asked
	// (ctx cancelled).
	Open []OpenTransaction
	// Err is why the wait ended: ctx's error.
	Err error
}

// OpenTransaction is a transaction open on a partition.
type OpenTransaction struct {
	ProducerID    int64
	ProducerEpoch int16
	// TransactionalID is the producer's transactional id; "" when the
	// broker did not tell (ListTransactions needs DESCRIBE on it).
	TransactionalID string
	// StartOffset is its first offset on the partition.
	StartOffset int64
	// LastWrite is when it last wrote to the partition (kfake: when it
	// began).
	LastWrite time.Time
}

func (e *HeldError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "topic %q partition %d: the last stable offset %d is held below the end offset %d to read to", e.Topic, e.Partition, e.Stable, e.End)
	for i, o := range e.Open {
		if i == 0 {
			b.WriteString(" by the open transaction of ")
		} else {
			b.WriteString(" and of ")
		}
		fmt.Fprintf(&b, "producer id %d (epoch %d", o.ProducerID, o.ProducerEpoch)
		if o.TransactionalID != "" {
			fmt.Fprintf(&b, ", transactional id %q", o.TransactionalID)
		}
		fmt.Fprintf(&b, ") from offset %d", o.StartOffset)
		if !o.LastWrite.IsZero() {
			fmt.Fprintf(&b, ", last written at %s", o.LastWrite.UTC().Format(time.RFC3339))
		}
	}
	switch {
	case e.Open == nil:
		b.WriteString(" by an open transaction (its producer not described)")
	case len(e.Open) == 0:
		b.WriteString(" (the broker describes no transaction open on it below that offset any more)")
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

func (e *HeldError) Unwrap() []error { return []error{ErrHeld, e.Err} }

// heldError describes, as well as the broker tells, the transactions
// holding partition's last stable offset below end. ctx must not be done:
// each request is given 5s.
func heldError(ctx context.Context, adm *kadm.Client, topic string, partition int32, stable, end int64, cause error) *HeldError {
	e := &HeldError{Topic: topic, Partition: partition, Stable: stable, End: end, Err: cause}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	described, err := adm.DescribeProducers(dctx, kadm.TopicsSet{topic: {partition: struct{}{}}})
	if err != nil {
		return e
	}
	var ids []int64
	described.EachPartition(func(p kadm.DescribedProducersPartition) {
		if p.Partition != partition || p.Err != nil {
			return
		}
		e.Open = []OpenTransaction{}
		for _, d := range p.ActiveProducers {
			if d.CurrentTxnStartOffset < 0 || d.CurrentTxnStartOffset >= end {
				continue // not in a transaction here, or one that began after end
			}
			o := OpenTransaction{ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch, StartOffset: d.CurrentTxnStartOffset}
			if d.LastTimestamp > 0 {
				o.LastWrite = time.UnixMilli(d.LastTimestamp)
			}
			e.Open = append(e.Open, o)
			ids = append(ids, d.ProducerID)
		}
	})
	slices.SortFunc(e.Open, func(a, b OpenTransaction) int { return cmp.Compare(a.StartOffset, b.StartOffset) })
	if len(ids) == 0 {
		return e
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	listed, err := adm.ListTransactions(lctx, ids, nil)
	if err != nil && len(listed) == 0 {
		return e
	}
	for _, l := range listed {
		for i := range e.Open {
			if e.Open[i].ProducerID == l.ProducerID {
				e.Open[i].TransactionalID = l.TxnID
			}
		}
	}
	return e
}

// listOffsets returns the topic's offsets by partition from list (kadm's
// ListStartOffsets or ListCommittedOffsets).
func listOffsets(ctx context.Context, list func(context.Context, ...string) (kadm.ListedOffsets, error), topic string) (map[int32]int64, error) {
	listed, err := list(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) || (err == nil && len(listed[topic]) == 0) {
		return nil, fmt.Errorf("%w: %q", ErrNoTopic, topic)
	}
	if err != nil {
		return nil, fmt.Errorf("listing the offsets of topic %q: %w", topic, err)
	}
	out := map[int32]int64{}
	for p, o := range listed[topic] {
		out[p] = o.Offset
	}
	return out, nil
}
