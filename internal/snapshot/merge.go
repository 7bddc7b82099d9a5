// Reading several tables as one ordered sequence: the heal of a relay
// with several outbox tables republishes their rows in commit order
// across the tables (docs/DESIGN.md, "The heal"), which reading them one
// after another does not give.

package snapshot

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// OrderKey is one key of MergeOrdered's order: an SQL expression over a
// row of each table (system columns such as xmin and cmin included) whose
// value is a bigint and never NULL, ascending unless Desc.
type OrderKey struct {
	Expr string
	Desc bool
}

// MergeOrdered reads the rows matching where of every table in tables, in
// the order of the keys order across all of them, chunk rows at a time
// per table, and calls fn with each: i is its table's index in tables,
// cols the row as a pgoutput text tuple (as Scan gives it, valid only
// during the call). Rows tied on every key come in the order of their
// tables in tables and, within a table, in heap order (ctid), then in
// primary-key order (pks[i], as Check returns it).
//
// It opens one cursor per table in the reader's transaction, all at once,
// each selecting the keys as extra columns in its own ORDER BY, and
// merges the cursors' next rows in Go (a heap on the keys, then the table
// index): memory holds at most one chunk per table. An error of fn ends
// the read and is returned; the cursors then end with the transaction.
func (r *Reader) MergeOrdered(ctx context.Context, tables []Table, where string, order []OrderKey, pks [][]string, chunk int, fn func(i int, cols []*pglogrepl.TupleDataColumn) error) error {
	if len(order) == 0 {
		return errors.New("merging tables: no order key")
	}
	if len(pks) != len(tables) {
		return fmt.Errorf("merging tables: %d primary keys for %d tables", len(pks), len(tables))
	}
	m := &merger{order: order}
	for i, t := range tables {
		c := &mergeCursor{i: i, t: t, name: "walrelay_snapshot_" + strconv.Itoa(i), ncols: len(t.Columns)}
		if _, err := r.tx.Exec(ctx, "DECLARE "+c.name+" NO SCROLL CURSOR FOR "+mergeQuery(t, where, order, pks[i])); err != nil {
			return fmt.Errorf("opening a cursor on %s: %w", t, err)
		}
		if err := r.fetch(ctx, c, len(order), chunk); err != nil {
			return err
		}
		if len(c.rows) > 0 {
			m.cursors = append(m.cursors, c)
		}
	}
	heap.Init(m)
	var cols []*pglogrepl.TupleDataColumn
	for m.Len() > 0 {
		c := m.cursors[0]
		row := c.rows[c.next]
		for len(cols) < c.ncols {
			cols = append(cols, new(pglogrepl.TupleDataColumn))
		}
		for j, v := range row.vals {
			if v == nil {
				*cols[j] = pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeNull}
			} else {
				*cols[j] = pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeText, Length: uint32(len(v)), Data: v}
			}
		}
		if err := fn(c.i, cols[:c.ncols]); err != nil {
			return err
		}
		c.next++
		if c.next == len(c.rows) && !c.last {
			if err := r.fetch(ctx, c, len(order), chunk); err != nil {
				return err
			}
		}
		if c.next == len(c.rows) {
			heap.Pop(m)
		} else {
			heap.Fix(m, 0)
		}
	}
	for i := range tables {
		if _, err := r.tx.Exec(ctx, "CLOSE walrelay_snapshot_"+strconv.Itoa(i)); err != nil {
			return fmt.Errorf("closing the cursor on %s: %w", tables[i], err)
		}
	}
	return nil
}

