package slotrecord

// The record's fences and what a heal needs from it.
//
// A heal (walrelay slot heal, outbox.on_slot_loss: heal) republishes
// from the outbox table the rows a lost, missing or jumped slot may not
// have delivered. Rows carry no commit LSN; what divides them is a
// txfence.Fence: once Kafka acknowledged every transaction before the
// fence's LSN, every row whose xmin precedes its xmin is on Kafka. So the
// recorder takes a fence now and then (SetFence: the pending fence), and
// the Raise that records a position at or past its LSN, while the record
// is not jumped, makes it the covered fence in the same UPDATE. The row
// itself is the proof that the fence belongs to this server's history:
// a server that has the row (replayed after a failover, restored by
// PITR) has the WAL up to the row's commit, which is after the fence's
// own commit (SetFence runs after TakeFence returned), so it never hands
// out an xid below the fence's xmin again. A row of another system (a
// dump restored elsewhere) is not: Heal then trusts no fence.

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/txfence"
)

// timelineSQL is the server's insert timeline (the first 8 hex digits of
// the current WAL file's name), 0 on a standby (pg_walfile_name refuses
// there).
const timelineSQL = `CASE WHEN pg_is_in_recovery() THEN 0 ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint END`

// fenceColumns are the columns this version added, read as text.
type fenceColumns struct {
	timeline, fenceXmin, fenceLSN, coveredXmin, coveredLSN, coveredSystem, accepted *string
}

// fill sets r's Timeline, Pending and Covered.
func (c fenceColumns) fill(r *Record) error {
	if c.timeline != nil {
		tli, err := strconv.ParseUint(*c.timeline, 10, 32)
		if err != nil {
			return fmt.Errorf("parsing timeline %q: %w", *c.timeline, err)
		}
		r.Timeline = uint32(tli)
	}
	fence := func(xmin, lsn *string, system string) (*txfence.Fence, error) {
		if xmin == nil || lsn == nil {
			return nil, nil
		}
		x, err := strconv.ParseUint(*xmin, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("parsing fence xmin %q: %w", *xmin, err)
		}
		l, err := pglogrepl.ParseLSN(*lsn)
		if err != nil {
			return nil, fmt.Errorf("parsing fence lsn %q: %w", *lsn, err)
		}
		return &txfence.Fence{Xmin: x, LSN: l, System: system}, nil
	}
	r.Accepted = deref(c.accepted) == "true"
	var err error
	if r.Pending, err = fence(c.fenceXmin, c.fenceLSN, r.System); err != nil {
		return err
	}
	r.Covered, err = fence(c.coveredXmin, c.coveredLSN, deref(c.coveredSystem))
	return err
}

// upgradeDDL adds the columns of this version to a table of an earlier
// one.
const upgradeDDL = `ALTER TABLE %s ADD COLUMN IF NOT EXISTS timeline bigint,
	ADD COLUMN IF NOT EXISTS fence_xmin bigint, ADD COLUMN IF NOT EXISTS fence_lsn pg_lsn,
	ADD COLUMN IF NOT EXISTS covered_xmin bigint, ADD COLUMN IF NOT EXISTS covered_lsn pg_lsn,
	ADD COLUMN IF NOT EXISTS covered_system text, ADD COLUMN IF NOT EXISTS jump_accepted boolean`

