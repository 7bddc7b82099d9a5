// Package partition is the one place that knows how walrelay cuts a
// partitioned outbox: a table partitioned by range of outbox.time_column
// (a timestamptz), one partition per outbox.partition_interval (whole
// hours, aligned to the Unix epoch in UTC, so 24h partitions run from UTC
// midnight to UTC midnight), named <table>_p<YYYYMMDD> when the interval
// is whole days and <table>_p<YYYYMMDD>T<HH> otherwise, each FOR VALUES
// FROM (start) TO (start + interval) with both bounds written as UTC
// timestamptz literals.
//
// In: a *pgx.Conn, the outbox's name in postgres.table's form
// ("schema.table" or "table"), the time column, the interval and how many
// partitions to keep ahead. Out: the root's DDL (sql/outbox_partitioned.sql),
// the partitions it created (EnsureAhead), the partitions that exist with
// their bounds read back from the catalog (List), how a table is
// partitioned (Inspect), and a Maintainer that `walrelay run` starts to
// keep partitions created ahead, for every table of postgres.table that is
// partitioned by range of the time column.
//
// Why here: `walrelay setup` creates the partitions, `walrelay run` keeps
// creating them, `walrelay check` counts them and retention drops them;
// they must all agree on names and bounds, and a partition that is missing
// when its time comes makes the application's INSERTs fail ("no partition
// of relation ... found for row").
//
// Creating a partition (CREATE TABLE ... PARTITION OF) takes an ACCESS
// EXCLUSIVE lock on the root, so inserts into the outbox queue behind a
// creation that waits for the lock; the Maintainer's session gives up
// waiting after LockTimeout and tries again at its next round. It does not
// drop, detach or prune anything: retention does, using List.
//
// Identifiers are quoted with pgx.Identifier; the bounds are timestamps
// walrelay formats itself (DDL takes no parameters).
package partition
