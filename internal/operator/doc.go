// Package operator is the logic behind walrelay's operator subcommands
// that only cmd/walrelay runs: the preflight (`walrelay check`, and the
// items `walrelay run` refuses to start on, CheckRun), peeking at a slot's
// pending events (`walrelay slot peek`), planning and making an advance
// (`walrelay slot advance`, `debezium takeover`), dropping a slot
// (`walrelay slot drop`), and CheckFiles (`walrelay config`).
//
// In: a normal (not replication) *pgx.Conn from postgres.Connect, the
// names from config.Config and a *router.Router. Out: plain structs with
// stable JSON field names (Event, PeekResult, AdvancePlan, Item) and
// errors that say, on one line, what is wrong and how to fix it; the
// sentinels in errors.go and internal/postgres's classify them.
//
// Slot, publication and table names are validated and passed as query
// parameters or quoted with pgx.Identifier; nothing user-supplied is
// spliced into SQL. Errors never carry a DSN password.
//
// Peeking uses pg_logical_slot_peek_binary_changes with pgoutput
// proto_version 1 and the relay's publications, so it never consumes
// anything; Postgres refuses to peek a slot that a walsender holds. The
// only writes are DropSlot (which terminates a holder only when forced)
// and Advance (pg_replication_slot_advance), which refuses to move a slot
// backwards, past the server's WAL end, or while it is in use.
//
// The preflight's Kafka side changes nothing either: Metadata, ApiVersions,
// FindCoordinator, DescribeConfigs, CreateTopics with ValidateOnly, and in
// exactly-once mode an AddPartitionsToTxn for a producer that does not
// exist, which the broker refuses after checking permissions. It never
// sends InitProducerId with the relay's transactional id, which would
// fence a running relay.
//
// It does not print, prompt or decide exit codes: cmd/walrelay does. No
// package under internal/ imports it (cmd/walrelay's TestLayering): what
// the daemon needs of Postgres is in internal/postgres.
package operator
