package txfence

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// Fence is a point that divides the outbox's rows into those whose
// transactions committed before it and the rest (docs/DESIGN.md,
// "Retention", the fence). It is a snapshot's xmin X, the WAL insert
// position L read after that snapshot, and the server's identity. Once the
// slot's confirmed_flush_lsn is at or past L, every transaction that
// committed before the snapshot is confirmed, and a row whose xmin
// precedes X is one of theirs.
type Fence struct {
	// Seq numbers the fences one user took, from 1 (internal/retention's
	// Pruner); TakeFence leaves it 0.
	Seq int `json:"seq"`
	// Xmin is the snapshot's xmin (pg_snapshot_xmin), a full 64-bit xid:
	// no transaction with a smaller xid was running when it was taken.
	Xmin uint64 `json:"xmin"`
	// LSN is pg_current_wal_insert_lsn() read after the snapshot.
	LSN pglogrepl.LSN `json:"-"`
	// System and Timeline identify the WAL history the fence belongs to
	// (pg_control_system's system_identifier, the insert timeline).
	System   string `json:"system_identifier"`
	Timeline uint32 `json:"timeline"`
	// Taken is the server's clock when the fence was taken.
	Taken time.Time `json:"taken"`
}

// Identity is a server's WAL history: a fence is valid only on the one it
// was taken on.
type Identity struct {
	System   string
	Timeline uint32
}

// Identity returns the WAL history f belongs to.
func (f Fence) Identity() Identity { return Identity{f.System, f.Timeline} }

// identitySQL reads the system identifier and the timeline WAL is inserted
// on (the first 8 hex digits of the current WAL file's name). On a hot
// standby (decoding from a standby: ReadSlot there), which inserts no WAL,
// it reads the timeline of its last restartpoint: the primary's timeline
// while it follows that primary; a standby behind a timeline switch reads
// another identity, which only refuses (a fence of another history is
// never covered).
const identitySQL = `(SELECT system_identifier::text FROM pg_control_system()),
	CASE WHEN pg_is_in_recovery() THEN (SELECT timeline_id FROM pg_control_checkpoint())::bigint
		ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint END`

// TakeFence takes a fence on conn: in one statement, the statement's
// snapshot (taken before anything in it runs) and then the WAL insert
// position. The transaction also takes an xid of its own (not below the
// snapshot's xmin; it writes no table, but its commit is a WAL record),
// and TakeFence returns only once the WAL holding its commit is flushed:
// then the WAL up to the fence is durable and, after a crash, Postgres
// never hands out an xid below the fence's xmin again (recovery replays
// the commit and moves the next xid past it). A transaction that wrote no
// other WAL commits asynchronously whatever synchronous_commit says, so
// the flush is waited for (the WAL writer flushes within 3 ×
// wal_writer_delay). Taking an xid works in a read-only transaction too.
func TakeFence(ctx context.Context, conn *pgx.Conn) (Fence, error) {
	var f Fence
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var xmin, lsn, own string
		var tli int64
		err := tx.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text, pg_current_wal_insert_lsn()::text,
			clock_timestamp(), `+identitySQL+`, pg_current_xact_id()::text`).Scan(&xmin, &lsn, &f.Taken, &f.System, &tli, &own)
		if err != nil {
			return err
		}
		if f.Xmin, err = strconv.ParseUint(xmin, 10, 64); err != nil {
			return fmt.Errorf("parsing snapshot xmin %q: %w", xmin, err)
		}
		if f.LSN, err = pglogrepl.ParseLSN(lsn); err != nil {
			return fmt.Errorf("parsing WAL insert position %q: %w", lsn, err)
		}
		f.Timeline = uint32(tli)
		return nil
	})
	if err != nil {
		return Fence{}, fmt.Errorf("taking a fence (snapshot, then WAL insert position): %w", err)
	}
	// The insert position now is past the fence transaction's commit.
	var end string
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&end); err != nil {
		return Fence{}, fmt.Errorf("reading the WAL insert position after the fence: %w", err)
	}
	for {
		var flushed bool
		if err := conn.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn`, end).Scan(&flushed); err != nil {
			return Fence{}, fmt.Errorf("waiting for the fence's WAL to be flushed: %w", err)
		}
		if flushed {
			break
		}
		select {
		case <-ctx.Done():
			return Fence{}, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return f, nil
}

// SlotState is what a fence is checked against: the slot's position and
// the server's WAL history.
type SlotState struct {
	// Confirmed is the slot's confirmed_flush_lsn.
	Confirmed pglogrepl.LSN
	// Active is whether a process streams from the slot.
	Active bool
	Identity
}

