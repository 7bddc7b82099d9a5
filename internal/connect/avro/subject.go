package avro

import (
	"fmt"
	"strings"
)

// SubjectStrategy names the registry subject a key or value schema goes
// under, as the serializer's key.subject.name.strategy and
// value.subject.name.strategy do.
type SubjectStrategy uint8

// Subject name strategies (schema-serializer
// io/confluent/kafka/serializers/subject/*.java).
const (
	// TopicNameStrategy: <topic>-key or <topic>-value. It is also what
	// walrelay does when the option is unset: Confluent's newer default,
	// AssociatedNameStrategy, falls back to it on a registry without
	// associations.
	TopicNameStrategy SubjectStrategy = iota + 1
	// RecordNameStrategy: the record's full name; record schemas only.
	RecordNameStrategy
	// TopicRecordNameStrategy: <topic>-<record full name>; record schemas
	// only.
	TopicRecordNameStrategy
)

var strategyNames = [...]string{
	TopicNameStrategy:       "TopicNameStrategy",
	RecordNameStrategy:      "RecordNameStrategy",
	TopicRecordNameStrategy: "TopicRecordNameStrategy",
}

// strategyPackage is where Confluent's strategy classes live.
const strategyPackage = "io.confluent.kafka.serializers.subject."

// ParseSubjectStrategy parses a strategy given by its class name, short or
// fully qualified; "" is TopicNameStrategy.
func ParseSubjectStrategy(name string) (SubjectStrategy, error) {
	n := strings.TrimPrefix(strings.TrimSpace(name), strategyPackage)
	if n == "" {
		return TopicNameStrategy, nil
	}
	for i, s := range strategyNames {
		if s != "" && s == n {
			return SubjectStrategy(i), nil
		}
	}
	return 0, fmt.Errorf("subject name strategy %q: want TopicNameStrategy, RecordNameStrategy or TopicRecordNameStrategy (as %s class names or short)", name, strategyPackage)
}

// String returns the strategy's short class name.
func (st SubjectStrategy) String() string {
	if st > 0 && int(st) < len(strategyNames) {
		return strategyNames[st]
	}
	return fmt.Sprintf("SubjectStrategy(%d)", uint8(st))
}

// Subject returns the subject s goes under for a record of topic. A record
// strategy with a schema that is not a record is an error, as in
// RecordNameStrategy.getRecordName ("the message value must only be a
// record schema").
func (st SubjectStrategy) Subject(topic string, isKey bool, s *Schema) (string, error) {
	switch st {
	case TopicNameStrategy:
		if isKey {
			return topic + "-key", nil
		}
		return topic + "-value", nil
	case RecordNameStrategy, TopicRecordNameStrategy:
		name, ok := s.FullName()
		if !ok {
			side := "value"
			if isKey {
				side = "key"
			}
			return "", fmt.Errorf("%s: the %s schema is not a record, so it has no record name", st, side)
		}
		if st == RecordNameStrategy {
			return name, nil
		}
		return topic + "-" + name, nil
	}
	return "", fmt.Errorf("subject for topic %q: %s is not a strategy", topic, st)
}
