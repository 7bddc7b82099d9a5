// Package slotrecord is walrelay's own record of each replication slot it
// relays through: the position it confirmed (written BEFORE it confirms
// it), where it created the slot, and whether the slot was found replaced
// or moved past that record by someone else.
//
// Why: a slot's confirmed_flush_lsn proves that Kafka acknowledged every
// transaction before it only while walrelay alone moved it. A slot dropped
// and created again (by an operator, by postgres.create_slot after
// max_slot_wal_keep_size invalidated it, by a failover before Postgres 17)
// or advanced by hand starts past rows nobody published; retention would
// delete them and walrelay verify would not look for them. The record is
// the proof: the relay raises confirmed_lsn before it confirms anything
// (write-ahead), so for a slot only walrelay moved, always
// confirmed_flush_lsn <= confirmed_lsn. A slot found past it was moved by
// someone else: the record is marked (jumped_at), retention stops, and
// stays stopped until an operator runs walrelay verify and then walrelay
// slot adopt, whatever the relay confirms meanwhile.
//
// In: a normal connection to the outbox's database and the slot's name.
// The table is walrelay_slot_positions in the outbox's schema
// (sql/005_slot_positions.sql), one row per slot. Out: [State] (the slot,
// its record and the server, read together) and [State.Unproven], and the
// writes: [Baseline], [Raise], [MarkJumped], [Created], [Moved], [Adopt].
//
// Users: internal/relay (the start check and the write-ahead recorder),
// internal/retention and internal/reconcile (the proof), internal/postgres,
// internal/operator and internal/setup (slot create, advance and adopt).
//
// It does not read or write replication slots: callers do, in the order
// the write-ahead rule asks (record first, then move the slot).
package slotrecord

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/txfence"
	sqlfiles "github.com/walrelay/walrelay/sql"
)

// TableName is the record table's name, in the outbox's schema.
const TableName = "walrelay_slot_positions"

// Table is where the records are: TableName in the outbox's schema
// (postgres.table's).
type Table struct {
	Schema string
	// Slots, when set, is where the slots are read instead of the
	// record's connection: a hot standby of the record's server that
	// holds the slot (decoding from a standby, postgres.primary_dsn). The
	// record stays on the primary, the only server that can write it;
	// its positions are in the primary's WAL, the history the standby
	// replays, so they compare with the standby's slot as they are. Read
	// refuses a Slots server with another system identifier.
	Slots SlotReader
}

// SlotReader runs the one-row query that reads a slot, on the server that
// holds it.
type SlotReader interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ErrNotStandby is returned by Read when Table.Slots is a server of
// another cluster than the record's (a different system identifier): not
// a standby of the primary, so the record's positions say nothing about
// its slot.
var ErrNotStandby = errors.New("the server holding the slot is not a standby of the server holding its record")

func (t Table) String() string { return t.Schema + "." + TableName }

func (t Table) quoted() string { return pgx.Identifier{t.Schema, TableName}.Sanitize() }

// DDL is sql/005_slot_positions.sql's CREATE TABLE statement (not the
// grant after it, for a DBA running the file by hand) for t's schema.
func (t Table) DDL() (string, error) {
	i := strings.Index(sqlfiles.SlotPositions, sqlfiles.CreateSlotPositions)
	end := strings.Index(sqlfiles.SlotPositions, "\n);")
	if i < 0 || end < i {
		return "", fmt.Errorf("sql/005_slot_positions.sql no longer holds one statement starting with %q and ending with a line \");\"", sqlfiles.CreateSlotPositions)
	}
	stmt := sqlfiles.SlotPositions[i : end+len("\n);")]
	return strings.Replace(stmt, sqlfiles.CreateSlotPositions, "CREATE TABLE IF NOT EXISTS "+t.quoted()+" (", 1), nil
}

// Exists reports whether the table exists.
func (t Table) Exists(ctx context.Context, q Querier) (bool, error) {
	var ok bool
	if err := q.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, t.quoted()).Scan(&ok); err != nil {
		return false, fmt.Errorf("looking up table %s: %w", t, err)
	}
	return ok, nil
}

