package retention

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/slotrecord"
	"github.com/walrelay/walrelay/internal/txfence"
)

// confirmed returns the newest kept fence slot s confirmed, and forgets
// the fences before it and those of another WAL history.
func (p *Pruner) confirmed(s txfence.SlotState) (txfence.Fence, bool) {
	kept := p.fences[:0]
	for _, f := range p.fences {
		if f.Identity() == s.Identity {
			kept = append(kept, f)
		}
	}
	p.fences = kept
	best := -1
	for i, f := range p.fences {
		if s.Confirmed >= f.LSN {
			best = i
		}
	}
	if best < 0 {
		return txfence.Fence{}, false
	}
	f := p.fences[best]
	p.fences = append(p.fences[:0], p.fences[best:]...) // keep it: the next pass may have nothing newer
	return f, true
}

// fenceAndWait takes a fence and polls the slot until it confirms it or
// the deadline passes.
func (p *Pruner) fenceAndWait(ctx context.Context, conn *pgx.Conn, deadline time.Time) (txfence.Fence, txfence.SlotState, error) {
	f, err := txfence.TakeFence(ctx, conn)
	if err != nil {
		return txfence.Fence{}, txfence.SlotState{}, err
	}
	p.seq++
	f.Seq = p.seq
	sc, err := p.slotConn(ctx, conn)
	if err != nil {
		return f, txfence.SlotState{}, err
	}
	slot, err := txfence.Wait(ctx, sc, p.cfg.Slot, f, deadline)
	if err != nil {
		return f, slot, err
	}
	// Covered by the slot: the slot's position must still be walrelay's.
	if slot, err = p.readSlot(ctx, conn); err != nil {
		return f, slot, err
	}
	if !slot.Covers(f) {
		return f, slot, txfence.NotConfirmed(p.cfg.Slot, slot, f)
	}
	return f, slot, nil
}

// readSlot reads the slot and proves its position with walrelay's record
// of it (internal/slotrecord): the position retention removes by is the
// slot's confirmed_flush_lsn only while it is at or before the position
// the relay recorded before confirming it, on this system, with no jump
// found since the last walrelay slot adopt. Anything else refuses, with
// the reason in walrelay_retention_blocked.
func (p *Pruner) readSlot(ctx context.Context, conn *pgx.Conn) (txfence.SlotState, error) {
	sc, err := p.slotConn(ctx, conn)
	if err != nil {
		return txfence.SlotState{}, err
	}
	slot, err := txfence.ReadSlot(ctx, sc, p.cfg.Slot)
	switch {
	case errors.Is(err, txfence.ErrSlotMissing):
		p.blocked(slotrecord.ReasonSlotMissing)
		return slot, err
	case errors.Is(err, txfence.ErrSlotInvalidated):
		p.blocked(slotrecord.ReasonSlotLost)
		return slot, err
	case err != nil:
		return slot, err
	}
	records := slotrecord.Table{Schema: p.cfg.recordSchema()}
	if sc != conn {
		records.Slots = sc
	}
	st, err := slotrecord.Read(ctx, conn, records, p.cfg.Slot)
	if err != nil {
		return slot, err
	}
	if reason, err := st.Unproven(); err != nil {
		p.blocked(reason)
		return slot, fmt.Errorf("not pruning: %w", err)
	}
	p.blocked("")
	// The slot's position, proven: at or before the record.
	slot.Confirmed = min(slot.Confirmed, st.Record.Confirmed)
	return slot, nil
}

// blocked sets walrelay_retention_blocked: 1 for reason, 0 for the others.
func (p *Pruner) blocked(reason string) {
	if p.m.Blocked == nil {
		return
	}
	for _, r := range []string{slotrecord.ReasonNoRecord, slotrecord.ReasonSlotJumped, slotrecord.ReasonSlotMissing, slotrecord.ReasonSlotLost} {
		v := 0.0
		if r == reason {
			v = 1
		}
		p.m.Blocked.WithLabelValues(r).Set(v)
	}
}
