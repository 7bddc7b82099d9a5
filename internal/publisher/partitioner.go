package publisher

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
)

// PartitionHint is implemented by a record's Context when the record may
// carry its own partition (Debezium's "partition" placement): when
// ManualPartition reports true, the record goes to r.Partition instead of
// the hash of its key.
type PartitionHint interface {
	ManualPartition() bool
}

// manualContext marks a record placed with SetPartition.
type manualContext struct{ context.Context }

func (manualContext) ManualPartition() bool { return true }

// SetPartition directs r to partition, bypassing key hashing. It replaces
// r.Context (with one that is never cancelled).
func SetPartition(r *kgo.Record, partition int32) {
	r.Partition = partition
	r.Context = manualContext{context.Background()}
}

// isManual reports whether r carries its own partition.
func isManual(r *kgo.Record) bool {
	h, ok := r.Context.(PartitionHint)
	return ok && h.ManualPartition()
}

// partitioner is Kafka's default for keyed records (murmur2, masked, mod n:
// kgo.StickyKeyPartitioner with a nil hasher) except for records marked
// with SetPartition. It tells the publisher the partition count it saw for
// them, so that a partition the topic lacks gets ErrPartitionOutOfRange.
type partitioner struct {
	base kgo.Partitioner
	pub  *Publisher // nil in tests of the partitioning alone
}

func newPartitioner(pub *Publisher) kgo.Partitioner {
	return partitioner{base: kgo.StickyKeyPartitioner(nil), pub: pub}
}

func (p partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	tp := &topicPartitioner{base: p.base.ForTopic(topic)}
	if p.pub != nil {
		tp.topic = p.pub.topic(topic)
	}
	return tp
}

type topicPartitioner struct {
	base  kgo.TopicPartitioner
	topic *topic // nil in tests of the partitioning alone
}

// RequiresConsistency is true for keyed and manually placed records: they
// must never be moved to another partition when theirs is unavailable,
// or per-aggregate order would break.
func (t *topicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return isManual(r) || t.base.RequiresConsistency(r)
}

// Partition returns a manual record's own partition even when the topic
// has no such partition: franz-go then fails the record, and the publisher
// reports ErrPartitionOutOfRange.
func (t *topicPartitioner) Partition(r *kgo.Record, n int) int {
	if isManual(r) {
		if t.topic != nil {
			t.topic.partitions.Store(int32(n))
		}
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
