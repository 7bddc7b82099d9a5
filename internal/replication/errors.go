package replication

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrUnknownRelation is returned when a row arrives for a relation the
// session has not announced: a protocol violation, never retried.
var ErrUnknownRelation = errors.New("row for an unannounced relation")

// ErrSlotMissing is returned when the slot does not exist: never retried.
var ErrSlotMissing = errors.New("replication slot does not exist")

// ErrSlotActive is returned when another process streams from the slot.
// The session is retried with backoff: a standby waits this way for the
// slot.
var ErrSlotActive = errors.New("replication slot is active in another process")

// ErrSlotSynced is returned when the slot is, on a standby, a copy that
// Postgres's slot sync worker keeps from the primary's failover slot
// (PostgreSQL 17+, sync_replication_slots): Postgres lets nothing decode
// from it until the standby is promoted. The session is retried with
// backoff, and Run logs the wait once: a relay pointed at a standby
// starts streaming when it is promoted.
var ErrSlotSynced = errors.New("replication slot is a synchronized copy on a standby")

// ErrServerTooOld is returned when the server is older than PostgreSQL 14,
// whose pgoutput is the first to take the messages option walrelay starts
// replication with (heartbeats, the table-less outbox): never retried.
var ErrServerTooOld = errors.New("walrelay needs PostgreSQL 14 or newer")

// ErrRestartSession is returned (wrapped) by a Handler to end the session
// and start a new one, as after a lost connection: the stream calls
// SessionLost, reconnects after MinBackoff, and the new session's
// SessionStart sees the slot where it is; Postgres sends again everything
// after the slot's confirmed position. A Handler returns it when it must
// read again what the session already sent (walrelay: a checkpoint it
// skipped by turned out not to belong to this WAL).
var ErrRestartSession = errors.New("the handler restarts the replication session")

// HandlerError wraps an error returned by the Handler. Run never retries
// it: the Handler decided the stream must stop (for example a row its
// configuration says must halt the relay).
type HandlerError struct {
	LSN pglogrepl.LSN // WAL position of the message being handled
	Err error
}

func (e *HandlerError) Error() string { return fmt.Sprintf("handling change at %s: %v", e.LSN, e.Err) }
func (e *HandlerError) Unwrap() error { return e.Err }

// detailError is a session error with the DETAIL of the server error in
// it, which pgconn.PgError.Error leaves out and which often says why
// ("This replication slot is being synchronized from the primary
// server."). Run adds it (withDetail) to every error it logs, stores for
// LastError or returns.
type detailError struct {
	err    error
	detail string
}

func (e *detailError) Error() string { return e.err.Error() + " (DETAIL: " + e.detail + ")" }
func (e *detailError) Unwrap() error { return e.err }

// withDetail returns err with its server error's DETAIL (detailError),
// or err itself when it has none or already shows it.
func withDetail(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Detail == "" || strings.Contains(err.Error(), pgErr.Detail) {
		return err
	}
	return &detailError{err: err, detail: pgErr.Detail}
}

// permanentError marks an error that retrying cannot fix.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

func permanent(err error) error { return permanentError{err} }

// retryable reports whether a session error is worth a reconnect: network
// failures, server restarts, a slot briefly held by another process, too
// many walsenders, a Handler restarting the session (ErrRestartSession).
// Authentication failures, missing slots, publications or
// databases, and Handler errors are not.
func retryable(err error) bool {
	if err == nil || errors.Is(err, ErrRestartSession) {
		return true
	}
	var (
		perm permanentError
		he   *HandlerError
	)
	if errors.As(err, &perm) || errors.As(err, &he) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case "28", // invalid authorization
			"3D", // invalid catalog name (no such database)
			"42": // undefined object (slot, publication), insufficient privilege
			return false
		}
		if pgErr.Code == "0A000" { // feature not supported (wrong plugin, old server)
			return false
		}
	}
	return true
}
