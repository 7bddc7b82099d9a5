// Package txfence answers "which outbox rows' transactions has the
// replication slot confirmed?", i.e. which rows Kafka has acknowledged.
//
// In: a normal connection to the outbox's database and postgres.slot.
// Out: a [Fence] (TakeFence), the slot's state ([ReadSlot]) and whether it
// covers a fence ([SlotState.Covers], [Wait]), and the SQL predicate
// "this row's xmin precedes the fence" ([PrecedesSQL], with the
// parameters [Window] computes for a snapshot).
//
// Why: a row carries no commit LSN, so nothing in it says whether the
// relay has published it. A Fence is a snapshot's xmin X and the WAL
// insert position L read after that snapshot: every transaction with an
// xid below X had finished before the snapshot, so its commit record is
// before L; once the slot's confirmed_flush_lsn is at or past L, Kafka
// acknowledged every row whose xmin precedes X. The proof is in
// docs/DESIGN.md, "Retention" (the fence).
//
// Users: internal/retention deletes only rows (and drops only partitions) a
// confirmed fence covers; internal/reconcile (walrelay verify) calls missing
// only rows a confirmed fence covers.
//
// What it does not do: it writes no table. TakeFence runs one
// transaction that takes an xid, so its commit writes a WAL record; it
// does not read or relay the outbox.
package txfence
