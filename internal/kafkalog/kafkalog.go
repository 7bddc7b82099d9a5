// Package kafkalog reads a topic used as a log of state (Kafka Connect's
// offsets topic, walrelay's checkpoint topic) to its end, as Connect's
// KafkaBasedLog.readToEnd does: every partition from its start to the end
// offset listed when the read began, with read_committed isolation, so
// records of transactions still open or aborted are never seen.
//
// In: seed options for a franz-go client and a topic. Out: each committed
// record, in offset order per partition. It keeps nothing: what a record
// means is the caller's.
package kafkalog

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrNoTopic is returned (wrapped) when the topic does not exist.
var ErrNoTopic = errors.New("topic does not exist")

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
	starts, err := listOffsets(ctx, kadm.NewClient(adm).ListStartOffsets, topic)
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
