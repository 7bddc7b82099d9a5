package retention

import (
	"errors"

	"github.com/walrelay/walrelay/internal/slotrecord"
	"github.com/walrelay/walrelay/internal/txfence"
)

// Sentinel errors; each is wrapped with the details and the fix. The slot
// and fence ones are internal/txfence's (the same values, for errors.Is).
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
	// ErrNoRecord: there is no walrelay record of the slot
	// (walrelay_slot_positions is missing, or no walrelay of this version
	// ran on the slot yet), so nothing proves its position is one walrelay
	// confirmed. Nothing is pruned.
	ErrNoRecord = slotrecord.ErrNoRecord
	// ErrSlotJumped: the slot was replaced (recreated, failed over, lost)
	// or moved past the position walrelay recorded before confirming, and
	// no operator adopted it since (walrelay verify, then walrelay slot
	// adopt): rows after the record may never have been published.
	// Nothing is pruned until then.
	ErrSlotJumped = slotrecord.ErrJumped
	// ErrTable: the outbox table is missing, or partitioned in a way
	// retention cannot drop partitions of.
	ErrTable = errors.New("outbox table")
	// ErrNotPublished: postgres.table lists a table that none of
	// postgres.publications publishes. The relay never streams its rows,
	// so the slot's position proves none of them delivered: the table is
	// left alone (nothing removed) until it is published again.
	ErrNotPublished = errors.New("outbox table not published")
)
