package txfence

import "errors"

// Sentinel errors; each is wrapped with the details and the fix.
var (
	// ErrSlotMissing: postgres.slot does not exist, so nothing says which
	// transactions Kafka acknowledged.
	ErrSlotMissing = errors.New("replication slot not found")
	// ErrSlotUnusable: the slot is not a pgoutput slot of the outbox's
	// database, so its position says nothing about the outbox's rows.
	ErrSlotUnusable = errors.New("replication slot does not relay this database")
	// ErrSlotInvalidated: Postgres invalidated the slot (wal_status lost):
	// what it did not confirm can no longer be relayed, and its
	// confirmed_flush_lsn is no proof for what comes after it.
	ErrSlotInvalidated = errors.New("replication slot is invalidated")
	// ErrNotConfirmed: the slot did not confirm the fence within the
	// wait: the relay is down, stalled or behind.
	ErrNotConfirmed = errors.New("the slot has not confirmed the fence yet")
)
