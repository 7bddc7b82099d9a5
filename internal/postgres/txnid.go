package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// This file reads what exactly-once delivery's transactional id is
// derived from (walrelay run, walrelay check and status use it).

// TxnID is the transactional id of exactly-once delivery as walrelay run
// derives it on a server, with what it is derived from.
type TxnID struct {
	// ID is the transactional id, and the key of the relay's checkpoint
	// records: kafka.transactional_id, or
	// walrelay-<database>-<slot>-<system identifier>.
	ID string
	// Database and SystemID are the server's (current_database(),
	// pg_control_system()'s system_identifier).
	Database, SystemID string
}

// TxnIDRule derives the transactional id from the server's database and
// system identifier: config.Config (its TransactionalID method), taken as
// this interface so that this package does not import internal/config.
type TxnIDRule interface {
	TransactionalID(database, systemID string) string
}

// TransactionalID reads what the transactional id is derived from on conn's
// server and returns it (config.Config.TransactionalID).
func TransactionalID(ctx context.Context, conn *pgx.Conn, cfg TxnIDRule) (TxnID, error) {
	db, err := CurrentDatabase(ctx, conn)
	if err != nil {
		return TxnID{}, err
	}
	sys, err := SystemID(ctx, conn)
	if err != nil {
		return TxnID{}, err
	}
	return TxnID{ID: cfg.TransactionalID(db, sys), Database: db, SystemID: sys}, nil
}

// SystemID returns the server's system identifier (pg_control_system()),
// the one IDENTIFY_SYSTEM reports: set by initdb, the same on every
// physical standby of the cluster and kept by a promoted one.
func SystemID(ctx context.Context, conn *pgx.Conn) (string, error) {
	var id string
	if err := conn.QueryRow(ctx, `SELECT system_identifier::text FROM pg_control_system()`).Scan(&id); err != nil {
		return "", QueryError("reading the system identifier", "", err)
	}
	return id, nil
}
