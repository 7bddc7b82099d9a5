package setup

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/config"
)

// AddTableError is returned by Run when ALTER PUBLICATION ... ADD TABLE
// fails. Err is the server's: 42501 when the role does not own the table
// (adding a table to a publication requires owning it, besides owning the
// publication).
type AddTableError struct {
	Publication string
	Table       string // as postgres.table writes it: schema.name
	Err         error
}

func (e *AddTableError) Error() string {
	return fmt.Sprintf("adding table %s to publication %q: %v", e.Table, e.Publication, e.Err)
}

func (e *AddTableError) Unwrap() error { return e.Err }

// ensurePublication creates publication pub for every table when it is
// missing. When it exists, it adds each table it does not publish yet, one
// ALTER PUBLICATION ... ADD TABLE and one step per table: the rows of the
// tables it already publishes go on being decoded (pgoutput's cache of
// what is published is invalidated, not the slot), and the added table's
// rows are decoded from the ALTER's commit on. A partitioned table added
// to a publication that publishes partitions under their own names is
// preceded by SET (publish_via_partition_root = true), without which the
// relay refuses the publication (its rows would arrive under the
// partitions' names). Warning steps say which rows of an added table the
// stream will not carry (addTable, decodingWarning). partitioned[i] says
// whether tables[i] is partitioned.
func ensurePublication(ctx context.Context, conn *pgx.Conn, pub string, tables []config.TableName, partitioned []bool) ([]Step, error) {
	var (
		oid               uint32
		allTables, byRoot bool
	)
	err := conn.QueryRow(ctx, `SELECT oid, puballtables, pubviaroot FROM pg_publication WHERE pubname = $1`, pub).Scan(&oid, &allTables, &byRoot)
	if errors.Is(err, pgx.ErrNoRows) {
		return createPublication(ctx, conn, pub, tables, partitioned)
	}
	if err != nil {
		return nil, fmt.Errorf("looking up publication %q: %w", pub, err)
	}
	if allTables {
		return []Step{{Object: "publication", Name: pub}}, nil
	}
	var missing []int
	for i, t := range tables {
		in, err := publishes(ctx, conn, oid, t)
		if err != nil {
			return nil, fmt.Errorf("reading the tables of publication %q: %w", pub, err)
		}
		if !in {
			missing = append(missing, i)
		}
	}
	if len(missing) == 0 {
		return []Step{{Object: "publication", Name: pub}}, nil
	}

	var steps []Step
	if !byRoot {
		for _, i := range missing {
			if !partitioned[i] {
				continue
			}
			if _, err := conn.Exec(ctx, `ALTER PUBLICATION `+pgx.Identifier{pub}.Sanitize()+` SET (publish_via_partition_root = true)`); err != nil {
				return steps, fmt.Errorf("making publication %q publish through the partition root (to add partitioned table %s): %w", pub, tables[i], err)
			}
			steps = append(steps, Step{Object: "publication", Name: pub, Created: true, Note: "publish_via_partition_root switched on"})
			break
		}
	}
	w, err := decodingWarning(ctx, conn, tables, missing)
	if err != nil {
		return steps, err
	}
	if w != nil {
		steps = append(steps, *w)
	}
	for _, i := range missing {
		s, err := addTable(ctx, conn, pub, tables[i])
		steps = append(steps, s...)
		if err != nil {
			return steps, err
		}
	}
	return steps, nil
}

