package postgres

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5"
)

// Slot is one replication slot as pg_replication_slots and
// pg_stat_activity report it, with lags computed by the server.
type Slot struct {
	Name     string `json:"name"`
	Plugin   string `json:"plugin"`    // "" for a physical slot
	SlotType string `json:"slot_type"` // logical or physical
	Database string `json:"database"`  // "" for a physical slot
	Active   bool   `json:"active"`
	// ActivePID is the backend holding the slot, 0 when none.
	ActivePID int32 `json:"active_pid"`
	// ClientAddr is the holder's client address ("local" for a Unix
	// socket), "" when none or not visible to this role.
	ClientAddr string `json:"client_addr"`
	// ClientApplication is the holder's application_name.
	ClientApplication string `json:"client_application"`
	RestartLSN        string `json:"restart_lsn"`
	ConfirmedFlushLSN string `json:"confirmed_flush_lsn"`
	// CurrentLSN is pg_current_wal_lsn() (the replay position on a standby).
	CurrentLSN string `json:"current_lsn"`
	// RestartLagBytes and ConfirmedFlushLagBytes are the bytes from each
	// position to CurrentLSN; null when the position is null.
	RestartLagBytes        *int64 `json:"restart_lag_bytes"`
	ConfirmedFlushLagBytes *int64 `json:"confirmed_flush_lag_bytes"`
	// WALStatus is reserved, extended, unreserved or lost.
	WALStatus string `json:"wal_status"`
	// SafeWALSizeBytes is null when max_slot_wal_keep_size is unlimited.
	SafeWALSizeBytes *int64 `json:"safe_wal_size_bytes"`
	Temporary        bool   `json:"temporary"`
	// Failover is whether Postgres synchronizes the slot to standbys
	// running with sync_replication_slots=on (postgres.slot_failover);
	// null before PostgreSQL 17.
	Failover *bool `json:"failover"`
	// Synced is, on a standby, whether the slot is a copy the slot sync
	// worker keeps from the primary's failover slot: nothing can stream
	// from it until the standby is promoted. Null before PostgreSQL 17.
	Synced *bool `json:"synced"`
}

var slotNameRe = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// ValidateSlotName checks a slot name as Postgres would (lowercase
// letters, digits and underscores, at most 63); the error wraps ErrBadName.
func ValidateSlotName(name string) error {
	if !slotNameRe.MatchString(name) {
		return fmt.Errorf("%w: slot name %q: slot names are 1-63 lowercase letters, digits and underscores", ErrBadName, name)
	}
	return nil
}

const slotQuery = `
SELECT s.slot_name::text, coalesce(s.plugin::text, ''), s.slot_type, coalesce(s.database::text, ''),
       s.active, coalesce(s.active_pid, 0),
       coalesce(CASE WHEN a.pid IS NULL THEN NULL WHEN a.client_addr IS NULL AND a.client_port = -1 THEN 'local' ELSE host(a.client_addr) END, ''),
       coalesce(a.application_name, ''),
       coalesce(s.restart_lsn::text, ''), coalesce(s.confirmed_flush_lsn::text, ''), w.lsn::text,
       pg_wal_lsn_diff(w.lsn, s.restart_lsn)::int8, pg_wal_lsn_diff(w.lsn, s.confirmed_flush_lsn)::int8,
       coalesce(s.wal_status, ''), s.safe_wal_size, s.temporary,
       (to_jsonb(s) ->> 'failover')::bool, (to_jsonb(s) ->> 'synced')::bool -- PostgreSQL 17+, null before
FROM pg_replication_slots s
CROSS JOIN (SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END AS lsn) w
LEFT JOIN pg_stat_activity a ON a.pid = s.active_pid
WHERE $1::text IS NULL OR s.slot_name = $1
ORDER BY s.slot_name`

func scanSlot(row pgx.CollectableRow) (Slot, error) {
	var s Slot
	err := row.Scan(&s.Name, &s.Plugin, &s.SlotType, &s.Database, &s.Active, &s.ActivePID,
		&s.ClientAddr, &s.ClientApplication, &s.RestartLSN, &s.ConfirmedFlushLSN, &s.CurrentLSN,
		&s.RestartLagBytes, &s.ConfirmedFlushLagBytes, &s.WALStatus, &s.SafeWALSizeBytes, &s.Temporary,
		&s.Failover, &s.Synced)
	return s, err
}

// ListSlots returns every replication slot of the server, by name.
func ListSlots(ctx context.Context, conn *pgx.Conn) ([]Slot, error) {
	rows, err := conn.Query(ctx, slotQuery, nil)
	if err != nil {
		return nil, QueryError("listing replication slots", "grant the role pg_monitor", err)
	}
	slots, err := pgx.CollectRows(rows, scanSlot)
	if err != nil {
		return nil, QueryError("listing replication slots", "grant the role pg_monitor", err)
	}
	return slots, nil
}

