package reconcile

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/slotrecord"
	"github.com/walrelay/walrelay/internal/txfence"
)

// fence takes a fence on conn and waits up to Options.Wait for
// postgres.slot to confirm it, noting both in the report. A fence the slot
// does not confirm in time is no error: the report says why, and every
// row not found on its topic is unconfirmed. A slot that is missing, not
// walrelay's, of another database or invalidated is an error.
func (v *verifier) fence(ctx context.Context, conn *pgx.Conn) (txfence.Fence, error) {
	slot := v.cfg.Postgres.Slot
	gone, err := v.slotState(ctx, conn)
	if err != nil {
		return txfence.Fence{}, err
	}
	f, err := txfence.TakeFence(ctx, conn)
	if err != nil {
		return txfence.Fence{}, err
	}
	v.rep.FenceLSN = f.LSN.String()
	if gone {
		// Nothing streams from a lost or missing slot: nothing is in
		// flight, so every row committed before the fence that is not on
		// its topic was never published.
		v.rep.FenceConfirmed = true
		v.log.Warn("verify: the slot is "+strings.TrimPrefix(v.rep.SlotState, "slot_")+", so nothing is in flight: every row before the fence not on its topic is missing",
			"slot", slot, "recorded_lsn", v.rep.RecordedLSN, "fence_lsn", f.LSN.String(), "problem", v.rep.SlotProblem)
		return f, nil
	}
	s, err := txfence.Wait(ctx, v.slots, slot, f, time.Now().Add(v.opts.Wait))
	switch {
	case err == nil:
		v.rep.FenceConfirmed = true
	case errors.Is(err, txfence.ErrNotConfirmed):
		v.rep.NotConfirmed = err.Error()
		v.log.Warn("verify: the slot did not confirm the fence in time, so no row can be called missing: rows not on their topics are reported unconfirmed",
			"waited", v.opts.Wait, "slot", slot, "confirmed_flush_lsn", s.Confirmed.String(), "fence_lsn", f.LSN.String(), "error", err)
	default:
		return txfence.Fence{}, err
	}
	v.rep.ConfirmedLSN = s.Confirmed.String()
	return f, nil
}

// slotState notes in the report what walrelay's record says of the slot
// (internal/slotrecord), and reports whether the slot is gone: lost, or
// missing while a record says walrelay confirmed through it. A slot
// missing without a record, not walrelay's, or of another database is
// an error, as is a record that cannot be read when the slot is lost.
func (v *verifier) slotState(ctx context.Context, conn *pgx.Conn) (gone bool, err error) {
	slot := v.cfg.Postgres.Slot
	records := slotrecord.Table{Schema: v.cfg.Postgres.RecordSchema()}
	if v.slots != conn {
		records.Slots = v.slots
	}
	st, rerr := slotrecord.Read(ctx, conn, records, slot)
	if rerr != nil {
		v.log.Warn("verify: cannot read walrelay's record of the slot; judging by the slot alone", "slot", slot, "err", rerr)
	}
	_, serr := txfence.ReadSlot(ctx, v.slots, slot)
	switch {
	case serr == nil:
	case errors.Is(serr, txfence.ErrSlotInvalidated):
		gone = true
	case errors.Is(serr, txfence.ErrSlotMissing) && rerr == nil && st.Record != nil:
		gone = true
	default:
		return false, serr
	}
	v.rep.SlotState = "ok"
	if rerr != nil {
		v.rep.SlotState, v.rep.SlotProblem = slotrecord.ReasonNoRecord, rerr.Error()
		if gone {
			v.rep.SlotState, v.rep.SlotProblem = slotrecord.ReasonSlotLost, serr.Error()
		}
		return gone, nil
	}
	if st.Record != nil {
		v.rep.RecordedLSN = st.Record.Confirmed.String()
	}
	if reason, err := st.Unproven(); err != nil {
		v.rep.SlotState, v.rep.SlotProblem = reason, err.Error()
	}
	if gone && st.Record == nil { // lost, no record
		v.rep.SlotState, v.rep.SlotProblem = slotrecord.ReasonSlotLost, serr.Error()
	}
	return gone, nil
}
