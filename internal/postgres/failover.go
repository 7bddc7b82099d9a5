package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/pgsession"
)

// This file makes walrelay's slot a failover slot (PostgreSQL 17+,
// postgres.slot_failover): Postgres's slot sync worker copies such a slot
// to every standby running with sync_replication_slots=on, so that after a
// failover the promoted standby has it at a position no later than what
// walrelay confirmed, and walrelay carries on from there instead of
// finding no slot. checkfailover.go reports on the setup around it.

// postgres.slot_failover's values that SlotFailover tells apart, spelled
// as config.FailoverTrue and config.FailoverFalse (this package does not
// import internal/config; TestFailoverModes checks they agree).
const (
	failoverTrue  = "true"
	failoverFalse = "false"
)

// FailoverMajor is the first PostgreSQL with failover slots.
const FailoverMajor = 17

// ServerRole is what decides whether a failover slot is possible: the
// major version and whether the server is a standby.
type ServerRole struct {
	Major    int    // the major version: 17
	Version  string // server_version: "17.2"
	Recovery bool   // pg_is_in_recovery(): a standby
}

// ReadServerRole reads the server role of conn's server.
func ReadServerRole(ctx context.Context, conn *pgx.Conn) (ServerRole, error) {
	var r ServerRole
	err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int / 10000, current_setting('server_version'), pg_is_in_recovery()`).
		Scan(&r.Major, &r.Version, &r.Recovery)
	if err != nil {
		return r, QueryError("reading the server's version and role", "", err)
	}
	return r, nil
}

// SlotFailover decides, for postgres.slot_failover mode and the server
// conn is connected to, whether walrelay's slot is to be a failover slot.
// auto: on a PostgreSQL 17+ primary, and otherwise off with why saying so
// (for a log line or a report); true: the same, but a server that cannot
// (older than 17, or a standby, where Postgres refuses failover for a slot
// created there) is an error wrapping ErrFailoverUnsupported; false:
// never.
func SlotFailover(ctx context.Context, conn *pgx.Conn, mode string) (on bool, why string, err error) {
	if mode == failoverFalse {
		return false, "", nil
	}
	r, err := ReadServerRole(ctx, conn)
	if err != nil {
		return false, "", err
	}
	switch {
	case r.Major < FailoverMajor:
		why = fmt.Sprintf("PostgreSQL %s has no failover slots (PostgreSQL %d added them): a failover to a standby loses the slot (docs/deploy.md, Failover slots)", r.Version, FailoverMajor)
	case r.Recovery:
		why = "this server is a standby, and Postgres makes failover slots only on a primary"
	default:
		return true, "", nil
	}
	if mode == failoverTrue {
		return false, why, fmt.Errorf("%w: postgres.slot_failover=true, but %s: set postgres.slot_failover=auto (failover where the server supports it) or false, or point postgres.dsn at a PostgreSQL %d+ primary",
			ErrFailoverUnsupported, why, FailoverMajor)
	}
	return false, why, nil
}

// alterWait bounds ALTER_REPLICATION_SLOT, which waits for a process
// holding the slot to let it go.
const alterWait = 10 * time.Second

// EnableFailover switches failover on for the existing slot name with the
// replication command ALTER_REPLICATION_SLOT name (FAILOVER true)
// (PostgreSQL 17+), on a replication connection of its own opened with
// conn's configuration. Postgres refuses it for a temporary slot and on a
// standby, and waits while a process streams from the slot: a slot held
// now, or still held after alterWait, is an error wrapping ErrSlotActive.
func EnableFailover(ctx context.Context, conn *pgx.Conn, name string) error {
	if err := ValidateSlotName(name); err != nil {
		return err
	}
	what := fmt.Sprintf("switching failover on for replication slot %q (ALTER_REPLICATION_SLOT)", name)
	var pid *int32
	err := conn.QueryRow(ctx, `SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1`, name).Scan(&pid)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: %s: %q", ErrSlotNotFound, what, name)
	case err != nil:
		return QueryError(what, "", err)
	case pid != nil:
		return fmt.Errorf("%w: %s: pid %d streams from it, and Postgres switches only a slot nobody holds", ErrSlotActive, what, *pid)
	}
	cfg := conn.Config().Config.Copy()
	cfg.RuntimeParams["application_name"] = "walrelay"
	rc, err := pgsession.ConnectReplication(ctx, cfg)
	if err != nil {
		return fmt.Errorf("%w: connecting for replication: %s: %s", ErrConnect, what, redactConnString(err.Error()))
	}
	defer rc.Close(context.WithoutCancel(ctx)) //nolint:errcheck // nothing left to do on this connection
	actx, cancel := context.WithTimeout(ctx, alterWait)
	defer cancel()
	// A slot name is validated above: lowercase letters, digits and
	// underscores, which need no quoting.
	_, err = rc.Exec(actx, "ALTER_REPLICATION_SLOT "+name+" ( FAILOVER true )").ReadAll()
	switch {
	case err != nil && ctx.Err() == nil && actx.Err() != nil:
		return fmt.Errorf("%w: %s: a process took the slot and still holds it after %s", ErrSlotActive, what, alterWait)
	case err != nil:
		return QueryError(what, PrivilegeFix(ctx, conn), err)
	}
	return nil
}

// FailoverResult is what EnsureFailover did to an existing slot.
type FailoverResult int

const (
	FailoverUnchanged FailoverResult = iota // failover was already as wanted, or is not wanted
	FailoverSwitched                        // failover was off and EnableFailover switched it on
)

// EnsureFailover switches failover on for s when mode wants a failover
// slot on this server (SlotFailover) and s has it off. It never switches
// failover off: a slot someone made a failover slot stays one. An
// invalidated slot (wal_status lost) is left to whoever reports it. A slot
// in use is an error wrapping ErrSlotActive.
func EnsureFailover(ctx context.Context, conn *pgx.Conn, s Slot, mode string) (FailoverResult, error) {
	want, _, err := SlotFailover(ctx, conn, mode)
	if err != nil || !want || s.Failover == nil || *s.Failover || s.WALStatus == "lost" {
		return FailoverUnchanged, err
	}
	if err := EnableFailover(ctx, conn, s.Name); err != nil {
		return FailoverUnchanged, err
	}
	return FailoverSwitched, nil
}

// pgMessage is a server error's message with its DETAIL, which says why
// (pgconn.PgError.Error leaves it out): "cannot use replication slot
// "walrelay" for logical decoding (DETAIL: This replication slot is being
// synchronized from the primary server.)".
func pgMessage(pgErr *pgconn.PgError) string {
	if pgErr.Detail == "" {
		return pgErr.Message
	}
	return pgErr.Message + " (DETAIL: " + pgErr.Detail + ")"
}

// SyncedCopy reports whether the slot name, on the server conn is
// connected to, is a copy the slot sync worker keeps on a standby
// (pg_replication_slots.synced on a server in recovery, PostgreSQL 17+):
// Postgres refuses to decode from it until the standby is promoted. False
// when there is no such slot, on a primary and before PostgreSQL 17.
func SyncedCopy(ctx context.Context, conn *pgx.Conn, name string) (bool, error) {
	var synced bool
	err := conn.QueryRow(ctx, `SELECT pg_is_in_recovery() AND coalesce((SELECT (to_jsonb(s) ->> 'synced')::bool FROM pg_replication_slots s WHERE s.slot_name = $1), false)`, name).Scan(&synced)
	if err != nil {
		return false, QueryError(fmt.Sprintf("reading replication slot %q", name), "", err)
	}
	return synced, nil
}

// SyncedCopyText says what a synchronized copy of slot on a standby means
// for walrelay run, in the words its log line and /readyz use.
func SyncedCopyText(slot string) string {
	return fmt.Sprintf("slot %q on this standby is a synchronized copy of the primary's failover slot (sync_replication_slots); it becomes usable when this server is promoted", slot)
}
