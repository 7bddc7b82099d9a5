// Package pgcatalog reads what Postgres's catalog knows of a table's
// columns and a pgoutput Relation message does not carry: NOT NULL and
// the DEFAULT expression, on which Debezium's Connect schemas depend.
//
// In: a normal *pgx.Conn and table OIDs. Out: Columns, the router's
// router.Column per table, and Complete, which adds them to a
// router.Relation. It is apart from internal/postgres so that the
// Postgres package does not import the router; internal/relay (streamed
// relations, the snapshot) and internal/reconcile (verify) use it.
//
// It does not route, write or hold a connection.
package pgcatalog

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/router"
)

// Columns holds, per table OID, the table's columns as the catalog
// describes them, in column order: what a pgoutput Relation message
// carries (name, type, modifier) and what it lacks (NOT NULL, the
// DEFAULT expression), which the converters' Connect schemas depend on.
type Columns map[uint32][]router.Column

// ReadColumns reads the columns of the tables with the given OIDs. The
// DEFAULT is pg_get_expr's text, what the JDBC driver gives Debezium as
// COLUMN_DEF, printed (in a transaction of its own) with DateStyle ISO and
// TimeZone UTC, as pgjdbc's session prints it, whatever conn's settings.
func ReadColumns(ctx context.Context, conn *pgx.Conn, oids []uint32) (Columns, error) {
	out := Columns{}
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL DateStyle = 'ISO'; SET LOCAL TimeZone = 'UTC'`); err != nil {
			return err
		}
		return readColumns(ctx, tx, oids, out)
	})
	if err != nil {
		return nil, fmt.Errorf("reading table columns: %w", err)
	}
	return out, nil
}

// readColumns runs ReadColumns' query.
func readColumns(ctx context.Context, tx pgx.Tx, oids []uint32, out Columns) error {
	rows, err := tx.Query(ctx, `
		SELECT a.attrelid::int8, a.attname::text, a.atttypid::int8, a.atttypmod, a.attnotnull,
		       pg_get_expr(d.adbin, d.adrelid)
		FROM pg_attribute a
		JOIN pg_class c ON c.oid = a.attrelid
		LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'p')
		  AND a.attrelid = ANY($1::oid[])
		  AND c.relnamespace NOT IN (SELECT oid FROM pg_namespace WHERE nspname IN ('pg_catalog', 'information_schema'))
		ORDER BY a.attrelid, a.attnum`, oids)
	if err != nil {
		return err
	}
	var (
		rel, typ int64
		def      *string
		c        router.Column
	)
	_, err = pgx.ForEachRow(rows, []any{&rel, &c.Name, &typ, &c.TypeModifier, &c.NotNull, &def}, func() error {
		c.TypeOID = uint32(typ)
		c.Default, c.HasDefault = "", def != nil
		if def != nil {
			c.Default = *def
		}
		out[uint32(rel)] = append(out[uint32(rel)], c)
		return nil
	})
	return err
}

// Complete adds to rel's columns what the catalog knows and the Relation
// message does not (NOT NULL, DEFAULT), matching columns by name. A column
// cs does not have is left nullable and without a default.
func (cs Columns) Complete(rel router.Relation) router.Relation {
	known := cs[rel.ID]
	for i := range rel.Columns {
		for _, k := range known {
			if k.Name == rel.Columns[i].Name {
				rel.Columns[i].NotNull, rel.Columns[i].Default, rel.Columns[i].HasDefault = k.NotNull, k.Default, k.HasDefault
				break
			}
		}
	}
	return rel
}