// addTable adds t to publication pub, and warns of the rows of t the
// stream will not carry: those committed before (t already holds rows),
// and those written before the ALTER by a transaction still open when it
// commits. pgoutput decodes each change with the catalog of its place in
// the WAL, where t was not published yet, so such a transaction's earlier
// rows are not streamed even though it commits after the ALTER (seen on
// PostgreSQL 14 to 18). The open transactions are those holding a write
// lock on t or one of its partitions just before the ALTER's commit; one
// that takes its first lock in between goes unnoticed (a short window:
// the warning is a help, not a proof).
func addTable(ctx context.Context, conn *pgx.Conn, pub string, t config.TableName) ([]Step, error) {
	table := pgx.Identifier{t.Schema, t.Name}.Sanitize()
	var (
		pids []int32
		rows bool
	)
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `ALTER PUBLICATION `+pgx.Identifier{pub}.Sanitize()+` ADD TABLE `+table); err != nil {
			return &AddTableError{Publication: pub, Table: t.String(), Err: err}
		}
		r, err := tx.Query(ctx, `SELECT DISTINCT l.pid FROM pg_locks l
			WHERE l.locktype = 'relation' AND l.mode = 'RowExclusiveLock' AND l.granted AND l.pid <> pg_backend_pid()
			  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
			  AND (l.relation = $1::regclass OR l.relation IN (SELECT relid FROM pg_partition_tree($1::regclass)))
			ORDER BY 1`, table)
		if err != nil {
			return fmt.Errorf("reading the transactions writing to %s: %w", t, err)
		}
		if pids, err = pgx.CollectRows(r, pgx.RowTo[int32]); err != nil {
			return fmt.Errorf("reading the transactions writing to %s: %w", t, err)
		}
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM `+table+`)`).Scan(&rows); err != nil {
			return fmt.Errorf("reading whether %s holds rows: %w", t, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	steps := []Step{{Object: "publication", Name: pub, Created: true, Note: t.String() + " added"}}
	if rows {
		steps = append(steps, Step{Object: "warning", Name: t.String(), Note: "holds rows committed before it was added: they are not streamed; walrelay snapshot publishes them (every published table's rows matching --where)"})
	}
	if len(pids) > 0 {
		ps := make([]string, len(pids))
		for i, p := range pids {
			ps[i] = strconv.Itoa(int(p))
		}
		steps = append(steps, Step{Object: "warning", Name: t.String(), Note: fmt.Sprintf(
			"transactions of server processes %s were writing to it when it was added: the rows they wrote before that are not streamed, even when they commit after; walrelay verify --republish over this time finds and publishes them",
			strings.Join(ps, ", "))})
	}
	return steps, nil
}

// createPublication creates pub for every table, INSERTs only, through the
// partition root when one of them is partitioned.
func createPublication(ctx context.Context, conn *pgx.Conn, pub string, tables []config.TableName, partitioned []bool) ([]Step, error) {
	names := make([]string, len(tables))
	with := "publish = 'insert'"
	for i, t := range tables {
		names[i] = pgx.Identifier{t.Schema, t.Name}.Sanitize()
		if partitioned[i] && !strings.Contains(with, "publish_via_partition_root") {
			// Every row under the root's name, new partitions included.
			with += ", publish_via_partition_root = true"
		}
	}
	stmt := fmt.Sprintf(`CREATE PUBLICATION %s FOR TABLE %s WITH (%s)`, pgx.Identifier{pub}.Sanitize(), strings.Join(names, ", "), with)
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return nil, fmt.Errorf("creating publication %q: %w", pub, err)
	}
	return []Step{{Object: "publication", Name: pub, Created: true}}, nil
}

// publishes reports whether publication oid publishes table t: by name
// (pg_publication_rel), or through t's schema (FOR TABLES IN SCHEMA,
// PostgreSQL 15+).
func publishes(ctx context.Context, conn *pgx.Conn, oid uint32, t config.TableName) (bool, error) {
	var in bool
	err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_publication_rel WHERE prpubid = $1 AND prrelid = $2::regclass)`,
		oid, pgx.Identifier{t.Schema, t.Name}.Sanitize()).Scan(&in)
	if err != nil || in {
		return in, err
	}
	var hasSchemas bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('pg_catalog.pg_publication_namespace') IS NOT NULL`).Scan(&hasSchemas); err != nil || !hasSchemas {
		return false, err
	}
	err = conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_publication_namespace WHERE pnpubid = $1 AND pnnspid = $2::regnamespace)`,
		oid, pgx.Identifier{t.Schema}.Sanitize()).Scan(&in)
	return in, err
}

// decodingWarning is a warning step when the server is a minor release
// of its major without PostgreSQL's fix for decoding with a stale catalog
// after publication DDL (decodingFixedIn): there, a transaction that
// writes to a table while it is added to the publication, and commits
// after the ALTER, can have its rows filtered out of the stream for good.
// nil on a fixed server.
func decodingWarning(ctx context.Context, conn *pgx.Conn, tables []config.TableName, adding []int) (*Step, error) {
	var (
		num     int
		version string
	)
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int, current_setting('server_version')`).Scan(&num, &version); err != nil {
		return nil, fmt.Errorf("reading the server version: %w", err)
	}
	fixed := decodingFixedIn(num)
	if fixed == 0 || num >= fixed {
		return nil, nil
	}
	names := make([]string, len(adding))
	for j, i := range adding {
		names[j] = tables[i].String()
	}
	return &Step{Object: "warning", Name: "PostgreSQL " + version, Note: fmt.Sprintf(
		"before %d.%d, rows a transaction writes to %s while it is added to the publication, committed after that, can be lost to decoding (PostgreSQL's fix \"Avoid data loss when DDL operations that don't take a strong lock affect tables that are being logically replicated\"): update the server, or add a table before the application writes to it; walrelay verify --republish finds such rows",
		fixed/10000, fixed%100, strings.Join(names, ", "))}, nil
}

// decodingFixedIn is the server_version_num of the first minor release of
// num's major with PostgreSQL's fix "Avoid data loss when DDL operations
// that don't take a strong lock affect tables that are being logically
// replicated" (commit 9a2f8b4f01d5 on REL_16_STABLE, 9f21be08e on 15,
// 0434033e8 on 14, cadaf0ac4 on 17, 2025-04-10, with a follow-up on each
// branch on 2025-04-25): 0 when every release of the major has it (18 was
// released after it) or walrelay does not run there (13 and older).
//
// Sources: the release notes of 17.5 (doc/src/sgml/release-17.sgml on
// REL_17_STABLE: released 2025-05-08; the entry lists the commits on 13
// to 17, all of April 2025). The other majors' minors are that day's
// releases: 14.18's notes give 2025-05-08 (postgresql.org/docs/14/
// release-14-18.html, "fixes from 14.17"); 16.9 and 15.13 were read as
// that day's releases in a secondary source only, not in their own notes.
// A wrong minor here only moves where the warning starts.
func decodingFixedIn(num int) int {
	switch num / 10000 {
	case 14:
		return 140018
	case 15:
		return 150013
	case 16:
		return 160009
	case 17:
		return 170005
	}
	return 0
}