// InspectSlot returns one slot; the error wraps ErrSlotNotFound when there
// is none with this name.
func InspectSlot(ctx context.Context, conn *pgx.Conn, name string) (Slot, error) {
	if err := ValidateSlotName(name); err != nil {
		return Slot{}, err
	}
	rows, err := conn.Query(ctx, slotQuery, name)
	if err != nil {
		return Slot{}, QueryError(fmt.Sprintf("reading replication slot %q", name), "grant the role pg_monitor", err)
	}
	s, err := pgx.CollectExactlyOneRow(rows, scanSlot)
	if errors.Is(err, pgx.ErrNoRows) {
		return Slot{}, fmt.Errorf("%w: %q: list the slots with `walrelay slot list`, or create it with `walrelay slot create %s` (or `walrelay setup`)", ErrSlotNotFound, name, name)
	}
	if err != nil {
		return Slot{}, QueryError(fmt.Sprintf("reading replication slot %q", name), "grant the role pg_monitor", err)
	}
	return s, nil
}

// CurrentDatabase returns the session's database.
func CurrentDatabase(ctx context.Context, conn *pgx.Conn) (string, error) {
	var db string
	if err := conn.QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil {
		return "", QueryError("reading the current database", "", err)
	}
	return db, nil
}

// Problem says why walrelay cannot stream from s in database db (another
// plugin, another database, a physical slot), or "" when it can.
func (s Slot) Problem(db string) string {
	switch {
	case s.SlotType != "logical":
		return fmt.Sprintf("slot %q is a %s slot; walrelay needs a logical slot with plugin pgoutput (create one with `walrelay slot create NAME`)", s.Name, s.SlotType)
	case s.Plugin != "pgoutput":
		return fmt.Sprintf("slot %q uses plugin %q; walrelay reads only pgoutput slots (create one with `walrelay slot create NAME` and set postgres.slot)", s.Name, s.Plugin)
	case s.Database != db:
		return fmt.Sprintf("slot %q belongs to database %q, not %q: connect to %q in postgres.dsn, or create a slot in this database", s.Name, s.Database, db, s.Database)
	}
	return ""
}

// ActiveError is the error for slot s held by a process (s.Active): who
// holds it, and hint, the fix. It wraps ErrSlotActive.
func ActiveError(s Slot, hint string) error {
	who := ""
	if s.ClientAddr != "" {
		who = " at " + s.ClientAddr
	}
	if s.ClientApplication != "" {
		who += " (" + s.ClientApplication + ")"
	}
	return fmt.Errorf("%w: slot %q is in use by pid %d%s; %s", ErrSlotActive, s.Name, s.ActivePID, who, hint)
}

// CreateSlot creates a logical slot with plugin pgoutput and returns it;
// with failover, a failover slot (PostgreSQL 17+: decide with
// SlotFailover).
func CreateSlot(ctx context.Context, conn *pgx.Conn, name string, failover bool) (Slot, error) {
	if err := ValidateSlotName(name); err != nil {
		return Slot{}, err
	}
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)`, name).Scan(&exists); err != nil {
		return Slot{}, QueryError("looking up replication slots", "", err)
	}
	if exists {
		return Slot{}, fmt.Errorf("%w: %q: inspect it with `walrelay slot inspect %s`, or pick another name", ErrSlotExists, name, name)
	}
	create := `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`
	if failover {
		create = `SELECT pg_create_logical_replication_slot($1, 'pgoutput', failover => true)`
	}
	if _, err := conn.Exec(ctx, create, name); err != nil {
		if ex := ExplainSlotError(ctx, conn, name, err); ex != err {
			return Slot{}, ex
		}
		return Slot{}, QueryError(fmt.Sprintf("creating replication slot %q", name), PrivilegeFix(ctx, conn), err)
	}
	return InspectSlot(ctx, conn, name)
}

// PrivilegeFix is the fix for a role that may not use replication slots,
// in the terms of the managed service the server belongs to
// (managed.go).
func PrivilegeFix(ctx context.Context, conn *pgx.Conn) string {
	u := CurrentUser(ctx, conn)
	m := DetectService(ctx, conn)
	if m == nil {
		return fmt.Sprintf("the role %q needs the REPLICATION attribute (ALTER ROLE %s REPLICATION)", u, pgx.Identifier{u}.Sanitize())
	}
	return fmt.Sprintf("the role %q needs replication on %s: %s", u, m.Name, m.RoleFix(u))
}

// CurrentLSN returns pg_current_wal_lsn() (the replay position on a standby).
func CurrentLSN(ctx context.Context, conn *pgx.Conn) (string, error) {
	var lsn string
	err := conn.QueryRow(ctx, `SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END)::text`).Scan(&lsn)
	if err != nil {
		return "", QueryError("reading the current WAL position", "", err)
	}
	return lsn, nil
}