// upgrade adds the fence columns when they are missing. A role that may
// not (not the table's owner) leaves the table as it is: the record works
// without them, and a heal then trusts no fence (it republishes every
// row: duplicates, never a loss).
func (t Table) upgrade(ctx context.Context, conn *pgx.Conn) error {
	var has bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_attribute WHERE attrelid = $1::regclass AND attname = 'jump_accepted' AND NOT attisdropped)`,
		t.quoted()).Scan(&has); err != nil {
		return fmt.Errorf("reading the columns of %s: %w", t, err)
	}
	if has {
		return nil
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf(upgradeDDL, t.quoted())); err != nil && !IsPrivilege(err) {
		return fmt.Errorf("adding the fence columns to %s (sql/005_slot_positions.sql): %w", t, err)
	}
	return nil
}

// raiseCovering is Raise's UPDATE on a table with fence columns: it also
// records the timeline, and makes the pending fence the covered one when
// the new position passed its LSN and the record is not jumped (a jumped
// record's position is the slot's, not one Kafka acknowledged).
func raiseCovering(t Table) string {
	covers := `(jumped_at IS NULL AND fence_lsn IS NOT NULL AND fence_lsn <= greatest(confirmed_lsn, $2::pg_lsn))`
	return `UPDATE ` + t.quoted() + ` SET confirmed_lsn = greatest(confirmed_lsn, $2::pg_lsn), updated_at = now(),
		timeline = nullif(` + timelineSQL + `, 0),
		covered_xmin = CASE WHEN ` + covers + ` THEN fence_xmin ELSE covered_xmin END,
		covered_lsn = CASE WHEN ` + covers + ` THEN fence_lsn ELSE covered_lsn END,
		covered_system = CASE WHEN ` + covers + ` THEN system_identifier ELSE covered_system END,
		fence_xmin = CASE WHEN ` + covers + ` THEN NULL ELSE fence_xmin END,
		fence_lsn = CASE WHEN ` + covers + ` THEN NULL ELSE fence_lsn END
		WHERE slot_name = $1 RETURNING confirmed_lsn::text`
}

// SetFence records f as the record's pending fence, when the table has
// the fence columns, the record exists, is not jumped, is of f's system,
// and has no pending fence yet. It reports whether it did.
func SetFence(ctx context.Context, conn *pgx.Conn, t Table, slot string, f txfence.Fence) (bool, error) {
	tag, err := conn.Exec(ctx, `UPDATE `+t.quoted()+` SET fence_xmin = $2, fence_lsn = $3::pg_lsn
		WHERE slot_name = $1 AND jumped_at IS NULL AND system_identifier = $4 AND fence_lsn IS NULL`,
		slot, int64(f.Xmin), f.LSN.String(), f.System)
	if err != nil {
		return false, fmt.Errorf("recording a fence of slot %q in %s: %w", slot, t, err)
	}
	return tag.RowsAffected() == 1, nil
}

// HealFence is the fence a heal may trust: the record's covered fence
// when it was taken on this server's system, nil otherwise (no record,
// no fence yet, a record restored on another cluster).
func (s State) HealFence() *txfence.Fence {
	if s.Record == nil || s.Record.Covered == nil || s.Record.Covered.System != s.System || s.Record.System != s.System {
		return nil
	}
	f := *s.Record.Covered
	return &f
}

// Failover reports whether the server was promoted since the record was
// last written by a relay: the same system, a later timeline. Then a
// failover slot synced from the old primary can be ahead of the record
// this server replayed (the record of a position commits after that
// position, and the standby may have received the one and not the
// other), so a slot past the record is not proof that someone else moved
// it; nor is it proof that nobody did.
func (s State) Failover() bool {
	r := s.Record
	return r != nil && r.System == s.System && r.Timeline != 0 && s.Timeline > r.Timeline
}

// Healed records a heal of slot: the slot (created at lsn when created,
// otherwise found at lsn) starts where every earlier outbox row was
// republished from the table or was already on Kafka, so its position is
// walrelay's own again: the jump is cleared, confirmed_lsn set to lsn on
// this server's system, and note says what was done.
func Healed(ctx context.Context, conn *pgx.Conn, t Table, slot string, lsn pglogrepl.LSN, created bool, note string) (State, error) {
	var out State
	err := inTx(ctx, conn, t, slot, func(tx pgx.Tx, s State) error {
		createdLSN := any(nil)
		if created {
			createdLSN = lsn.String()
		}
		tli := ""
		if s.Fences {
			tli = `, jump_accepted = NULL, timeline = nullif(` + timelineSQL + `, 0)`
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+t.quoted()+` AS r (slot_name, system_identifier, confirmed_lsn, created_lsn, note)
			VALUES ($1, $2, $3::pg_lsn, $4::pg_lsn, $5)
			ON CONFLICT (slot_name) DO UPDATE SET system_identifier = excluded.system_identifier,
				confirmed_lsn = CASE WHEN r.system_identifier = excluded.system_identifier THEN greatest(r.confirmed_lsn, excluded.confirmed_lsn) ELSE excluded.confirmed_lsn END,
				created_lsn = coalesce(excluded.created_lsn, r.created_lsn),
				jumped_at = NULL, jump = NULL, jumped_from_lsn = NULL, note = excluded.note, updated_at = now()`+tli,
			slot, s.System, lsn.String(), createdLSN, note)
		if err != nil {
			return fmt.Errorf("recording the heal of slot %q in %s: %w", slot, t, err)
		}
		out, err = Read(ctx, tx, t, slot)
		return err
	})
	return out, err
}

// Reclaim raises the record to the slot's position when the slot is past
// the record but at or before own, a position the caller itself recorded
// on this system (the same process, before a failover: the new primary's
// synced slot can be past the record row it replayed, whose commit came
// after the position it records). The record is raised only to the
// slot's position: past the promotion, positions of the old timeline
// name other transactions. It reports whether it raised the record.
func Reclaim(ctx context.Context, conn *pgx.Conn, t Table, slot, system string, own pglogrepl.LSN) (State, bool, error) {
	var (
		out State
		did bool
	)
	err := inTx(ctx, conn, t, slot, func(tx pgx.Tx, s State) error {
		out = s
		r := s.Record
		if system == "" || r == nil || r.JumpedAt != nil || !s.SlotExists || s.SlotLost || s.System != system || r.System != system ||
			s.SlotConfirmed <= r.Confirmed || s.SlotConfirmed > own {
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE `+t.quoted()+` SET confirmed_lsn = greatest(confirmed_lsn, $2::pg_lsn), updated_at = now() WHERE slot_name = $1`,
			slot, s.SlotConfirmed.String()); err != nil {
			return fmt.Errorf("recording position %s of slot %q again in %s: %w", s.SlotConfirmed, slot, t, err)
		}
		did = true
		var err error
		out, err = Read(ctx, tx, t, slot)
		return err
	})
	return out, did, err
}

