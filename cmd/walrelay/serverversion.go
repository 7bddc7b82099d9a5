package main

import (
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/replication"
)

// refuseOldServer returns an error when conn's server is older than
// PostgreSQL 14, which walrelay run refuses (replication.ErrServerTooOld):
// setup and slot create call it before creating anything, so that they
// never leave a table, publication or slot (one that holds WAL for ever)
// that run will not read. (walrelay check reports the version as a failed
// item among the others.) what names the command in the message.
func refuseOldServer(conn *pgx.Conn, what string) error {
	if err := replication.CheckServerVersion(conn.PgConn().ParameterStatus("server_version")); err != nil {
		return fmt.Errorf("%s: %w (nothing was created)", what, err)
	}
	return nil
}
