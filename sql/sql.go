// Package sqlfiles embeds the SQL in this directory so that `walrelay
// setup` applies exactly the files a DBA can read and run by hand.
package sqlfiles

import _ "embed"

// OutboxTable is 001_outbox_table.sql: CREATE TABLE IF NOT EXISTS
// public.outbox (...). Setup substitutes the configured table name.
//
//go:embed 001_outbox_table.sql
var OutboxTable string

// CreateOutboxTable is the statement's head in OutboxTable; setup puts the
// configured table's name in place of public.outbox there (and only there:
// comments mention the name too).
const CreateOutboxTable = "CREATE TABLE IF NOT EXISTS public.outbox ("

// PartitionedOutboxTable is outbox_partitioned.sql: the outbox table of
// 001_outbox_table.sql partitioned by range of created_at. Setup (through
// internal/partition) substitutes the configured table name in
// CreateOutboxTable, as for OutboxTable.
//
//go:embed outbox_partitioned.sql
var PartitionedOutboxTable string

// PartitionedOutboxColumn is the partition key of PartitionedOutboxTable.
const PartitionedOutboxColumn = "created_at"

// ExampleTransactions is example_transactions.sql: an orders table and the
// two ways an application writes events (used by `make demo`, cmd/walrelay-demo).
//
//go:embed example_transactions.sql
var ExampleTransactions string

// SlotPositions is 005_slot_positions.sql: CREATE TABLE IF NOT EXISTS
// public.walrelay_slot_positions (...), walrelay's record of each slot.
// internal/slotrecord substitutes the outbox's schema in CreateSlotPositions.
//
//go:embed 005_slot_positions.sql
var SlotPositions string

// CreateSlotPositions is the statement's head in SlotPositions.
const CreateSlotPositions = "CREATE TABLE IF NOT EXISTS public.walrelay_slot_positions ("

// DefaultTable is the outbox table the SQL files name.
const DefaultTable = "public.outbox"
