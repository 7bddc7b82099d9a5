package setup

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/config"
)

// AddTableError is returned by Run when ALTER PUBLICATION ... ADD TABLE
// fails. Err is the server's: 42501 when the role does not own the table
// (adding a table to a publication requires owning it, besides owning the
// publication).
type AddTableError struct {
	Publication string
	Table       string // as postgres.table writes it: schema.name
	Quoted      string // as SQL names it: "schema"."name"
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
// partitions' names). Each table is added once the transactions writing
// it have ended (addTable), and a warning step says how many rows it held
// before: the stream does not carry them (decodingWarning warns of an old
// minor release besides). partitioned[i] says whether tables[i] is
// partitioned.
func ensurePublication(ctx context.Context, conn *pgx.Conn, n Names, tables []config.TableName, partitioned []bool) ([]Step, error) {
	pub := n.Publication
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
		s, err := addTable(ctx, conn, pub, tables[i], n.timeColumn(), n.lockTimeout())
		steps = append(steps, s...)
		if err != nil {
			return steps, err
		}
	}
	return steps, nil
}

// addTable adds t to publication pub in one transaction that first waits
// for the transactions writing t to end, so that no row of t is lost to
// decoding, and warns of the rows t held before (the stream does not carry
// them: pgoutput publishes changes, not contents).
//
// pgoutput decodes each change with the catalog of its place in the WAL,
// where t was not published yet: a transaction that wrote t before the
// ALTER and commits after it would have those rows filtered out for good
// (seen on PostgreSQL 14 to 18, fixed minors included). LOCK TABLE t IN
// SHARE MODE prevents it: INSERT takes ROW EXCLUSIVE on its target table,
// which conflicts with SHARE (PostgreSQL docs, "Explicit Locking",
// 13.3.1 Table-Level Locks), so the lock waits for every transaction
// writing t (or, without ONLY, one of its partitions) to end and holds
// new writers until the ALTER commits; ALTER PUBLICATION ... ADD TABLE
// itself takes SHARE UPDATE EXCLUSIVE on the table (publicationcmds.c,
// OpenTableList), which does not conflict with ROW EXCLUSIVE and so does
// not wait for writers. Under the lock, every row t holds was committed
// before the ALTER, and every later write is decoded with a catalog that
// publishes t. The lock waits at most lockTimeout (SET LOCAL
// lock_timeout); writers of t, and only of t, wait behind it meanwhile.
// On timeout the transaction is rolled back, t is not added and the error
// is a *BusyTableError (in an *AddTableError) naming the writers.
//
// The held rows are counted under the lock (a scan of t that writers of t
// wait for), with the window of timeColumn they span when t has that
// column: walrelay verify --republish over it publishes them.
func addTable(ctx context.Context, conn *pgx.Conn, pub string, t config.TableName, timeColumn string, lockTimeout time.Duration) ([]Step, error) {
	table := pgx.Identifier{t.Schema, t.Name}.Sanitize()
	var (
		held     heldRows
		lockFail error
	)
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		ms := max(lockTimeout.Milliseconds(), 1) // 0 would be no timeout
		if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`, strconv.FormatInt(ms, 10)); err != nil {
			return fmt.Errorf("setting lock_timeout to add %s: %w", t, err)
		}
		if _, err := tx.Exec(ctx, `LOCK TABLE `+table+` IN SHARE MODE`); err != nil {
			lockFail = err
			return &AddTableError{Publication: pub, Table: t.String(), Quoted: t.Quoted(), Err: err}
		}
		var err error
		if held, err = readHeld(ctx, tx, t, timeColumn); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `ALTER PUBLICATION `+pgx.Identifier{pub}.Sanitize()+` ADD TABLE `+table); err != nil {
			return &AddTableError{Publication: pub, Table: t.String(), Quoted: t.Quoted(), Err: err}
		}
		return nil
	})
	var pgErr *pgconn.PgError
	if lockFail != nil && errors.As(lockFail, &pgErr) && pgErr.Code == lockNotAvailable {
		busy := &BusyTableError{Table: t.String(), Timeout: lockTimeout, Err: lockFail}
		// Best effort: the writers as they are now, for the message.
		busy.PIDs, _ = writers(ctx, conn, table)
		return nil, &AddTableError{Publication: pub, Table: t.String(), Quoted: t.Quoted(), Err: busy}
	}
	if err != nil {
		return nil, err
	}
	steps := []Step{{Object: "publication", Name: pub, Created: true, Note: t.String() + " added"}}
	if held.n > 0 {
		steps = append(steps, Step{Object: "warning", Name: t.String(), Note: held.note()})
	}
	return steps, nil
}

// BusyTableError is the cause, in an *AddTableError, when the lock that
// waits for the transactions writing a table to end was not granted within
// the lock timeout (Names.LockTimeout): the table was not added, and
// setup can be run again once they have ended.
type BusyTableError struct {
	Table   string        // as postgres.table writes it: schema.name
	Timeout time.Duration // the lock timeout
	PIDs    []int32       // the server processes writing it, read after the timeout (may be empty)
	Err     error         // the server's lock_not_available (55P03)
}

func (e *BusyTableError) Error() string {
	who := ""
	if len(e.PIDs) > 0 {
		ps := make([]string, len(e.PIDs))
		for i, p := range e.PIDs {
			ps[i] = strconv.Itoa(int(p))
		}
		who = " (server processes " + strings.Join(ps, ", ") + ")"
	}
	return fmt.Sprintf("transactions writing to %s%s did not end within %s, and adding it before they end would lose the rows they wrote: %s was not added (run walrelay setup again when they have ended)",
		e.Table, who, e.Timeout, e.Table)
}

func (e *BusyTableError) Unwrap() error { return e.Err }

// writers is the server processes holding a write lock (ROW EXCLUSIVE) on
// table or one of its partitions in this database, in order.
func writers(ctx context.Context, conn *pgx.Conn, table string) ([]int32, error) {
	r, err := conn.Query(ctx, `SELECT DISTINCT l.pid FROM pg_locks l
		WHERE l.locktype = 'relation' AND l.mode = 'RowExclusiveLock' AND l.granted AND l.pid <> pg_backend_pid()
		  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND (l.relation = $1::regclass OR l.relation IN (SELECT relid FROM pg_partition_tree($1::regclass)))
		ORDER BY 1`, table)
	if err != nil {
		return nil, fmt.Errorf("reading the transactions writing to %s: %w", table, err)
	}
	return pgx.CollectRows(r, pgx.RowTo[int32])
}

// lockNotAvailable is the SQLSTATE of a lock not granted within
// lock_timeout.
const lockNotAvailable = "55P03"

// heldRows is what a table held when it was added to the publication.
type heldRows struct {
	table    string // as postgres.table writes it: schema.name
	n        int64
	column   string     // the time column, when the table has it
	from, to *time.Time // its smallest and largest value (nil: no column, or all NULL)
}

// readHeld counts the rows of t, and the window of timeColumn they span
// when t has that column as a timestamp.
func readHeld(ctx context.Context, tx pgx.Tx, t config.TableName, timeColumn string) (heldRows, error) {
	h := heldRows{table: t.String()}
	table := pgx.Identifier{t.Schema, t.Name}.Sanitize()
	if timeColumn != "" {
		var has bool
		err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_attribute WHERE attrelid = $1::regclass AND attname = $2
			AND NOT attisdropped AND atttypid IN ('timestamptz'::regtype, 'timestamp'::regtype))`, table, timeColumn).Scan(&has)
		if err != nil {
			return h, fmt.Errorf("reading the columns of %s: %w", t, err)
		}
		if has {
			h.column = timeColumn
		}
	}
	q := `SELECT count(*), NULL::timestamptz, NULL::timestamptz FROM ` + table
	if h.column != "" {
		col := pgx.Identifier{h.column}.Sanitize()
		q = `SELECT count(*), min(` + col + `)::timestamptz, max(` + col + `)::timestamptz FROM ` + table
	}
	if err := tx.QueryRow(ctx, q).Scan(&h.n, &h.from, &h.to); err != nil {
		return h, fmt.Errorf("counting the rows %s holds: %w", t, err)
	}
	return h, nil
}

// note is the warning's text: the count, the window and the fix.
func (h heldRows) note() string {
	snapshot := "walrelay snapshot --table " + h.table
	rows := "rows"
	if h.n == 1 {
		rows = "row"
	}
	if h.from == nil || h.to == nil {
		return fmt.Sprintf("holds %d %s committed before it was added: not streamed; publish them with walrelay verify --republish over their window, or %s", h.n, rows, snapshot)
	}
	// --until is exclusive: one second past the last, in whole seconds.
	since := h.from.UTC().Truncate(time.Second)
	until := h.to.UTC().Truncate(time.Second).Add(time.Second)
	return fmt.Sprintf("holds %d %s committed before it was added (%s %s to %s): not streamed; publish them with walrelay verify --republish --since %s --until %s, or %s",
		h.n, rows, h.column, h.from.UTC().Format(time.RFC3339Nano), h.to.UTC().Format(time.RFC3339Nano), since.Format(time.RFC3339), until.Format(time.RFC3339), snapshot)
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