// Ensure creates the table when it is missing and reports whether it did.
// The error wraps the server's (42501 for a role that may not create it).
func (t Table) Ensure(ctx context.Context, conn *pgx.Conn) (bool, error) {
	ok, err := t.Exists(ctx, conn)
	if err != nil {
		return false, err
	}
	if ok {
		return false, t.upgrade(ctx, conn)
	}
	ddl, err := t.DDL()
	if err != nil {
		return false, err
	}
	if _, err := conn.Exec(ctx, ddl); err != nil {
		// Two processes creating it at once (relays of two slots starting
		// together): CREATE TABLE IF NOT EXISTS is not atomic in Postgres,
		// and the loser fails on the catalog's unique index (23505) or
		// finds the table's row type made meanwhile (42710). The table is
		// there; that is all Ensure promises.
		var pe *pgconn.PgError
		if errors.As(err, &pe) && (pe.Code == "23505" || pe.Code == "42P07" || pe.Code == "42710") {
			if ok, eerr := t.Exists(ctx, conn); eerr == nil && ok {
				return false, nil
			}
		}
		return false, fmt.Errorf("creating table %s (walrelay's record of its slots; sql/005_slot_positions.sql): %w", t, err)
	}
	return true, nil
}

// Querier is a connection or a transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Record is one row of the table.
type Record struct {
	Slot   string `json:"slot"`
	System string `json:"system_identifier"`
	// Confirmed is the newest position walrelay recorded: it confirms the
	// slot only up to it, and only once Kafka acknowledged everything
	// before it.
	Confirmed pglogrepl.LSN `json:"-"`
	// Created is where walrelay created the slot; 0 when it found it.
	Created   pglogrepl.LSN `json:"-"`
	UpdatedAt time.Time     `json:"updated_at"`
	// Note says what last moved the record deliberately (a baseline, slot
	// advance, a takeover, slot create --replace).
	Note string `json:"note,omitempty"`
	// JumpedAt is set while the slot is known to have been replaced or
	// moved past the record and no operator adopted it; Jump says what
	// was found, JumpedFrom the record's position then: rows committed
	// after it may never have been published.
	JumpedAt   *time.Time    `json:"jumped_at,omitempty"`
	Jump       string        `json:"jump,omitempty"`
	JumpedFrom pglogrepl.LSN `json:"-"`
	// AdoptedAt and AdoptedBy: the last walrelay slot adopt.
	AdoptedAt *time.Time `json:"adopted_at,omitempty"`
	AdoptedBy string     `json:"adopted_by,omitempty"`
	// Timeline is the WAL timeline the relay last recorded on (0: not
	// known). A server on a later timeline of the same system was
	// promoted since: see State.Failover.
	Timeline uint32 `json:"timeline,omitempty"`
	// Pending is a fence taken while relaying that Confirmed has not
	// passed yet; Covered the newest fence Confirmed passed while the
	// record was not jumped: every outbox row whose xmin precedes
	// Covered.Xmin is on Kafka (see fence.go). Nil when none.
	Pending *txfence.Fence `json:"pending_fence,omitempty"`
	Covered *txfence.Fence `json:"covered_fence,omitempty"`
	// Accepted: the jump is a gap an operator accepted (walrelay slot
	// create --accept-gap): walrelay run relays on (retention stays
	// stopped until walrelay slot adopt).
	Accepted bool `json:"jump_accepted,omitempty"`
}

// State is a slot, its record and the server, read in one statement.
type State struct {
	Slot string `json:"slot"`
	// Table is false when the record table does not exist.
	Table bool `json:"table"`
	// Record is nil when there is no record of the slot.
	Record *Record `json:"record,omitempty"`
	// SlotExists, SlotLost (wal_status lost) and SlotConfirmed (its
	// confirmed_flush_lsn; 0 when NULL or missing) are the slot's.
	SlotExists    bool          `json:"slot_exists"`
	SlotLost      bool          `json:"slot_lost"`
	SlotConfirmed pglogrepl.LSN `json:"-"`
	// System is the server's system identifier, Timeline its insert
	// timeline (0 on a standby).
	System   string `json:"system_identifier"`
	Timeline uint32 `json:"timeline"`
	// Fences is whether the table has the fence columns (sql/005 of
	// this version; walrelay run adds them when it may).
	Fences bool `json:"-"`
}

