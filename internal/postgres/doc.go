// Package postgres is what walrelay does on a normal Postgres connection
// outside the stream, for the daemon (internal/relay, slotmon, retention,
// reconcile, setup) and the operator subcommands alike: it connects and
// explains why a connection failed, inspects, creates and lists
// replication slots (with walrelay's record of them, internal/slotrecord),
// makes a slot a failover slot, reads what decoding from a standby needs,
// recognises the managed service the server belongs to (for the fixes it
// names), reads what the exactly-once transactional id is derived from,
// and parses and compares LSNs.
//
// In: a DSN or a normal *pgx.Conn (Connect opens one through
// internal/pgsession, with the session settings that make values print as
// pgoutput prints them). Out: plain structs with stable JSON field names
// (Slot) and errors that say, on one line, what is wrong and how to fix
// it, never with a DSN password; the sentinels in errors.go classify them.
//
// Slot names are validated and passed as query parameters; nothing
// user-supplied is spliced into SQL. The only writes are CreateSlot,
// EnableFailover (ALTER_REPLICATION_SLOT, on a replication connection of
// its own) and the slot record's rows (CreateRecordedSlot, AdoptSlot).
//
// It does not route, produce, peek, advance or drop slots
// (internal/operator does the last three), and imports no walrelay package but internal/slotrecord and
// internal/pgsession (cmd/walrelay's TestLayering).
package postgres
