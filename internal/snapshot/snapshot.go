// Package snapshot reads the rows already in an outbox table in one
// consistent Postgres snapshot, for the initial publication walrelay run
// makes when it creates its slot (snapshot.mode=initial) and for the
// one-shot backfill of `walrelay snapshot`.
//
// In: a DSN, the tables to read (with the columns the router binds), an
// optional SQL filter. Out: each row as the text tuple pgoutput would send
// for its INSERT (the same column order, text output with the replication
// session's DateStyle, TimeZone, bytea_output and extra_float_digits), so
// the relay routes snapshot rows and streamed rows with the same router
// and converters; and, for the initial snapshot, the slot, created by
// copying a temporary slot whose exported snapshot the rows were read in.
//
// The initial snapshot, as logical replication's initial table sync does
// it (docs/DESIGN.md, "Initial snapshot"):
//
//  1. Lock takes a session advisory lock keyed on the slot's name, so two
//     processes starting together on a missing slot do not both snapshot;
//     the caller checks the slot again once it holds the lock.
//  2. Export creates a TEMPORARY logical slot with EXPORT_SNAPSHOT on a
//     replication connection: its consistent point is the LSN from which
//     the slot decodes every transaction the exported snapshot does not
//     see.
//  3. Open imports that snapshot in a REPEATABLE READ READ ONLY
//     transaction; Count and Scan read the rows (a cursor, chunk by chunk,
//     in primary-key order).
//  4. Once every row was acknowledged by Kafka, Exported.Persist copies the
//     temporary slot to the permanent one (pg_copy_logical_replication_slot,
//     same consistent point) and Close ends the replication connection,
//     which drops the temporary slot.
//
// A heal of a lost slot (internal/relay) reads in such a snapshot too,
// but all the tables as one sequence in commit order: MergeOrdered opens
// a cursor per table and merges them on keys the caller gives.
//
// A process killed before step 4 leaves no slot (a temporary slot dies
// with its connection, an advisory lock with its session): the next start
// snapshots again from the beginning. It does not route, produce or wait
// for Kafka: that is internal/relay.
package snapshot

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/pgsession"
)

// Errors returned (wrapped) by this package.
var (
	// ErrNoPrimaryKey: a table to snapshot has no primary key, so its rows
	// have no order to read them in (per aggregate, primary-key order).
	ErrNoPrimaryKey = errors.New("table has no primary key")
	// ErrBadWhere: Postgres rejects snapshot.where (or --where) on a table.
	ErrBadWhere = errors.New("snapshot filter rejected by postgres")
	// ErrNoTable: there is no table to snapshot (the publications contain
	// none, or the named table does not exist).
	ErrNoTable = errors.New("no outbox table to snapshot")
)

// Table is one table to read: its name, OID and the columns of the tuples
// Scan returns, in order (those pgoutput sends, which the router bound).
type Table struct {
	Schema, Name string
	OID          uint32
	Columns      []string
}

// String is the table's schema-qualified name, for messages.
func (t Table) String() string { return t.Schema + "." + t.Name }

// sql is the table's schema-qualified name, quoted as SQL needs it.
func (t Table) sql() string { return pgx.Identifier{t.Schema, t.Name}.Sanitize() }

// Connect opens a normal connection whose values print as pgoutput's do
// (pgsession.Settings, the replication session's output settings): the
// text of every value is then the one pgoutput sends for the same row.
func Connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parsing postgres DSN: %w", err)
	}
	cfg.RuntimeParams["application_name"] = "walrelay snapshot"
	conn, err := pgsession.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to postgres: %w", err)
	}
	return conn, nil
}

// lockKey is the advisory lock of a slot's snapshot: one per slot name.
const lockKey = `hashtextextended('walrelay.snapshot:' || $1, 0)`

// Lock takes the session advisory lock of slot's snapshot on conn, waiting
// for a process that holds it (one snapshotting that slot) to finish or
// die. The lock ends with conn's session, or with Unlock.
func Lock(ctx context.Context, conn *pgx.Conn, slot string) error {
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(`+lockKey+`)`, slot); err != nil {
		return fmt.Errorf("taking the snapshot lock of slot %q: %w", slot, err)
	}
	return nil
}

// Unlock releases Lock.
func Unlock(ctx context.Context, conn *pgx.Conn, slot string) error {
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock(`+lockKey+`)`, slot); err != nil {
		return fmt.Errorf("releasing the snapshot lock of slot %q: %w", slot, err)
	}
	return nil
}

