package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/slotrecord"
)

// CreateRecordedSlot is `walrelay slot create`: CreateSlot, then the
// slot's creation in walrelay's record of its slots (internal/slotrecord). A
// slot of this name that walrelay confirmed through before (a record
// exists) is created only with replace, and then the record is marked
// replaced: retention stays stopped until walrelay verify and walrelay
// slot adopt. Without replace the error wraps slotrecord.ErrRecorded and
// says what to run. With replace, a slot that exists and was found past
// the record (jumped) is not created: its gap is accepted
// (slotrecord.AcceptJump), so that walrelay run relays on from it. With
// failover a new slot is a failover slot (decide with SlotFailover
// before).
func CreateRecordedSlot(ctx context.Context, conn *pgx.Conn, records slotrecord.Table, name string, replace, failover bool) (Slot, slotrecord.State, error) {
	if err := ValidateSlotName(name); err != nil {
		return Slot{}, slotrecord.State{}, err
	}
	// A role that may not create slots at all is told so first.
	replication, _, _, _, err := CanReplicate(ctx, conn)
	if err != nil {
		return Slot{}, slotrecord.State{}, QueryError("reading the role's attributes", "", err)
	}
	if !replication {
		return Slot{}, slotrecord.State{}, fmt.Errorf("%w: creating replication slot %q: %s", ErrPrivilege, name, PrivilegeFix(ctx, conn))
	}
	if _, err := records.Ensure(ctx, conn); err != nil {
		return Slot{}, slotrecord.State{}, err
	}
	st, err := slotrecord.Read(ctx, conn, records, name)
	if err != nil {
		return Slot{}, st, err
	}
	if err := recreating(st, name, replace); err != nil {
		return Slot{}, st, err
	}
	if replace && st.Record != nil && st.SlotExists && !st.SlotLost && (st.Record.JumpedAt != nil || st.Jumped() != "") {
		// --accept-gap on a slot past the record: accept its position.
		st, err = slotrecord.AcceptJump(ctx, conn, records, name)
		if err != nil {
			return Slot{}, st, err
		}
		s, err := InspectSlot(ctx, conn, name)
		return s, st, err
	}
	s, err := CreateSlot(ctx, conn, name, failover)
	if err != nil {
		return Slot{}, st, err
	}
	return recordNewSlot(ctx, conn, conn, records, st, s, "")
}

// recordNewSlot records slot s, just created on slotConn, in records on
// recordConn (the same connection, or the primary's when decoding from a
// standby), noting who created it and where; st is the record read
// before (a record there means the gap was accepted).
func recordNewSlot(ctx context.Context, recordConn, slotConn *pgx.Conn, records slotrecord.Table, st slotrecord.State, s Slot, where string) (Slot, slotrecord.State, error) {
	lsn, err := pglogrepl.ParseLSN(s.ConfirmedFlushLSN)
	if err != nil {
		return s, st, fmt.Errorf("parsing confirmed_flush_lsn %q of new slot %q: %w", s.ConfirmedFlushLSN, s.Name, err)
	}
	who := "walrelay slot create"
	if st.Record != nil {
		who += " --accept-gap"
	}
	st, err = slotrecord.Created(ctx, recordConn, records, s.Name, lsn, who+where+" ("+CurrentUser(ctx, slotConn)+")")
	return s, st, err
}

// AdoptSlot is `walrelay slot adopt`: it makes the slot's current
// position walrelay's record again, clearing a jump (the slot was
// replaced or moved past the record), once an operator has checked with
// walrelay verify that nothing is missing. who is noted with the time.
func AdoptSlot(ctx context.Context, conn *pgx.Conn, records slotrecord.Table, name, who string) (before, after slotrecord.State, err error) {
	if err := ValidateSlotName(name); err != nil {
		return before, after, err
	}
	if _, err := records.Ensure(ctx, conn); err != nil {
		return before, after, err
	}
	if who == "" {
		who = CurrentUser(ctx, conn)
	}
	return slotrecord.Adopt(ctx, conn, records, name, who)
}

// recreating refuses to create slot name again when walrelay confirmed
// through a slot of that name (a record of it exists) and replace is off.
func recreating(st slotrecord.State, name string, replace bool) error {
	if st.Record != nil && !st.SlotExists && !replace {
		return fmt.Errorf("%w: walrelay had confirmed through slot %q up to %s (recorded %s): rows committed after that may never have been published, and a new slot starts after them. Heal it from the outbox instead (`walrelay slot heal`, or outbox.on_slot_loss: heal), or, to create it anyway and accept the gap (retention stays stopped until you adopt it), run `walrelay slot create %s --accept-gap`, start walrelay run, then `walrelay verify --since %s --republish` and `walrelay slot adopt %s`",
			slotrecord.ErrRecorded, name, st.Record.Confirmed, st.Record.UpdatedAt.UTC().Format(time.RFC3339), name, st.Record.UpdatedAt.Add(-time.Hour).UTC().Format(time.RFC3339), name)
	}
	return nil
}
