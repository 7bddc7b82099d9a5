package slotrecord

import "errors"

// Sentinel errors; each is wrapped with the slot, the positions and the
// command that fixes it.
var (
	// ErrNoRecord: there is no record of the slot (the table is missing,
	// or no walrelay of this version has run on the slot yet), so nothing
	// proves its confirmed_flush_lsn is one walrelay confirmed.
	ErrNoRecord = errors.New("no walrelay record of the replication slot")
	// ErrJumped: the slot was replaced (recreated, failed over) or moved
	// past the position walrelay recorded before confirming, by someone
	// else, and no operator has adopted it since (walrelay slot adopt):
	// the rows committed between the record and the slot's position may
	// never have been published.
	ErrJumped = errors.New("replication slot was replaced or moved past walrelay's record")
	// ErrRecorded: a slot of this name is missing (or lost) and walrelay
	// confirmed through it before: creating it again would silently skip
	// every row committed after the record and not published.
	ErrRecorded = errors.New("walrelay confirmed through a slot of this name before")
)
