// Package publisher produces walrelay's records to Kafka with franz-go and
// turns every broker answer into a verdict on one record.
//
// In: records (topic, key, value, headers, timestamp, optional partition).
// Out: Config.Done, called exactly once per record with nil once the broker
// has durably acknowledged it (acks=all), or with an error about that record
// alone (errors.go): the publisher never passes on an answer about a batch
// as if it were about each record in it.
//
// The producer is idempotent (franz-go's default) with acks=all, so retries
// neither duplicate nor reorder records within a partition. Keys are
// partitioned with Kafka's default murmur2 hash, exactly as the Java client
// and Kafka Connect do, so an aggregate lands on the same partition Debezium
// put it on and per-aggregate order holds. Records that carry an explicit
// partition (Debezium's "partition" placement) go to that partition.
// Retriable broker errors (leader moves, broker down, timeouts) are retried
// by franz-go without limit: a record either arrives or gets a verdict; it
// is never dropped.
//
// # Topics
//
// The first record for a topic starts its preparation on a goroutine of
// the publisher, so the caller never waits on an admin request: the topic's
// metadata says whether it exists (a principal without CREATE producing to
// existing topics is the normal production setup, so a refused creation of
// a topic that exists is no error); a missing one is created with kadm
// when CreateTopics is on; and DescribeConfigs gives its max.message.bytes.
// Transient errors (NOT_CONTROLLER, timeouts, lost connections) are retried
// with backoff, logged and counted, never passed on. Records for a topic
// wait, in order, until it is ready; a topic Kafka refuses (a missing ACL,
// a policy, creation off) fails them with ErrTopicRejected, saying which.
//
// # Batches
//
// A batch the broker refuses as a whole (MESSAGE_TOO_LARGE when a topic's
// max.message.bytes is below kafka.batch_max_bytes, INVALID_TIMESTAMP,
// INVALID_RECORD) is no verdict on its records, yet franz-go fails every
// record buffered for the partition with it. Two things keep valid records
// flowing:
//
//   - Batches for a topic are limited to its max.message.bytes when
//     DescribeConfigs tells it (franz-go's ProducerBatchMaxBytesFn), and a
//     record that does not fit a batch of its own under that limit is
//     refused with ErrRecordTooLarge before it is produced. A principal
//     refused DescribeConfigs is not an error: batches then use
//     BatchMaxBytes.
//   - If the broker still refuses a batch, its records are not passed on:
//     new records for the topic are held back, the records franz-go still
//     holds for it are let finish, and the refused ones are sent again one
//     at a time, in the order they were produced, each alone, so the
//     broker's answer is about that record. Then the held-back records
//     follow. When batches were refused as too large and some of their
//     records went through alone, the topic's real limit is below what
//     walrelay knows: it stays one record at a time for the rest of the
//     process (counted by Stats.OneAtATimeTopics and logged with the
//     fix). Otherwise it goes back to batches.
//
// A record produced to the same partition in the instant between the
// broker's refusal and franz-go reporting it can reach the broker before
// the retried ones: that is logged with its key and counted
// (Stats.OrderAtRisk), since per-key order may then be broken.
//
// How the client reaches the brokers (seed brokers, TLS, SASL, franz-go's
// log and metric hooks) comes in Config.Client, built from config.Kafka by
// internal/kafkaconf; CheckAccess tells authentication and certificate
// failures, which retrying cannot fix, from a broker that is down.
//
// Data loss franz-go detects (the broker lost records it had acknowledged)
// is logged through the injected logger and counted (Stats.DataLoss).
//
// The caller's own records and topics (own.go: exactly-once delivery's
// fence record and checkpoint, produced in its Kafka transactions, and its
// checkpoint topic) go straight to franz-go, without Config.Done: the
// caller waits for their outcome (ProduceSync, ProduceAwait, CreateTopic).
// With BeginTransaction and EndTransaction, they are all a transactional
// caller needs: nothing reaches Kafka around the publisher.
//
// It does not route, track LSNs or decide what to do with a refused record.
package publisher
