// Package reconcile is walrelay verify: it compares the outbox rows of a
// time window with the records on their routed topics and reports the
// events that are in the table and not on their topic (missing), on a
// topic and not in the table (unknown), and on a topic more than once
// (duplicates), and, when asked, publishes the missing ones again.
//
// In: walrelay's config (the outbox tables, outbox.time_column, the router
// and converters, the brokers) and a window [Since, Until) of the time
// column. Out: a [Report]; with Options.Republish, the missing rows
// produced again through the same router and converters as the relay,
// with header walrelay.republished: true and the row's time column as
// record timestamp.
//
// Why: a relay that reads the WAL cannot lose a committed row without a bug
// or an operator's mistake (a slot dropped or advanced, a topic deleted or
// truncated by retention, records deleted), and the outbox pattern's last
// safety net is a periodic job that checks what should be on the broker is
// there. It is safe against production: it writes no table (its fence,
// below, takes an xid, whose commit is one WAL record); the outbox is read
// in one read-only REPEATABLE READ transaction, in FETCH pages of a
// cursor, each statement under a statement_timeout; topics are read
// partition by partition without a consumer group (nothing is committed),
// with read_committed isolation.
//
// Only confirmed rows can be missing: before reading, verify takes a
// txfence.Fence and waits up to Options.Wait for postgres.slot to confirm
// it; Postgres then tests each row's xmin against the fence. A row not on
// its topic whose transaction the fence covers is missing (Kafka
// acknowledged it before the topics were read); one it does not cover is
// unconfirmed (the relay may not have published it yet; never
// republished). When the slot does not confirm the fence in time, no row
// is covered, so none is missing, and the report and the log say why.
//
// A lost slot (wal_status lost), or a missing one that walrelay's record
// (internal/slotrecord) says it confirmed through, is exactly when verify is
// needed: nothing streams from it, so nothing is in flight, and the
// fence counts as confirmed: every row committed before it and not on its
// topic is missing. A slot that was replaced or moved past the record is
// verified as usual (the relay streaming from the new slot confirms the
// fence; the rows the old one never delivered are missing), and the
// report says what the record found (Report.SlotState).
//
// How the sets are matched, with bounded memory: rows are never held.
// A first pass over the window's rows counts them and routes each (the
// router is the relay's, so the topics are the relay's); then each
// routed topic's partitions are read from the first offset whose
// timestamp is at or after Since - Margin (ListOffsets by timestamp) to
// their last stable offset, and every record whose timestamp is within
// [Since - Margin, Until + Margin] is held as 32 bytes: its event id's 16
// bytes (a UUID's, or a hash of any other id, whose text is kept aside)
// and its timestamp. The held records are sorted, and a second pass over
// the rows looks each row's id up. When the records would be more than
// Options.MaxIDs, the ids are split by hash into passes, each reading the
// topics and the rows again and holding only its share: memory is bounded
// by MaxIDs, not by the window. The reports' id lists are what is held
// besides.
//
// Topics are read to their end, not only to the offset of Until + Margin,
// because a republished record carries its row's old timestamp and lands
// at the end of its partition: an end found by timestamp would miss it and
// the next verify would report it missing again.
//
// Dead letters: relay.dead_letter_topic is read too, from Since - Margin
// to its end. A row of the window with no record on its topic (or that
// the router refuses) whose event id has a dead letter is dead-lettered,
// with the dead letter's error class: not missing, never republished (the
// relay did not publish it by design; the dead letter holds the row). A
// row the relay skipped under relay.on_error ... = log is on no topic and
// in no dead letter: when the router refuses it, verify knows it
// (unroutable); when its record is over kafka.batch_max_bytes, the relay's
// own check, verify repeats it (skipped, record_too_large); when the
// broker refused it (a topic's lower max.message.bytes, topic_rejected)
// verify cannot tell it from a missing row, and the report says so
// (Report.SkippedByLogClasses).
//
// Several tables (postgres.table lists them): each is read with its own
// plan (router.Bind of its own columns, as the relay binds each table's
// Relation message), pass 0 and every pass read every table in the one
// REPEATABLE READ transaction, topics are the union of their rows'
// topics, a missing row is republished through its own table's plan, and
// a record is unknown only when its id is in none of the tables.
//
// Records are matched by event id alone, each row counting one record of
// its id as its own. When rows share an id (two modules reusing ids, in
// two tables or in one) and its records are fewer than its rows, which row
// lost its record cannot be told: every row of the id is missing, and
// each is republished through its own table's plan (a duplicate of a row
// whose record was there, never a loss). Records as many as the rows: all
// seen; more: the id is a duplicate too. A row of a short id whose
// transaction the slot has not confirmed is unconfirmed, and when the
// confirmed rows are no more than the records, they are seen (the record
// may be theirs; a later verify counts again). Counting cannot notice one
// row's record lost while another's was published twice.
//
// What it does not do: commit consumer offsets.
package reconcile
