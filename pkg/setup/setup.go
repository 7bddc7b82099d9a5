// Package setup creates what walrelay needs in Postgres: the outbox table
// (sql/001_outbox_table.sql), the publication (INSERTs only) and the
// logical replication slot. It is idempotent: each object that already
// exists is reported and left alone.
//
// In: a connection and the names from config. Out: one Step per object,
// saying whether it was created or already existed.
//
// Identifiers are quoted with pgx's Identifier.Sanitize; values are passed
// as parameters. It does not create roles or grant privileges (see
// sql/004_role.sql): that is a DBA's decision.
package setup

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	sqlfiles "github.com/walrelay/walrelay/sql"
)

// Step is the outcome for one object.
type Step struct {
	Object  string // "table", "publication" or "slot"
	Name    string
	Created bool // false: it already existed
}

func (s Step) String() string {
	state := "already exists"
	if s.Created {
		state = "created"
	}
	return fmt.Sprintf("%-11s %-30s %s", s.Object, s.Name, state)
}

// Names are the objects to create.
type Names struct {
	Schema, Table string // the outbox table
	Publication   string
	Slot          string
}

// Run creates what is missing, in order: table, publication, slot. It
// stops at the first error, returning the steps done so far.
func Run(ctx context.Context, conn *pgx.Conn, n Names) ([]Step, error) {
	var steps []Step
	table := pgx.Identifier{n.Schema, n.Table}.Sanitize()

	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists); err != nil {
		return steps, fmt.Errorf("looking up table %s: %w", table, err)
	}
	if !exists {
		if !strings.Contains(sqlfiles.OutboxTable, sqlfiles.CreateOutboxTable) {
			return steps, fmt.Errorf("sql/001_outbox_table.sql no longer starts its statement with %q", sqlfiles.CreateOutboxTable)
		}
		ddl := strings.Replace(sqlfiles.OutboxTable, sqlfiles.CreateOutboxTable, "CREATE TABLE IF NOT EXISTS "+table+" (", 1)
		if _, err := conn.Exec(ctx, ddl); err != nil {
			return steps, fmt.Errorf("creating table %s: %w", table, err)
		}
	}
	steps = append(steps, Step{Object: "table", Name: n.Schema + "." + n.Table, Created: !exists})

	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)`, n.Publication).Scan(&exists); err != nil {
		return steps, fmt.Errorf("looking up publication %q: %w", n.Publication, err)
	}
	if !exists {
		stmt := fmt.Sprintf(`CREATE PUBLICATION %s FOR TABLE %s WITH (publish = 'insert')`, pgx.Identifier{n.Publication}.Sanitize(), table)
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return steps, fmt.Errorf("creating publication %q: %w", n.Publication, err)
		}
	}
	steps = append(steps, Step{Object: "publication", Name: n.Publication, Created: !exists})

	// Slots are cluster-wide: one of this name may belong to another
	// database or plugin, and must not be reported as ours.
	var plugin, database, current string
	err := conn.QueryRow(ctx, `SELECT coalesce(s.plugin, ''), coalesce(s.database, ''), current_database()
		FROM (SELECT 1) one LEFT JOIN pg_replication_slots s ON s.slot_name = $1`, n.Slot).Scan(&plugin, &database, &current)
	if err != nil {
		return steps, fmt.Errorf("looking up slot %q: %w", n.Slot, err)
	}
	exists = database != ""
	switch {
	case exists && database != current:
		return steps, fmt.Errorf("replication slot %q already exists in database %q, not %q: choose another postgres.slot (slot names are cluster-wide)", n.Slot, database, current)
	case exists && plugin != "pgoutput":
		return steps, fmt.Errorf("replication slot %q already exists with plugin %q: walrelay needs pgoutput; choose another postgres.slot", n.Slot, plugin)
	}
	if !exists {
		if _, err := conn.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, n.Slot); err != nil {
			return steps, fmt.Errorf("creating replication slot %q: %w", n.Slot, err)
		}
	}
	steps = append(steps, Step{Object: "slot", Name: n.Slot, Created: !exists})
	return steps, nil
}
