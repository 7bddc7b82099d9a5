// Package inbox is the consumer side of the outbox pattern: it applies
// each event's business effect at most once although Kafka delivers it at
// least once, by recording the event id (the record's "id" header) in an
// inbox table in the same database transaction as the effect.
//
// In: Kafka records, a database (pgx), and a Handler that makes the
// business change in the transaction it is given. Out: the change, made
// once per event id; the records' offsets committed to the consumer group
// only after their transactions committed.
//
// Process is the core: BEGIN; INSERT INTO inbox (id, ...) ON CONFLICT DO
// NOTHING; when the row was inserted, the Handler; COMMIT. A Handler error
// rolls the inbox row back with the change, so the event is processed
// again later. Two consumers holding the same event at once (a rebalance)
// serialize on the id's primary key: the second waits for the first's
// transaction and then sees the id.
//
// Consume is a loop around it for a consumer group: read_committed, no
// automatic offset commits, each batch's offsets committed after its
// records were processed. Offsets committed late (a crash between the
// database commit and the offset commit, a rebalance) only re-deliver
// records the inbox then skips.
//
// The inbox table grows by one row per event (about 200 bytes with its
// indexes); Prune removes ids older than the longest time an event can be
// delivered again (see docs/go-api.md, "Writing and consuming events from
// Go").
//
// It does not retry anything but a Handler's failure, commits no offset of
// a record not processed, and skips no record.
package inbox