// GapRows counts the rows of the outbox tables (schema-qualified, as
// postgres.table lists them) that do not precede s's HealFence: those a
// slot created now may leave unpublished (an upper bound: some were
// published before the slot was lost). The tables are counted in one
// REPEATABLE READ snapshot, so the sum is of one moment. Without a fence
// usable here it counts every row and reports bounded false: the sum is
// bounded only when every table's count is.
func GapRows(ctx context.Context, conn *pgx.Conn, tables []string, s State) (rows int64, bounded bool, err error) {
	err = pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		where := ""
		if f := s.HealFence(); f != nil {
			x32, window, werr := txfence.Window(ctx, tx, *f)
			if werr == nil {
				where = ` WHERE NOT ` + txfence.PrecedesSQL(txfence.XminExpr, strconv.FormatInt(x32, 10), strconv.FormatInt(window, 10))
				bounded = true
			}
		}
		for _, table := range tables {
			schema, name, ok := strings.Cut(table, ".")
			if !ok {
				schema, name = "public", table
			}
			var n int64
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, name}.Sanitize()+where).Scan(&n); err != nil {
				return fmt.Errorf("counting %s: %w", table, err)
			}
			rows += n
		}
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("counting the outbox rows after the record's fence: %w", err)
	}
	return rows, bounded, nil
}

// AcceptJump is an operator's decision on a slot found past the record
// (walrelay slot create --accept-gap on an existing slot): the jump is
// marked (when found only now) and accepted, so that walrelay run relays
// on from the slot while retention stays stopped until walrelay verify
// --republish and walrelay slot adopt. It returns the state after it;
// ErrNoRecord when there is no record, ErrJumped wrapped when the table
// lacks the column (an earlier version's table the role may not alter).
func AcceptJump(ctx context.Context, conn *pgx.Conn, t Table, slot string) (State, error) {
	var out State
	err := inTx(ctx, conn, t, slot, func(tx pgx.Tx, s State) error {
		switch {
		case s.Record == nil:
			return fmt.Errorf("%w %q: there is no gap to accept", ErrNoRecord, slot)
		case !s.SlotExists || s.SlotLost:
			return fmt.Errorf("slot %q is missing or lost: accepting its gap creates a new one (drop a lost slot first)", slot)
		case !s.Fences:
			return fmt.Errorf("%w: %s has no jump_accepted column (a table of an earlier walrelay): run walrelay setup, or sql/005_slot_positions.sql's ALTER as its owner", ErrJumped, t)
		}
		if why := s.Jumped(); why != "" {
			if err := markLocked(ctx, tx, t, s, why, s.SlotConfirmed); err != nil {
				return err
			}
		} else if s.Record.JumpedAt == nil {
			return fmt.Errorf("slot %q is at %s, within walrelay's record %s: there is no gap to accept", slot, s.SlotConfirmed, s.Record.Confirmed)
		}
		if _, err := tx.Exec(ctx, `UPDATE `+t.quoted()+` SET jump_accepted = true, updated_at = now() WHERE slot_name = $1`, slot); err != nil {
			return fmt.Errorf("accepting the gap of slot %q in %s: %w", slot, t, err)
		}
		var err error
		out, err = Read(ctx, tx, t, slot)
		return err
	})
	return out, err
}
