package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ExplainSlotError says, for an error creating logical slot slot on conn,
// the cause and the fix in the words of walrelay check (internal/operator): wal_level below
// logical (SQLSTATE 55000, "logical decoding requires wal_level >=
// logical"), with the fix for the managed service the server belongs to,
// and a role without REPLICATION (42501, ErrPrivilege). Other errors are
// returned unchanged.
func ExplainSlotError(ctx context.Context, conn *pgx.Conn, slot string, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	what := fmt.Sprintf("creating replication slot %q", slot)
	switch pgErr.Code {
	case "55000": // object_not_in_prerequisite_state
		var level string
		if qerr := conn.QueryRow(ctx, `SELECT current_setting('wal_level')`).Scan(&level); qerr != nil || level == "logical" {
			return err
		}
		return fmt.Errorf("%s: wal_level is %s; logical decoding needs logical: %s (then run again)", what, level, DetectService(ctx, conn).WALLevelFix())
	case "42501":
		return QueryError(what, PrivilegeFix(ctx, conn), err)
	}
	return err
}