// mergeQuery is the SELECT of t's rows matching where with the order keys
// as extra columns after t's, in the merge's order, then ctid, then pk.
func mergeQuery(t Table, where string, order []OrderKey, pk []string) string {
	sel := make([]string, 0, len(t.Columns)+len(order))
	for _, c := range t.Columns {
		sel = append(sel, pgx.Identifier{c}.Sanitize())
	}
	by := make([]string, 0, len(order)+1+len(pk))
	for j, k := range order {
		sel = append(sel, "("+k.Expr+")::bigint")
		o := strconv.Itoa(len(t.Columns) + j + 1) // the key's output column
		if k.Desc {
			o += " DESC"
		}
		by = append(by, o)
	}
	by = append(by, "ctid")
	for _, c := range pk {
		by = append(by, pgx.Identifier{c}.Sanitize())
	}
	q := "SELECT " + strings.Join(sel, ", ") + " FROM " + t.sql()
	if strings.TrimSpace(where) != "" {
		q += " WHERE (" + where + ")"
	}
	return q + " ORDER BY " + strings.Join(by, ", ")
}

// mergeCursor is one table's cursor and the rows of its last fetch.
type mergeCursor struct {
	i     int // the table's index
	t     Table
	name  string
	ncols int // the table's columns; the keys follow them
	rows  []mergeRow
	next  int  // the row to hand on next
	last  bool // the last fetch returned fewer than chunk rows: the cursor is at its end
}

// mergeRow is a fetched row: its column values (nil: NULL) and its keys.
type mergeRow struct {
	vals [][]byte
	keys []int64
}

// fetch reads the next chunk rows of c's cursor into c.rows (copies: the
// results of other cursors are read before these are handed on).
func (r *Reader) fetch(ctx context.Context, c *mergeCursor, nkeys, chunk int) error {
	c.rows, c.next = c.rows[:0], 0
	rr := r.tx.Conn().PgConn().ExecParams(ctx, fmt.Sprintf("FETCH FORWARD %d FROM %s", chunk, c.name), nil, nil, nil, nil)
	var perr error
	for rr.NextRow() {
		vs := rr.Values()
		if len(vs) != c.ncols+nkeys {
			perr = fmt.Errorf("reading the rows of %s: %d columns, want %d", c.t, len(vs), c.ncols+nkeys)
			continue
		}
		row := mergeRow{vals: make([][]byte, c.ncols), keys: make([]int64, nkeys)}
		for j, v := range vs[:c.ncols] {
			if v != nil {
				row.vals[j] = append([]byte{}, v...)
			}
		}
		for j, v := range vs[c.ncols:] {
			if v == nil {
				perr = fmt.Errorf("reading the rows of %s: order key %d is NULL", c.t, j+1)
				continue
			}
			k, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				perr = fmt.Errorf("reading the rows of %s: order key %d: %w", c.t, j+1, err)
				continue
			}
			row.keys[j] = k
		}
		c.rows = append(c.rows, row)
	}
	if _, err := rr.Close(); err != nil {
		return fmt.Errorf("reading the rows of %s: %w", c.t, err)
	}
	if perr != nil {
		return perr
	}
	c.last = len(c.rows) < chunk
	return nil
}

// merger is a heap of the cursors with rows left, on their next rows'
// keys, then their table index.
type merger struct {
	order   []OrderKey
	cursors []*mergeCursor
}

func (m *merger) Len() int { return len(m.cursors) }

func (m *merger) Less(a, b int) bool {
	ca, cb := m.cursors[a], m.cursors[b]
	ka, kb := ca.rows[ca.next].keys, cb.rows[cb.next].keys
	for j, k := range m.order {
		if ka[j] == kb[j] {
			continue
		}
		return (ka[j] < kb[j]) != k.Desc
	}
	return ca.i < cb.i
}

func (m *merger) Swap(a, b int) { m.cursors[a], m.cursors[b] = m.cursors[b], m.cursors[a] }

func (m *merger) Push(x any) { m.cursors = append(m.cursors, x.(*mergeCursor)) }

func (m *merger) Pop() any {
	c := m.cursors[len(m.cursors)-1]
	m.cursors = m.cursors[:len(m.cursors)-1]
	return c
}
