package retention

import (
	"errors"

	"github.com/walrelay/walrelay/pkg/txfence"
)

// Sentinel errors; each is wrapped with the details and the fix. The slot
// and fence ones are pkg/txfence's (the same values, for errors.Is).
var (
	// ErrSlotMissing: postgres.slot does not exist, so nothing says which
	// transactions Kafka acknowledged. Nothing is pruned.
	ErrSlotMissing = txfence.ErrSlotMissing
	// ErrSlotUnusable: the slot is not a pgoutput slot of the outbox's
	// database, so its position says nothing about the outbox's rows.
	ErrSlotUnusable = txfence.ErrSlotUnusable
	// ErrSlotInvalidated: Postgres invalidated the slot (wal_status lost):
	// what it did not confirm can no longer be relayed, and its
	// confirmed_flush_lsn is no proof for what comes after it.
	ErrSlotInvalidated = txfence.ErrSlotInvalidated
	// ErrNotConfirmed: the slot did not confirm the fence within the
	// wait: the relay is down, stalled or behind.
	ErrNotConfirmed = txfence.ErrNotConfirmed
	// ErrTable: the outbox table is missing, or partitioned in a way
	// retention cannot drop partitions of.
	ErrTable = errors.New("outbox table")
)
