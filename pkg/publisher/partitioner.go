package publisher

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
)

// manualKey marks a record whose Partition field was set by the router
// (Debezium's "partition" placement). It is a context key, not a value, so
// marking a record costs no allocation.
type manualKey struct{}

// manual is the one context that marks records; it is immutable.
var manual = context.WithValue(context.Background(), manualKey{}, true)

// SetPartition directs r to partition, bypassing key hashing.
func SetPartition(r *kgo.Record, partition int32) {
	r.Partition = partition
	r.Context = manual
}

// partitioner is Kafka's default for keyed records (murmur2, masked, mod n:
// kgo.StickyKeyPartitioner with a nil hasher) except for records marked
// with SetPartition.
type partitioner struct{ base kgo.Partitioner }

func newPartitioner() kgo.Partitioner {
	return partitioner{base: kgo.StickyKeyPartitioner(nil)}
}

func (p partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	return &topicPartitioner{base: p.base.ForTopic(topic)}
}

type topicPartitioner struct{ base kgo.TopicPartitioner }

// RequiresConsistency is true for keyed and manually placed records: they
// must never be moved to another partition when theirs is unavailable,
// or per-aggregate order would break.
func (t *topicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return r.Context == manual || t.base.RequiresConsistency(r)
}

func (t *topicPartitioner) Partition(r *kgo.Record, n int) int {
	if r.Context == manual {
		return int(r.Partition)
	}
	return t.base.Partition(r, n)
}

// OnNewBatch keeps the sticky behaviour for unkeyed records.
func (t *topicPartitioner) OnNewBatch() {
	if nb, ok := t.base.(kgo.TopicPartitionerOnNewBatch); ok {
		nb.OnNewBatch()
	}
}