// Exported is a temporary slot and the snapshot it exported, held by its
// replication connection: the snapshot can be imported, and the slot
// copied, until Close.
type Exported struct {
	conn *pgconn.PgConn
	// Slot is the temporary slot's name.
	Slot string
	// LSN is its consistent point: the slot decodes exactly the
	// transactions that commit after the snapshot.
	LSN pglogrepl.LSN
	// Name is the exported snapshot, for SET TRANSACTION SNAPSHOT.
	Name string
}

// Export creates the temporary slot tmp (plugin pgoutput) with an exported
// snapshot, on a replication connection of its own.
func Export(ctx context.Context, dsn, tmp string) (*Exported, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parsing postgres DSN: %w", err)
	}
	cfg.RuntimeParams["application_name"] = "walrelay snapshot"
	conn, err := pgsession.ConnectReplication(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to postgres for replication: %w", err)
	}
	res, err := pglogrepl.CreateReplicationSlot(ctx, conn, tmp, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Temporary: true, SnapshotAction: "EXPORT_SNAPSHOT", Mode: pglogrepl.LogicalReplication})
	if err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("creating temporary slot %q with an exported snapshot: %w", tmp, err)
	}
	lsn, err := pglogrepl.ParseLSN(res.ConsistentPoint)
	if err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("parsing the consistent point of slot %q: %w", tmp, err)
	}
	return &Exported{conn: conn, Slot: tmp, LSN: lsn, Name: res.SnapshotName}, nil
}

// Persist creates the permanent slot as a copy of the temporary one, at
// the same consistent point, on conn (a normal connection). Call it only
// once everything read in the snapshot is acknowledged: from then on a
// restart streams from the slot instead of snapshotting again.
func (e *Exported) Persist(ctx context.Context, conn *pgx.Conn, slot string) error {
	if _, err := conn.Exec(ctx, `SELECT pg_copy_logical_replication_slot($1, $2, false)`, e.Slot, slot); err != nil {
		return fmt.Errorf("copying temporary slot %q to %q: %w", e.Slot, slot, err)
	}
	return nil
}

// Close ends the replication connection; Postgres drops the temporary
// slot with it.
func (e *Exported) Close(ctx context.Context) error {
	return e.conn.Close(ctx)
}

// Reader reads tables in one REPEATABLE READ snapshot: the exported one,
// or a snapshot of its own (backfill).
type Reader struct {
	tx pgx.Tx
}

// Open begins the read-only REPEATABLE READ transaction on conn and, when
// name is not empty, imports that exported snapshot into it.
func Open(ctx context.Context, conn *pgx.Conn, name string) (*Reader, error) {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("beginning the snapshot transaction: %w", err)
	}
	if name != "" {
		// SET TRANSACTION SNAPSHOT takes a literal, not a parameter.
		if _, err := tx.Exec(ctx, `SET TRANSACTION SNAPSHOT `+quoteLiteral(name)); err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			return nil, fmt.Errorf("importing snapshot %q: %w", name, err)
		}
	}
	return &Reader{tx: tx}, nil
}

// Close ends the transaction (and with it the snapshot's xmin horizon).
func (r *Reader) Close(ctx context.Context) error { return r.tx.Rollback(ctx) }

// PrimaryKey returns t's primary key columns, in key order, or
// ErrNoPrimaryKey.
func (r *Reader) PrimaryKey(ctx context.Context, t Table) ([]string, error) {
	var cols []string
	err := r.tx.QueryRow(ctx, `
		SELECT coalesce(array_agg(a.attname::text ORDER BY k.n), '{}')
		FROM pg_index i
		CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY k(attnum, n)
		JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
		WHERE i.indrelid = $1 AND i.indisprimary`, t.OID).Scan(&cols)
	if err != nil {
		return nil, fmt.Errorf("reading the primary key of %s: %w", t, err)
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("%w: %s (the snapshot reads rows in primary-key order; add one, e.g. ALTER TABLE %s ADD PRIMARY KEY (id))", ErrNoPrimaryKey, t, t.sql())
	}
	return cols, nil
}

