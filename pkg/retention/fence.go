package retention

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
// "Retention"). It is a snapshot's xmin X, the WAL insert position L read
// after that snapshot, and the server's identity. Once the slot's
// confirmed_flush_lsn is at or past L, every transaction that committed
// before the snapshot is confirmed, and a row whose xmin precedes X is
// one of theirs.
type Fence struct {
	// Seq numbers the fences one Pruner took, from 1.
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

// identity is a server's WAL history: the fence is valid only on it.
type identity struct {
	System   string
	Timeline uint32
}

func (f Fence) identity() identity { return identity{f.System, f.Timeline} }

// identitySQL reads the system identifier and the timeline WAL is inserted
// on (the first 8 hex digits of the current WAL file's name).
const identitySQL = `(SELECT system_identifier::text FROM pg_control_system()),
	('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint`

// TakeFence takes a fence on conn: in one statement, the statement's
// snapshot (taken before anything in it runs) and then the WAL insert
// position. The transaction also takes an xid of its own (not below the
// snapshot's xmin), and TakeFence returns only once the WAL holding its
// commit is flushed: then the WAL up to the fence is durable and, after a
// crash, Postgres never hands out an xid below the fence's xmin again
// (recovery replays the commit and moves the next xid past it). A
// transaction that wrote no other WAL commits asynchronously whatever
// synchronous_commit says, so the flush is waited for (the WAL writer
// flushes within 3 × wal_writer_delay).
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
		return Fence{}, fmt.Errorf("taking a retention fence (snapshot, then WAL insert position): %w", err)
	}
	// The insert position now is past the fence transaction's commit.
	var end string
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&end); err != nil {
		return Fence{}, fmt.Errorf("reading the WAL insert position after the retention fence: %w", err)
	}
	for {
		var flushed bool
		if err := conn.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn`, end).Scan(&flushed); err != nil {
			return Fence{}, fmt.Errorf("waiting for the retention fence's WAL to be flushed: %w", err)
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

// slotState is what retention needs of the slot.
type slotState struct {
	Confirmed pglogrepl.LSN
	Active    bool
	identity
}

// readSlot reads postgres.slot's confirmed_flush_lsn and the server's
// identity, refusing a slot that is missing, not pgoutput, of another
// database, or invalidated.
func readSlot(ctx context.Context, conn *pgx.Conn, slot string) (slotState, error) {
	var (
		s                                  slotState
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
		return slotState{}, fmt.Errorf("reading replication slot %q: %w", slot, err)
	}
	s.Timeline = uint32(tli)
	switch {
	case !found:
		return slotState{}, fmt.Errorf("%w: %q: retention removes only rows the slot confirmed; fix postgres.slot, or create the slot (walrelay setup) and run the relay", ErrSlotMissing, slot)
	case slotType != "logical" || plugin != "pgoutput":
		return slotState{}, fmt.Errorf("%w: slot %q is a %s slot with plugin %q, not walrelay's (logical, pgoutput): fix postgres.slot", ErrSlotUnusable, slot, slotType, plugin)
	case database != current:
		return slotState{}, fmt.Errorf("%w: slot %q belongs to database %q, not %q, where the outbox is: its position says nothing about this outbox; fix postgres.slot or postgres.dsn", ErrSlotUnusable, slot, database, current)
	case status == "lost":
		return slotState{}, fmt.Errorf("%w: slot %q has wal_status lost (Postgres removed WAL it needed): rows after its position may never have been relayed; run walrelay verify, then recreate the slot", ErrSlotInvalidated, slot)
	case confirmed == nil:
		return slotState{}, fmt.Errorf("%w: slot %q has no confirmed_flush_lsn", ErrSlotUnusable, slot)
	}
	if s.Confirmed, err = pglogrepl.ParseLSN(*confirmed); err != nil {
		return slotState{}, fmt.Errorf("parsing confirmed_flush_lsn %q of slot %q: %w", *confirmed, slot, err)
	}
	return s, nil
}

// covers reports whether slot s proves fence f: same WAL history, and
// the slot confirmed everything up to the fence's WAL position.
func (s slotState) covers(f Fence) bool {
	return s.identity == f.identity() && s.Confirmed >= f.LSN
}

// errNotConfirmed explains why a fence is not (yet) confirmed by s.
func errNotConfirmed(slot string, s slotState, f Fence) error {
	if s.identity != f.identity() {
		return fmt.Errorf("%w: the server's WAL history changed since the fence (system %s timeline %d, now %s timeline %d): a new fence is needed", ErrNotConfirmed, f.System, f.Timeline, s.System, s.Timeline)
	}
	why := "the relay is down, stalled or behind"
	if !s.Active {
		why = "no process streams from the slot: start walrelay run"
	}
	return fmt.Errorf("%w: slot %q is at confirmed_flush_lsn %s, the fence at %s: %s", ErrNotConfirmed, slot, s.Confirmed, f.LSN, why)
}