// ReadSlot reads slot's confirmed_flush_lsn and the server's identity,
// refusing a slot that is missing (ErrSlotMissing), not pgoutput or of
// another database than conn's (ErrSlotUnusable), or invalidated
// (ErrSlotInvalidated).
func ReadSlot(ctx context.Context, conn *pgx.Conn, slot string) (SlotState, error) {
	var (
		s                                  SlotState
		found                              bool
		slotType, plugin, database, status string
		confirmed                          *string
		current                            string
		tli                                int64
	)
	err := conn.QueryRow(ctx, `SELECT s.slot_name IS NOT NULL, coalesce(s.slot_type, ''), coalesce(s.plugin::text, ''),
			coalesce(s.database::text, ''), coalesce(s.wal_status, ''), s.confirmed_flush_lsn::text, coalesce(s.active, false),
			current_database(), `+identitySQL+`
		FROM (SELECT 1) one LEFT JOIN pg_replication_slots s ON s.slot_name = $1`, slot).
		Scan(&found, &slotType, &plugin, &database, &status, &confirmed, &s.Active, &current, &s.System, &tli)
	if err != nil {
		return SlotState{}, fmt.Errorf("reading replication slot %q: %w", slot, err)
	}
	s.Timeline = uint32(tli)
	switch {
	case !found:
		return SlotState{}, fmt.Errorf("%w: %q: walrelay prunes, and calls missing, only rows the slot confirmed; fix postgres.slot, or create the slot (walrelay setup) and run the relay", ErrSlotMissing, slot)
	case slotType != "logical" || plugin != "pgoutput":
		return SlotState{}, fmt.Errorf("%w: slot %q is a %s slot with plugin %q, not walrelay's (logical, pgoutput): fix postgres.slot", ErrSlotUnusable, slot, slotType, plugin)
	case database != current:
		return SlotState{}, fmt.Errorf("%w: slot %q belongs to database %q, not %q, where the outbox is: its position says nothing about this outbox; fix postgres.slot or postgres.dsn", ErrSlotUnusable, slot, database, current)
	case status == "lost":
		return SlotState{}, fmt.Errorf("%w: slot %q has wal_status lost (Postgres removed WAL it needed): rows after its position may never have been relayed: walrelay verify reports them missing (it works on a lost slot); see docs/runbook.md for recreating it", ErrSlotInvalidated, slot)
	case confirmed == nil:
		return SlotState{}, fmt.Errorf("%w: slot %q has no confirmed_flush_lsn", ErrSlotUnusable, slot)
	}
	if s.Confirmed, err = pglogrepl.ParseLSN(*confirmed); err != nil {
		return SlotState{}, fmt.Errorf("parsing confirmed_flush_lsn %q of slot %q: %w", *confirmed, slot, err)
	}
	return s, nil
}

// Covers reports whether the slot in state s proves fence f: same WAL
// history, and the slot confirmed everything up to the fence's WAL
// position.
func (s SlotState) Covers(f Fence) bool {
	return s.Identity == f.Identity() && s.Confirmed >= f.LSN
}

// NotConfirmed explains, wrapping ErrNotConfirmed, why fence f is not (yet)
// covered by slot (in state s): where the slot is, where the fence is, and
// what to look at.
func NotConfirmed(slot string, s SlotState, f Fence) error {
	if s.Identity != f.Identity() {
		return fmt.Errorf("%w: the server's WAL history changed since the fence (system %s timeline %d, now %s timeline %d): a new fence is needed", ErrNotConfirmed, f.System, f.Timeline, s.System, s.Timeline)
	}
	why := "the relay is down, stalled or behind"
	if !s.Active {
		why = "no process streams from the slot: start walrelay run"
	}
	return fmt.Errorf("%w: slot %q is at confirmed_flush_lsn %s, the fence at %s: %s", ErrNotConfirmed, slot, s.Confirmed, f.LSN, why)
}

// Wait polls slot until it covers fence f or the deadline passes, and
// returns the slot's last state; the error wraps ErrNotConfirmed (see
// NotConfirmed) when it did not cover f in time or the server's WAL
// history changed, or is ReadSlot's.
func Wait(ctx context.Context, conn *pgx.Conn, slot string, f Fence, deadline time.Time) (SlotState, error) {
	for {
		s, err := ReadSlot(ctx, conn, slot)
		if err != nil {
			return SlotState{}, err
		}
		if s.Covers(f) {
			return s, nil
		}
		if s.Identity != f.Identity() || !time.Now().Before(deadline) {
			return s, NotConfirmed(slot, s, f)
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