// query is the SELECT of t's rows matching where, in primary-key order.
func query(t Table, where string, pk []string) string {
	cols := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		cols[i] = pgx.Identifier{c}.Sanitize()
	}
	keys := make([]string, len(pk))
	for i, c := range pk {
		keys[i] = pgx.Identifier{c}.Sanitize()
	}
	q := "SELECT " + strings.Join(cols, ", ") + " FROM " + t.sql()
	if strings.TrimSpace(where) != "" {
		q += " WHERE (" + where + ")"
	}
	return q + " ORDER BY " + strings.Join(keys, ", ")
}

// Check makes sure t can be read: it has a primary key, and Postgres
// accepts where over its columns (EXPLAIN, which reads no row). It
// returns the primary key.
func (r *Reader) Check(ctx context.Context, t Table, where string) ([]string, error) {
	pk, err := r.PrimaryKey(ctx, t)
	if err != nil {
		return nil, err
	}
	// A savepoint keeps the transaction usable after a rejected filter.
	sp, err := r.tx.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("checking snapshot.where on %s: %w", t, err)
	}
	_, err = sp.Exec(ctx, "EXPLAIN "+query(t, where, pk))
	_ = sp.Rollback(ctx)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			return nil, fmt.Errorf("%w: snapshot.where %q on %s: %s (it must be a boolean SQL expression over the table's columns, e.g. published_at IS NULL)", ErrBadWhere, where, t, pgErr.Message)
		}
		return nil, fmt.Errorf("checking snapshot.where on %s: %w", t, err)
	}
	return pk, nil
}

// Count returns how many of t's rows match where, in the snapshot.
func (r *Reader) Count(ctx context.Context, t Table, where string) (int64, error) {
	q := "SELECT count(*) FROM " + t.sql()
	if strings.TrimSpace(where) != "" {
		q += " WHERE (" + where + ")"
	}
	var n int64
	if err := r.tx.QueryRow(ctx, q).Scan(&n); err != nil {
		return 0, fmt.Errorf("counting the rows of %s to snapshot: %w", t, err)
	}
	return n, nil
}

// Scan reads t's rows matching where in primary-key order, chunk rows at
// a time from a cursor, and calls fn with each as a pgoutput text tuple.
// The tuple and its bytes are valid only during the call. An error of fn
// ends the scan and is returned.
func (r *Reader) Scan(ctx context.Context, t Table, where string, pk []string, chunk int, fn func([]*pglogrepl.TupleDataColumn) error) error {
	return r.scan(ctx, t, query(t, where, pk), chunk, fn)
}

// QueryRow runs a query in the snapshot's transaction (for what the
// caller computes from the snapshot, e.g. txfence.Window).
func (r *Reader) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return r.tx.QueryRow(ctx, sql, args...)
}

// Query runs a query returning rows in the snapshot's transaction. Close
// the rows before the reader's next call.
func (r *Reader) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return r.tx.Query(ctx, sql, args...)
}

func (r *Reader) scan(ctx context.Context, t Table, q string, chunk int, fn func([]*pglogrepl.TupleDataColumn) error) error {
	const cursor = "walrelay_snapshot"
	if _, err := r.tx.Exec(ctx, "DECLARE "+cursor+" NO SCROLL CURSOR FOR "+q); err != nil {
		return fmt.Errorf("opening a cursor on %s: %w", t, err)
	}
	cols := make([]*pglogrepl.TupleDataColumn, len(t.Columns))
	for i := range cols {
		cols[i] = new(pglogrepl.TupleDataColumn)
	}
	fetch := fmt.Sprintf("FETCH FORWARD %d FROM %s", chunk, cursor)
	pc := r.tx.Conn().PgConn()
	for {
		// Text results (the default format of ExecParams without codes):
		// the bytes pgoutput would send.
		rr := pc.ExecParams(ctx, fetch, nil, nil, nil, nil)
		n := 0
		var ferr error
		for rr.NextRow() {
			n++
			if ferr != nil {
				continue
			}
			for i, v := range rr.Values() {
				if v == nil {
					*cols[i] = pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeNull}
				} else {
					*cols[i] = pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeText, Length: uint32(len(v)), Data: v}
				}
			}
			ferr = fn(cols)
		}
		if _, err := rr.Close(); err != nil {
			return fmt.Errorf("reading the rows of %s: %w", t, err)
		}
		if ferr != nil {
			return ferr
		}
		if n < chunk {
			break
		}
	}
	if _, err := r.tx.Exec(ctx, "CLOSE "+cursor); err != nil {
		return fmt.Errorf("closing the cursor on %s: %w", t, err)
	}
	return nil
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