// Read reads slot's state on q.
func Read(ctx context.Context, q Querier, t Table, slot string) (State, error) {
	s := State{Slot: slot}
	// Decoding from a standby, the slot is read there FIRST and the record
	// on the primary after it: the relay records a position before it
	// confirms it, so a record read after the slot is at or past the
	// slot's position unless someone else moved the slot. (Read the other
	// way round, the slot may move on between the two reads and pass for
	// jumped.)
	var (
		system, standbyConfirmed   *string
		standbyExists, standbyLost bool
	)
	if t.Slots != nil {
		var sys string
		err := t.Slots.QueryRow(ctx, `SELECT (SELECT system_identifier::text FROM pg_control_system()),
				s.slot_name IS NOT NULL, coalesce(s.wal_status = 'lost', false), s.confirmed_flush_lsn::text
			FROM (SELECT 1) one LEFT JOIN pg_replication_slots s ON s.slot_name = $1`, slot).
			Scan(&sys, &standbyExists, &standbyLost, &standbyConfirmed)
		if err != nil {
			return s, fmt.Errorf("reading replication slot %q on the standby: %w", slot, err)
		}
		system = &sys
	}
	var err error
	if s.Table, err = t.Exists(ctx, q); err != nil {
		return s, err
	}
	var confirmed *string
	if !s.Table {
		var tli int64
		err = q.QueryRow(ctx, `SELECT (SELECT system_identifier::text FROM pg_control_system()), `+timelineSQL+`,
				s.slot_name IS NOT NULL, coalesce(s.wal_status = 'lost', false), s.confirmed_flush_lsn::text
			FROM (SELECT 1) one LEFT JOIN pg_replication_slots s ON s.slot_name = $1`, slot).
			Scan(&s.System, &tli, &s.SlotExists, &s.SlotLost, &confirmed)
		s.Timeline = uint32(tli)
	} else {
		var (
			found                     bool
			sys, rconf, created, from *string
			updated                   *time.Time
			note, jump, adoptedBy     *string
			jumpedAt, adoptedAt       *time.Time
			tli                       int64
			fences                    fenceColumns
		)
		// The fence columns are read through to_jsonb so that a table
		// of an earlier version (without them) still reads.
		err = q.QueryRow(ctx, `SELECT (SELECT system_identifier::text FROM pg_control_system()), `+timelineSQL+`,
				s.slot_name IS NOT NULL, coalesce(s.wal_status = 'lost', false), s.confirmed_flush_lsn::text,
				r.slot_name IS NOT NULL, r.system_identifier, r.confirmed_lsn::text, r.created_lsn::text, r.updated_at,
				r.note, r.jumped_at, r.jump, r.jumped_from_lsn::text, r.adopted_at, r.adopted_by,
				EXISTS (SELECT FROM pg_attribute WHERE attrelid = $2::regclass AND attname = 'jump_accepted' AND NOT attisdropped),
				to_jsonb(r)->>'timeline', to_jsonb(r)->>'fence_xmin', to_jsonb(r)->>'fence_lsn',
				to_jsonb(r)->>'covered_xmin', to_jsonb(r)->>'covered_lsn', to_jsonb(r)->>'covered_system', to_jsonb(r)->>'jump_accepted'
			FROM (SELECT 1) one
			LEFT JOIN pg_replication_slots s ON s.slot_name = $1
			LEFT JOIN `+t.quoted()+` r ON r.slot_name = $1`, slot, t.quoted()).
			Scan(&s.System, &tli, &s.SlotExists, &s.SlotLost, &confirmed,
				&found, &sys, &rconf, &created, &updated, &note, &jumpedAt, &jump, &from, &adoptedAt, &adoptedBy,
				&s.Fences, &fences.timeline, &fences.fenceXmin, &fences.fenceLSN, &fences.coveredXmin, &fences.coveredLSN, &fences.coveredSystem, &fences.accepted)
		s.Timeline = uint32(tli)
		if err == nil && found {
			r := &Record{Slot: slot, System: deref(sys), UpdatedAt: *updated, Note: deref(note), JumpedAt: jumpedAt,
				Jump: deref(jump), AdoptedAt: adoptedAt, AdoptedBy: deref(adoptedBy)}
			if err := fences.fill(r); err != nil {
				return s, fmt.Errorf("parsing the record of slot %q: %w", slot, err)
			}
			for _, p := range []struct {
				dst *pglogrepl.LSN
				src *string
			}{{&r.Confirmed, rconf}, {&r.Created, created}, {&r.JumpedFrom, from}} {
				if p.src == nil {
					continue
				}
				if *p.dst, err = pglogrepl.ParseLSN(*p.src); err != nil {
					return s, fmt.Errorf("parsing the record of slot %q: %w", slot, err)
				}
			}
			s.Record = r
		}
	}
	if err != nil {
		return s, fmt.Errorf("reading replication slot %q and its record in %s: %w", slot, t, err)
	}
	if t.Slots != nil {
		if *system != s.System {
			return s, fmt.Errorf("%w: slot %q is on a server of system %s, its record in %s on system %s: point postgres.dsn at a standby of postgres.primary_dsn", ErrNotStandby, slot, *system, t, s.System)
		}
		s.SlotExists, s.SlotLost, confirmed = standbyExists, standbyLost, standbyConfirmed
	}
	if confirmed != nil {
		if s.SlotConfirmed, err = pglogrepl.ParseLSN(*confirmed); err != nil {
			return s, fmt.Errorf("parsing confirmed_flush_lsn %q of slot %q: %w", *confirmed, slot, err)
		}
	}
	return s, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Jumped says what makes the slot's position not walrelay's own, found
// now (not yet marked in the record): "" when nothing. A slot that is
// missing or lost is not judged here (nothing streams from it).
func (s State) Jumped() string {
	r := s.Record
	switch {
	case r == nil || !s.SlotExists || s.SlotLost:
		return ""
	case r.System != s.System:
		return fmt.Sprintf("the record was written on another cluster (system %s, this server is %s): a new cluster made by pg_upgrade, a restore from a dump, or another server", r.System, s.System)
	case s.SlotConfirmed > r.Confirmed:
		return fmt.Sprintf("the slot's confirmed_flush_lsn %s is past walrelay's record %s: the slot was recreated, replaced by a failover or advanced by someone else", s.SlotConfirmed, r.Confirmed)
	}
	return ""
}

// Reasons Unproven returns, the label values of the metrics.
const (
	ReasonNoRecord    = "no_record"
	ReasonSlotJumped  = "slot_jumped"
	ReasonSlotMissing = "slot_missing"
	ReasonSlotLost    = "slot_lost"
)

// Unproven returns nil when the slot's confirmed_flush_lsn is a position
// walrelay itself confirmed through this slot (retention and verify may
// trust it), and otherwise the reason (one of the Reason constants) and
// an error that says what was found and what to run: it wraps ErrNoRecord
// or ErrJumped (a missing or lost slot wraps ErrJumped when a record of
// it exists, ErrNoRecord when none does).
func (s State) Unproven() (string, error) {
	r := s.Record
	switch {
	case !s.Table:
		return ReasonNoRecord, fmt.Errorf("%w %q: the table walrelay_slot_positions does not exist: run `walrelay setup` (or sql/005_slot_positions.sql), then `walrelay run` once records the slot's position", ErrNoRecord, s.Slot)
	case r == nil && !s.SlotExists:
		return ReasonSlotMissing, fmt.Errorf("%w %q, and no slot of this name exists", ErrNoRecord, s.Slot)
	case r == nil:
		return ReasonNoRecord, fmt.Errorf("%w %q: no walrelay of this version has run on it yet: start `walrelay run` once (it records the slot's position as its baseline)", ErrNoRecord, s.Slot)
	case !s.SlotExists:
		return ReasonSlotMissing, fmt.Errorf("%w: slot %q is missing; walrelay had confirmed through it up to %s (recorded %s): rows committed after that may never have been published. %s",
			ErrJumped, s.Slot, r.Confirmed, r.UpdatedAt.UTC().Format(time.RFC3339), Fix(s.Slot, r))
	case s.SlotLost:
		return ReasonSlotLost, fmt.Errorf("%w: slot %q is lost (wal_status lost: Postgres removed WAL it needed); walrelay had confirmed through it up to %s (recorded %s): rows committed after that may never have been published. %s",
			ErrJumped, s.Slot, r.Confirmed, r.UpdatedAt.UTC().Format(time.RFC3339), Fix(s.Slot, r))
	case r.JumpedAt != nil:
		return ReasonSlotJumped, fmt.Errorf("%w: slot %q: %s (found %s; walrelay's record was at %s then): rows committed after %s may never have been published. Run `walrelay verify --since %s --republish`, then `walrelay slot adopt %s`",
			ErrJumped, s.Slot, r.Jump, r.JumpedAt.UTC().Format(time.RFC3339), r.JumpedFrom, r.JumpedFrom, since(r), s.Slot)
	}
	if why := s.Jumped(); why != "" {
		return ReasonSlotJumped, fmt.Errorf("%w: slot %q: %s: rows committed after %s may never have been published. Run `walrelay verify --since %s --republish`, then `walrelay slot adopt %s`",
			ErrJumped, s.Slot, why, r.Confirmed, since(r), s.Slot)
	}
	return "", nil
}

// since is a --since for walrelay verify that covers the rows a record's
// position may have left unpublished: an hour before the record was
// last written (a transaction's rows carry their own, earlier time).
func since(r *Record) string {
	at := r.UpdatedAt
	if r.JumpedAt != nil && r.JumpedAt.Before(at) {
		at = *r.JumpedAt
	}
	return at.Add(-time.Hour).UTC().Format(time.RFC3339)
}

// Fix is what to run for a missing or lost slot that walrelay confirmed
// through up to r: recreate it (retention stays stopped), relay, verify,
// adopt.
func Fix(slot string, r *Record) string {
	return fmt.Sprintf("Heal it from the outbox (`walrelay slot heal`, or outbox.on_slot_loss: heal), or accept the gap: `walrelay slot create %s --accept-gap` (drop a lost one first: `walrelay slot drop %s`), start walrelay run, then run `walrelay verify --since %s --republish` and `walrelay slot adopt %s`",
		slot, slot, since(r), slot)
}

// inTx runs fn in a transaction on conn, with the record row of slot
// locked (when it exists) and the state read after the lock.
func inTx(ctx context.Context, conn *pgx.Conn, t Table, slot string, fn func(tx pgx.Tx, s State) error) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM `+t.quoted()+` WHERE slot_name = $1 FOR UPDATE`, slot); err != nil {
			return fmt.Errorf("locking the record of slot %q in %s: %w", slot, t, err)
		}
		s, err := Read(ctx, tx, t, slot)
		if err != nil {
			return err
		}
		return fn(tx, s)
	})
}

// Baseline records the slot's current position when there is no record
// of it (the first start of a walrelay that keeps records, on a slot an
// earlier version confirmed through), and returns the state after it and
// whether it recorded one. An existing record is left alone.
func Baseline(ctx context.Context, conn *pgx.Conn, t Table, slot, note string) (State, bool, error) {
	var (
		out      State
		inserted bool
	)
	err := inTx(ctx, conn, t, slot, func(tx pgx.Tx, s State) error {
		out = s
		if s.Record != nil || !s.SlotExists {
			return nil
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+t.quoted()+` (slot_name, system_identifier, confirmed_lsn, note)
			VALUES ($1, $2, $3::pg_lsn, $4) ON CONFLICT (slot_name) DO NOTHING`, slot, s.System, s.SlotConfirmed.String(), note)
		if err != nil {
			return fmt.Errorf("recording the baseline of slot %q in %s: %w", slot, t, err)
		}
		inserted = true
		out, err = Read(ctx, tx, t, slot)
		return err
	})
	return out, inserted, err
}

// MarkJumped marks the record of slot as jumped when the slot is found
// replaced or past it now (State.Jumped) and it is not marked yet, then
// raises the record to the slot's position (so that the relay, which goes
// on relaying, confirms from there). It returns the state after it and
// what was found ("" when nothing new).
func MarkJumped(ctx context.Context, conn *pgx.Conn, t Table, slot string) (State, string, error) {
	var (
		out State
		why string
	)
	err := inTx(ctx, conn, t, slot, func(tx pgx.Tx, s State) error {
		out = s
		if why = s.Jumped(); why == "" {
			return nil
		}
		if err := markLocked(ctx, tx, t, s, why, s.SlotConfirmed); err != nil {
			return err
		}
		var err error
		out, err = Read(ctx, tx, t, slot)
		return err
	})
	return out, why, err
}

// markLocked sets the jump (keeping an earlier one not adopted yet) and
// moves the record to `to` on the server's system.
func markLocked(ctx context.Context, tx pgx.Tx, t Table, s State, why string, to pglogrepl.LSN) error {
	accepted := ""
	if s.Fences {
		accepted = "jump_accepted = false, " // a new jump is no gap anyone accepted
	}
	_, err := tx.Exec(ctx, `UPDATE `+t.quoted()+` SET `+accepted+`
			jumped_from_lsn = CASE WHEN jumped_at IS NULL THEN confirmed_lsn ELSE jumped_from_lsn END,
			jump = CASE WHEN jumped_at IS NULL THEN $3 ELSE jump END,
			jumped_at = coalesce(jumped_at, now()),
			confirmed_lsn = CASE WHEN system_identifier = $2 THEN greatest(confirmed_lsn, $4::pg_lsn) ELSE $4::pg_lsn END,
			system_identifier = $2, updated_at = now()
		WHERE slot_name = $1`, s.Slot, s.System, why, to.String())
	if err != nil {
		return fmt.Errorf("marking slot %q as jumped in %s: %w", s.Slot, t, err)
	}
	return nil
}

// Raise is the relay's write-ahead step: it records `to` (a position
// Kafka acknowledged everything before) as the slot's confirmed_lsn,
// before the relay confirms it to the slot. In the same transaction it
// checks the slot against the record first: a slot found past it (moved
// by someone else since the last Raise) is marked jumped before the
// record moves, so the jump is never hidden by the relay's own progress.
// It returns the record after it and what was found ("" when nothing). A
// missing record is ErrNoRecord.
func Raise(ctx context.Context, conn *pgx.Conn, t Table, slot string, to pglogrepl.LSN) (Record, string, error) {
	var (
		out Record
		why string
	)
	err := inTx(ctx, conn, t, slot, func(tx pgx.Tx, s State) error {
		if s.Record == nil {
			return fmt.Errorf("%w %q in %s: it was deleted while the relay ran", ErrNoRecord, slot, t)
		}
		if why = s.Jumped(); why != "" {
			if err := markLocked(ctx, tx, t, s, why, s.SlotConfirmed); err != nil {
				return err
			}
		}
		var conf string
		q := `UPDATE ` + t.quoted() + ` SET confirmed_lsn = greatest(confirmed_lsn, $2::pg_lsn), updated_at = now()
			WHERE slot_name = $1 RETURNING confirmed_lsn::text`
		if s.Fences {
			q = raiseCovering(t)
		}
		err := tx.QueryRow(ctx, q, slot, to.String()).Scan(&conf)
		if err != nil {
			return fmt.Errorf("recording position %s of slot %q in %s: %w", to, slot, t, err)
		}
		out = *s.Record
		out.Confirmed, err = pglogrepl.ParseLSN(conf)
		return err
	})
	return out, why, err
}

// Created records a slot walrelay has just created at lsn (its
// confirmed_flush_lsn). Without a record it inserts one. With a record (a
// previous slot of this name walrelay confirmed through: the caller
// replaced it deliberately, slot create --replace), it marks the record
// jumped ("replaced by who") so that retention stays stopped until
// walrelay verify and walrelay slot adopt. It returns the state after it.
func Created(ctx context.Context, conn *pgx.Conn, t Table, slot string, lsn pglogrepl.LSN, who string) (State, error) {
	var out State
	err := inTx(ctx, conn, t, slot, func(tx pgx.Tx, s State) error {
		var err error
		if s.Record == nil {
			_, err = tx.Exec(ctx, `INSERT INTO `+t.quoted()+` (slot_name, system_identifier, confirmed_lsn, created_lsn, note)
				VALUES ($1, $2, $3::pg_lsn, $3::pg_lsn, $4)`, slot, s.System, lsn.String(), "created by "+who)
		} else {
			why := fmt.Sprintf("replaced by %s: a new slot was created at %s after walrelay had confirmed through the previous one up to %s", who, lsn, s.Record.Confirmed)
			if err = markLocked(ctx, tx, t, s, why, lsn); err == nil {
				accepted := ""
				if s.Fences {
					accepted = ", jump_accepted = true"
				}
				_, err = tx.Exec(ctx, `UPDATE `+t.quoted()+` SET created_lsn = $2::pg_lsn, note = $3`+accepted+` WHERE slot_name = $1`, slot, lsn.String(), "created by "+who)
			}
		}
		if err != nil {
			return fmt.Errorf("recording the creation of slot %q in %s: %w", slot, t, err)
		}
		out, err = Read(ctx, tx, t, slot)
		return err
	})
	return out, err
}

// Moved records a deliberate move of the slot to `to` by walrelay itself
// (slot advance, a Debezium takeover), BEFORE the caller moves the slot:
// the rows skipped were skipped on purpose. A slot without a record gets
// one at `to`.
func Moved(ctx context.Context, conn *pgx.Conn, t Table, slot string, to pglogrepl.LSN, note string) error {
	return inTx(ctx, conn, t, slot, func(tx pgx.Tx, s State) error {
		_, err := tx.Exec(ctx, `INSERT INTO `+t.quoted()+` AS r (slot_name, system_identifier, confirmed_lsn, note)
			VALUES ($1, $2, $3::pg_lsn, $4)
			ON CONFLICT (slot_name) DO UPDATE SET confirmed_lsn = greatest(r.confirmed_lsn, excluded.confirmed_lsn), note = excluded.note, updated_at = now()`,
			slot, s.System, to.String(), note)
		if err != nil {
			return fmt.Errorf("recording the move of slot %q to %s in %s: %w", slot, to, t, err)
		}
		return nil
	})
}

// Adopt makes the slot's current position walrelay's record again, after
// an operator checked with walrelay verify that nothing is missing: it
// clears the jump and notes who adopted it and when. The slot must exist
// and not be lost. It returns the state before and after.
func Adopt(ctx context.Context, conn *pgx.Conn, t Table, slot, who string) (before, after State, err error) {
	err = inTx(ctx, conn, t, slot, func(tx pgx.Tx, s State) error {
		before = s
		switch {
		case !s.SlotExists:
			return fmt.Errorf("%w: slot %q does not exist: create it first (`walrelay slot heal`, or `walrelay slot create %s --accept-gap`)", ErrRecorded, slot, slot)
		case s.SlotLost:
			return fmt.Errorf("%w: slot %q is lost (wal_status lost): drop it and create it again first (`walrelay slot drop %s`, `walrelay slot create %s --accept-gap`), or heal it: `walrelay slot heal`", ErrRecorded, slot, slot, slot)
		}
		accepted := ""
		if s.Fences {
			accepted = ", jump_accepted = NULL"
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+t.quoted()+` AS r (slot_name, system_identifier, confirmed_lsn, note, adopted_at, adopted_by)
			VALUES ($1, $2, $3::pg_lsn, 'adopted', now(), $4)
			ON CONFLICT (slot_name) DO UPDATE SET system_identifier = excluded.system_identifier,
				confirmed_lsn = CASE WHEN r.system_identifier = excluded.system_identifier THEN greatest(r.confirmed_lsn, excluded.confirmed_lsn) ELSE excluded.confirmed_lsn END,
				jumped_at = NULL, jump = NULL, jumped_from_lsn = NULL, note = 'adopted',
				adopted_at = now(), adopted_by = excluded.adopted_by, updated_at = now()`+accepted,
			slot, s.System, s.SlotConfirmed.String(), who)
		if err != nil {
			return fmt.Errorf("adopting slot %q in %s: %w", slot, t, err)
		}
		after, err = Read(ctx, tx, t, slot)
		return err
	})
	return before, after, err
}

// IsPrivilege reports a role that may not create or write the table.
func IsPrivilege(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42501"
}
