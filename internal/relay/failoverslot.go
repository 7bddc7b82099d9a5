package relay

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/postgres"
)

// This file is the relay's side of failover slots (postgres.slot_failover,
// PostgreSQL 17+): the slot it creates is a failover slot and an existing
// one is switched on, and a relay pointed at a standby whose slot is a
// synchronized copy waits for the promotion instead of failing or
// retrying noisily.

// syncedCopyPoll is how often a relay waiting on a synchronized copy asks
// whether the server was promoted.
const syncedCopyPoll = time.Second

// failoverState is the relay's failover-slot state.
type failoverState struct {
	// on is whether the slot is to be a failover slot on this server
	// (postgres.SlotFailover), decided at each start.
	on bool
	// waiting is set while the start waits on a synchronized copy, for
	// Ready.
	waiting atomic.Bool
}

// decideFailover decides whether the slot is to be a failover slot
// (postgres.SlotFailover): postgres.slot_failover=true on a server that
// cannot have one stops the start; auto on such a server says once why the
// slot is not one.
func (r *Relay) decideFailover(ctx context.Context, conn *pgx.Conn) error {
	on, why, err := postgres.SlotFailover(ctx, conn, r.cfg.Postgres.SlotFailover)
	if err != nil {
		return err
	}
	r.fslot.on = on
	if why != "" {
		r.log.Info("the replication slot is not a failover slot", "slot", r.cfg.Postgres.Slot, "why", why)
	}
	return nil
}

// ensureFailover switches failover on for the existing slot s when the
// slot is to be a failover slot and is not one (postgres.EnsureFailover). A
// slot another process holds (a walrelay that streams from it, this one
// waiting as a standby) keeps its setting until a start that finds it
// free: that is logged, not an error.
func (r *Relay) ensureFailover(ctx context.Context, conn *pgx.Conn, s postgres.Slot) error {
	if !r.fslot.on {
		return nil
	}
	switch res, err := postgres.EnsureFailover(ctx, conn, s, r.cfg.Postgres.SlotFailover); {
	case errors.Is(err, postgres.ErrSlotActive):
		r.log.Warn("could not switch failover on for the replication slot: a process holds it; the next start that finds it free does", "slot", s.Name, "err", err)
	case err != nil:
		return err
	case res == postgres.FailoverSwitched:
		r.log.Info("switched failover on for the replication slot (ALTER_REPLICATION_SLOT): standbys with sync_replication_slots=on now keep a copy", "slot", s.Name)
	}
	return nil
}

// waitSyncedCopy returns at once unless the slot, on the server conn is
// connected to, is a synchronized copy on a standby (postgres.SyncedCopy),
// which Postgres lets nothing decode from until the standby is promoted.
// Then it logs one line saying so, makes Ready say it too, and asks again
// every second until the server is promoted (or ctx is done). It runs
// before anything else of the start: with exactly-once delivery the
// transactional id derives from the system identifier, which the standby
// shares with the primary, and a producer started here would fence the
// primary's relay.
func (r *Relay) waitSyncedCopy(ctx context.Context, conn *pgx.Conn) error {
	slot := r.cfg.Postgres.Slot
	defer r.fslot.waiting.Store(false)
	for waited := false; ; waited = true {
		synced, err := postgres.SyncedCopy(ctx, conn, slot)
		if err != nil {
			return err
		}
		if !synced {
			if waited {
				r.log.Info("the server was promoted: the replication slot is usable; starting", "slot", slot)
			}
			return nil
		}
		if !waited {
			r.fslot.waiting.Store(true)
			r.log.Warn(postgres.SyncedCopyText(slot)+"; waiting", "slot", slot)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(syncedCopyPoll):
		}
	}
}
