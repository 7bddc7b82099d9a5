package partition

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/config"
	sqlfiles "github.com/walrelay/walrelay/sql"
)

// ErrNoTable is returned (wrapped) when the outbox table does not exist.
var ErrNoTable = errors.New("outbox table does not exist")

// Partition is one partition of a range-partitioned table, with its bounds
// as the catalog holds them: rows with From <= time < To belong to it.
//
// The bounds are safe to compare with a cutoff ("is this partition older
// than X?"): an unbounded end (MAXVALUE or 'infinity') and a DEFAULT
// partition have To far in the future (year 294276, after every time
// walrelay compares), and an unbounded start (MINVALUE or '-infinity') and
// a DEFAULT partition have the zero From. A DEFAULT partition holds every
// row no other partition does; Default says so.
type Partition struct {
	Schema, Name string
	From, To     time.Time
	Default      bool
	// DetachPending: a DETACH PARTITION ... CONCURRENTLY of it was
	// interrupted (pg_inherits.inhdetachpending); it still counts as a
	// partition until ALTER TABLE ... DETACH PARTITION ... FINALIZE.
	DetachPending bool
}

// Bounded reports whether p has an upper bound: false for a DEFAULT
// partition and one bounded by MAXVALUE or 'infinity'.
func (p Partition) Bounded() bool { return !p.Default && p.To.Before(unbounded()) }

// String is the partition's qualified name and bounds, for logs.
func (p Partition) String() string {
	if p.Default {
		return p.Schema + "." + p.Name + " (DEFAULT)"
	}
	return fmt.Sprintf("%s.%s [%s, %s)", p.Schema, p.Name, formatBound(p.From), formatBound(p.To))
}

// Holds reports whether a row with time t belongs to p (a DEFAULT
// partition holds only what no other partition does: false).
func (p Partition) Holds(t time.Time) bool {
	return !p.Default && !t.Before(p.From) && t.Before(p.To)
}

// unbounded is the To of a partition without an upper bound: later than
// any time walrelay compares with (Postgres's own timestamps end in 294276).
func unbounded() time.Time { return time.Date(294276, 12, 31, 23, 59, 59, 0, time.UTC) }

