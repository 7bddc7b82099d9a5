// Package pgsession opens every Postgres connection walrelay makes, normal
// (pgx) and replication (pgconn with replication=database), with the one
// set of session settings that make Postgres print values as walrelay's
// replication stream receives them.
//
// Why one place: pgoutput formats a row's values with the walsender's
// output functions, so with that session's DateStyle, TimeZone,
// bytea_output and extra_float_digits; the router parses that text. The
// other places walrelay reads values as text (the initial snapshot and
// the heal, verify and its republisher, `walrelay slot peek`, whose
// pgoutput runs in the peeking session) must see the same text, or a row
// would route or convert differently than when it streamed. The settings
// are pinned on every connection, whatever the DSN, the role or the
// database set.
//
// In: a DSN, or a parsed pgx or pgconn config with the caller's own
// run-time parameters (application_name, statement_timeout, ...) and
// hooks (DialFunc, BuildFrontend). Out: the connection, or the driver's
// error unchanged (internal/postgres explains it).
//
// It does not retry, pool or explain errors. A leaf: it imports no
// walrelay package, so that internal/replication may use it
// (cmd/walrelay's TestDesignMap); TestOneConnect there fails when another
// production package calls pgx's or pgconn's connect functions itself.
package pgsession

import (
	"context"
	"maps"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Settings returns the session settings every walrelay connection pins:
// ISO dates, UTC times, hex bytea and the shortest exact float text
// (extra_float_digits=3; any value above 0 means that since PostgreSQL 12,
// but a database or role may set 0 or less, which rounds). A new map on
// each call.
func Settings() map[string]string {
	return map[string]string{
		"DateStyle":          "ISO",
		"TimeZone":           "UTC",
		"bytea_output":       "hex",
		"extra_float_digits": "3",
	}
}

// Connect opens a normal connection to dsn with Settings, as pgx.Connect
// would otherwise (the DSN's own parameters kept).
func Connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	return ConnectConfig(ctx, cfg)
}

// ConnectConfig opens a normal connection with cfg and Settings over its
// run-time parameters. cfg is not modified.
func ConnectConfig(ctx context.Context, cfg *pgx.ConnConfig) (*pgx.Conn, error) {
	cfg = cfg.Copy()
	maps.Copy(cfg.RuntimeParams, Settings())
	return pgx.ConnectConfig(ctx, cfg)
}

// ConnectReplication opens a logical replication connection
// (replication=database) with cfg and Settings over its run-time
// parameters. cfg is not modified.
func ConnectReplication(ctx context.Context, cfg *pgconn.Config) (*pgconn.PgConn, error) {
	cfg = cfg.Copy()
	cfg.RuntimeParams["replication"] = "database"
	maps.Copy(cfg.RuntimeParams, Settings())
	return pgconn.ConnectConfig(ctx, cfg)
}
