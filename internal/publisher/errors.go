package publisher

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Errors passed to Config.Done. Each is a verdict on one record; test with
// errors.Is. Any other error passed to Done is one the publisher could not
// attribute to the record alone (the caller should stop, not skip it).
var (
	// ErrRecordTooLarge: the record does not fit in a batch of its own
	// under the topic's limit (kafka.batch_max_bytes, or the topic's
	// max.message.bytes when that is lower), checked before producing, or
	// the broker answered MESSAGE_TOO_LARGE to the record sent alone. It
	// is never returned for a batch the broker refused as a whole.
	ErrRecordTooLarge = errors.New("record too large for the topic")
	// ErrTopicRejected: the broker refuses the topic: a missing ACL, a
	// policy, an invalid name, a topic that does not exist with creation
	// off or refused. The message says which.
	ErrTopicRejected = errors.New("kafka refuses the topic")
	// ErrPartitionOutOfRange: the record carries its own partition
	// (SetPartition) and the topic has no such partition.
	ErrPartitionOutOfRange = errors.New("partition out of range")
	// ErrRecordRejected: the broker refused the record sent alone for
	// what it holds (INVALID_TIMESTAMP, INVALID_RECORD, CORRUPT_MESSAGE);
	// the kerr error is wrapped too.
	ErrRecordRejected = errors.New("kafka refuses the record")
	// ErrClosed: the publisher was closed before the record was
	// acknowledged; it may or may not have reached the broker. It wraps
	// kgo.ErrClientClosed.
	ErrClosed = errors.New("kafka client closed")
)

// topicError wraps a topic refusal: ErrTopicRejected and the cause.
func topicError(topic, why string, cause error) error {
	if cause == nil {
		return fmt.Errorf("%w %q: %s", ErrTopicRejected, topic, why)
	}
	return fmt.Errorf("%w %q: %s: %w", ErrTopicRejected, topic, why, cause)
}

// batchRefusal reports whether err is an answer the broker gives about a
// whole record batch: when a batch of several records gets it, it says
// nothing about any one of them. franz-go fails every record buffered for
// the partition with it.
func batchRefusal(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge) ||
		errors.Is(err, kerr.InvalidTimestamp) || errors.Is(err, kerr.InvalidRecord) ||
		errors.Is(err, kerr.CorruptMessage)
}

// topicRefusal reports whether a produce error is the broker refusing the
// topic itself (the same for every record).
func topicRefusal(err error) bool {
	return errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.PolicyViolation) ||
		errors.Is(err, kerr.InvalidTopicException) || errors.Is(err, kerr.UnknownTopicOrPartition)
}