func formatBound(t time.Time) string {
	switch {
	case t.IsZero():
		return "MINVALUE"
	case !t.Before(unbounded()):
		return "MAXVALUE"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// Layout is how a table is stored: a plain table, or a partitioned one
// with its strategy and key.
type Layout struct {
	Partitioned bool
	Strategy    string   // "range", "list" or "hash"; "" for a plain table
	Key         []string // the partition key's columns; "" for an expression
}

// RangeOn reports whether the table is partitioned by range of column
// alone: the layout this package manages.
func (l Layout) RangeOn(column string) bool {
	return l.Partitioned && l.Strategy == "range" && len(l.Key) == 1 && l.Key[0] == column
}

// String describes the layout: "plain table" or "partitioned by range
// (created_at)".
func (l Layout) String() string {
	if !l.Partitioned {
		return "plain table"
	}
	key := make([]string, len(l.Key))
	for i, k := range l.Key {
		key[i] = k
		if k == "" {
			key[i] = "(expression)"
		}
	}
	return fmt.Sprintf("partitioned by %s (%s)", l.Strategy, strings.Join(key, ", "))
}

// Inspect reads how table (postgres.table's form) is stored. It returns an
// error wrapping ErrNoTable when the table does not exist.
func Inspect(ctx context.Context, conn *pgx.Conn, table string) (Layout, error) {
	qt, err := quoted(table)
	if err != nil {
		return Layout{}, err
	}
	var (
		kind  *string
		strat string
		key   []string
	)
	err = conn.QueryRow(ctx, `
		SELECT c.relkind::text, coalesce(pt.partstrat::text, ''),
		       coalesce((SELECT array_agg(coalesce(a.attname::text, '') ORDER BY k.n)
		                 FROM unnest(pt.partattrs::int2[]) WITH ORDINALITY k(attnum, n)
		                 LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum), '{}')
		FROM (SELECT to_regclass($1) AS oid) r
		LEFT JOIN pg_class c ON c.oid = r.oid
		LEFT JOIN pg_partitioned_table pt ON pt.partrelid = c.oid`, qt).Scan(&kind, &strat, &key)
	if err != nil {
		return Layout{}, fmt.Errorf("reading how %s is partitioned: %w", table, err)
	}
	if kind == nil {
		return Layout{}, fmt.Errorf("%w: %s (postgres.table)", ErrNoTable, table)
	}
	if *kind != "p" {
		return Layout{}, nil
	}
	l := Layout{Partitioned: true, Key: key}
	switch strat {
	case "r":
		l.Strategy = "range"
	case "l":
		l.Strategy = "list"
	case "h":
		l.Strategy = "hash"
	default:
		l.Strategy = strat
	}
	return l, nil
}

// List returns the partitions of table (postgres.table's form), its direct
// children, ordered by From with a DEFAULT partition last, with the bounds
// read from the catalog (pg_get_expr of relpartbound, printed in UTC). A
// plain table has none. It fails when a partition's bound is not a range
// of one timestamp (a list or hash partition, or a key of several columns).
func List(ctx context.Context, conn *pgx.Conn, table string) ([]Partition, error) {
	qt, err := quoted(table)
	if err != nil {
		return nil, err
	}
	type row struct {
		schema, name, bound string
		pending             bool
	}
	var rows []row
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// pg_get_expr prints timestamptz bounds in the session's zone.
		if _, err := tx.Exec(ctx, `SET LOCAL TimeZone = 'UTC'; SET LOCAL DateStyle = 'ISO'`); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, qt).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return fmt.Errorf("%w: %s (postgres.table)", ErrNoTable, table)
		}
		res, err := tx.Query(ctx, `
			SELECT n.nspname::text, c.relname::text, pg_get_expr(c.relpartbound, c.oid), i.inhdetachpending
			FROM pg_inherits i
			JOIN pg_class c ON c.oid = i.inhrelid
			JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE i.inhparent = to_regclass($1) AND c.relispartition`, qt)
		if err != nil {
			return err
		}
		rows, err = pgx.CollectRows(res, func(r pgx.CollectableRow) (row, error) {
			var x row
			return x, r.Scan(&x.schema, &x.name, &x.bound, &x.pending)
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listing the partitions of %s: %w", table, err)
	}
	out := make([]Partition, 0, len(rows))
	for _, r := range rows {
		p := Partition{Schema: r.schema, Name: r.name, DetachPending: r.pending}
		if p.From, p.To, p.Default, err = parseBound(r.bound); err != nil {
			return nil, fmt.Errorf("listing the partitions of %s: partition %s.%s: %w", table, r.schema, r.name, err)
		}
		if p.Default {
			p.To = unbounded()
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Partition) int {
		if a.Default != b.Default {
			if a.Default {
				return 1
			}
			return -1
		}
		return a.From.Compare(b.From)
	})
	return out, nil
}

// rangeBound is pg_get_expr's text of a range partition's bound on one
// column: FOR VALUES FROM (x) TO (y).
var rangeBound = regexp.MustCompile(`^FOR VALUES FROM \((.*)\) TO \((.*)\)$`)

// parseBound reads a partition bound as pg_get_expr prints it with
// TimeZone UTC and DateStyle ISO.
func parseBound(s string) (from, to time.Time, def bool, err error) {
	if s == "DEFAULT" {
		return time.Time{}, time.Time{}, true, nil
	}
	m := rangeBound.FindStringSubmatch(s)
	if m == nil {
		return from, to, false, fmt.Errorf("bound %q is not a range (walrelay manages tables partitioned by range of one timestamptz column)", s)
	}
	if from, err = parseValue(m[1]); err != nil {
		return from, to, false, fmt.Errorf("bound %q: %w", s, err)
	}
	if to, err = parseValue(m[2]); err != nil {
		return from, to, false, fmt.Errorf("bound %q: %w", s, err)
	}
	return from, to, false, nil
}

// parseValue reads one bound value: MINVALUE, MAXVALUE or a quoted
// timestamp ('2026-11-25 00:00:00+00', 'infinity', '-infinity'; one
// without an offset, of a timestamp column, is read as UTC).
func parseValue(v string) (time.Time, error) {
	switch v {
	case "MINVALUE", "'-infinity'":
		return time.Time{}, nil
	case "MAXVALUE", "'infinity'":
		return unbounded(), nil
	}
	lit, quoted := strings.CutPrefix(v, "'")
	lit, closed := strings.CutSuffix(lit, "'")
	if !quoted || !closed {
		return time.Time{}, fmt.Errorf("value %s is not one timestamp", v)
	}
	for _, layout := range []string{"2006-01-02 15:04:05.999999-07", "2006-01-02 15:04:05.999999-07:00", "2006-01-02 15:04:05.999999"} {
		if t, err := time.Parse(layout, lit); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("value %s is not a timestamp", v)
}

// quoted returns table (postgres.table's form) quoted.
func quoted(table string) (string, error) {
	schema, name, err := config.SplitTable(table)
	if err != nil {
		return "", fmt.Errorf("postgres.table %q: %w", table, err)
	}
	return pgx.Identifier{schema, name}.Sanitize(), nil
}

// RootStatement returns the DDL of the partitioned root:
// sql/outbox_partitioned.sql with the scheme's table in place of
// public.outbox. The file partitions by created_at; a scheme on another
// column is refused (create such a table by hand: walrelay then keeps its
// partitions as long as it is partitioned by range of outbox.time_column).
func (s Scheme) RootStatement() (string, error) {
	if s.Column != sqlfiles.PartitionedOutboxColumn {
		return "", fmt.Errorf("outbox.time_column is %q, but the partitioned outbox walrelay setup creates (sql/outbox_partitioned.sql) is partitioned by %s: set outbox.time_column=%s, or create the table yourself",
			s.Column, sqlfiles.PartitionedOutboxColumn, sqlfiles.PartitionedOutboxColumn)
	}
	if !strings.Contains(sqlfiles.PartitionedOutboxTable, sqlfiles.CreateOutboxTable) {
		return "", fmt.Errorf("sql/outbox_partitioned.sql no longer starts its statement with %q", sqlfiles.CreateOutboxTable)
	}
	return strings.Replace(sqlfiles.PartitionedOutboxTable, sqlfiles.CreateOutboxTable, "CREATE TABLE IF NOT EXISTS "+s.root()+" (", 1), nil
}

// EnsureAhead creates, on table (postgres.table's form, partitioned by
// range of column), the partition of interval holding now and the ahead
// partitions after it, those that do not exist yet, and returns the ones
// it created. It is idempotent: a partition of the same name, or one that
// already covers the range, is left alone. Run it on a session with a
// lock_timeout (see the package doc): each creation locks the root.
func EnsureAhead(ctx context.Context, conn *pgx.Conn, table, column string, interval time.Duration, ahead int, now time.Time) ([]Partition, error) {
	s, err := NewScheme(table, column, interval)
	if err != nil {
		return nil, err
	}
	return s.EnsureAhead(ctx, conn, ahead, now)
}

// EnsureAhead is the package's EnsureAhead for this scheme.
func (s Scheme) EnsureAhead(ctx context.Context, conn *pgx.Conn, ahead int, now time.Time) ([]Partition, error) {
	existing, err := List(ctx, conn, s.qualified())
	if err != nil {
		return nil, err
	}
	var created []Partition
	start := s.Start(now)
	for i := 0; i <= ahead; i++ {
		want := s.Partition(start.Add(time.Duration(i) * s.Interval))
		if covered(existing, want) {
			continue
		}
		if _, err := conn.Exec(ctx, s.CreateStatement(want.From)); err != nil {
			return created, fmt.Errorf("creating partition %s: %w", want, err)
		}
		created = append(created, want)
	}
	return created, nil
}

// covered reports whether want exists by name or its range lies within
// one existing (non-default) partition.
func covered(existing []Partition, want Partition) bool {
	for _, p := range existing {
		if p.Schema == want.Schema && p.Name == want.Name {
			return true
		}
		if !p.Default && !want.From.Before(p.From) && !p.To.Before(want.To) {
			return true
		}
	}
	return false
}
