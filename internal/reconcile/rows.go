package reconcile

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/pgcatalog"
	"github.com/walrelay/walrelay/internal/pgsession"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/router"
	"github.com/walrelay/walrelay/internal/txfence"
)

// outbox is one outbox table (of postgres.table) as verify reads it: its
// own plan, bound to its own columns as the relay binds each table's
// Relation message, and its own message scratch.
type outbox struct {
	rel      router.Relation
	quoted   string // schema-qualified, quoted
	timeCol  string // quoted time column
	idCol    string // quoted event id column ("" when none is configured)
	idType   string // the id column's type, format_type's text
	selected string // the select list: every column ::text, then the time column
	// cursor is the name of the cursor the rows are read through: one
	// per table, because pgx caches a statement's result columns by its
	// text, and a FETCH of another table's cursor of the same name would
	// be decoded with the first table's.
	cursor string
	plan   *router.Plan
	msg    router.Message // plan's routed row, reused
}

// connectReadOnly opens verify's Postgres connection: every transaction
// read-only, each statement under timeout, and values printed as the
// walsender prints them for the relay (pgsession pins the same settings
// on both), so the router sees the same text.
func connectReadOnly(ctx context.Context, dsn string, timeout time.Duration) (*pgx.Conn, error) {
	pc, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres.dsn: %w", err)
	}
	for k, v := range map[string]string{
		"default_transaction_read_only": "on",
		"statement_timeout":             strconv.FormatInt(timeout.Milliseconds(), 10),
		"application_name":              "walrelay verify",
	} {
		pc.RuntimeParams[k] = v
	}
	conn, err := pgsession.ConnectConfig(ctx, pc)
	if err != nil {
		return nil, postgres.ExplainConnectError(err)
	}
	return conn, nil
}

// describeAll reads every table of postgres.table, in list order, and
// binds each to rt as the relay binds a table's Relation message.
func describeAll(ctx context.Context, conn *pgx.Conn, cfg config.Config, rt *router.Router) ([]*outbox, error) {
	tables := cfg.Postgres.Tables()
	if len(tables) == 0 {
		return nil, fmt.Errorf("postgres.table %q: no valid table", strings.Join(cfg.Postgres.Table, ","))
	}
	out := make([]*outbox, 0, len(tables))
	for i, t := range tables {
		o, err := describe(ctx, conn, cfg, t)
		if err != nil {
			return nil, err
		}
		if o.cursor = "walrelay_verify"; i > 0 {
			o.cursor += "_" + strconv.Itoa(i)
		}
		if o.plan, err = rt.Bind(o.rel); err != nil {
			return nil, fmt.Errorf("checking outbox table %s against the router config: %w", o.quoted, err)
		}
		out = append(out, o)
	}
	return out, nil
}

// describe reads table's columns and checks the time column.
func describe(ctx context.Context, conn *pgx.Conn, cfg config.Config, table config.TableName) (*outbox, error) {
	schema, name := table.Schema, table.Name
	quoted := pgx.Identifier{schema, name}.Sanitize()
	var oid uint32
	if err := conn.QueryRow(ctx, `SELECT coalesce(to_regclass($1)::oid, 0)`, quoted).Scan(&oid); err != nil || oid == 0 {
		if err == nil {
			err = errors.New("it does not exist (run `walrelay setup`, or fix postgres.table)")
		}
		return nil, fmt.Errorf("reading outbox table %s: %w", quoted, err)
	}
	cols, err := pgcatalog.ReadColumns(ctx, conn, []uint32{oid})
	if err != nil {
		return nil, err
	}
	o := &outbox{
		rel:     router.Relation{ID: oid, Namespace: schema, Name: name, Columns: cols[oid]},
		quoted:  quoted,
		timeCol: pgx.Identifier{cfg.Outbox.TimeColumn}.Sanitize(),
	}
	var list []string
	hasTime := false
	for _, c := range o.rel.Columns {
		list = append(list, pgx.Identifier{c.Name}.Sanitize()+"::text")
		hasTime = hasTime || c.Name == cfg.Outbox.TimeColumn
	}
	if !hasTime {
		return nil, fmt.Errorf("outbox table %s has no column %q: set outbox.time_column to its event time column", quoted, cfg.Outbox.TimeColumn)
	}
	o.selected = strings.Join(append(list, o.timeCol+"::timestamptz"), ", ")
	if id := cfg.Router.FieldEventID; id != "" {
		o.idCol = pgx.Identifier{id}.Sanitize()
		err := conn.QueryRow(ctx, `SELECT format_type(atttypid, atttypmod) FROM pg_attribute
			WHERE attrelid = $1 AND attname = $2 AND attnum > 0 AND NOT attisdropped`, oid, id).Scan(&o.idType)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("reading the type of outbox column %q: %w", id, err)
		}
	}
	return o, nil
}

// row is one outbox row as the replication stream would carry it.
type row struct {
	cols []*pglogrepl.TupleDataColumn
	at   time.Time // the time column
	// confirmed: the row's xmin precedes a fence the slot confirmed, so
	// Kafka acknowledged its transaction (see internal/txfence).
	confirmed bool
}

// fenceWindow is txfence.PrecedesSQL's parameters for the transaction's
// snapshot and the confirmed fence; nil when no fence is confirmed.
type fenceWindow struct{ x32, window int64 }

// scanRows calls each with every row of the window [since, until), read
// through a cursor in pages of page rows, inside tx, with row.confirmed
// computed by Postgres from fw (false for every row when fw is nil). The
// row's bytes are valid during the call only.
func (o *outbox) scanRows(ctx context.Context, tx pgx.Tx, since, until time.Time, page int, fw *fenceWindow, each func(*row) error) error {
	cursor := o.cursor
	confirmed, args := "false", []any{since, until}
	if fw != nil {
		confirmed, args = txfence.PrecedesSQL(txfence.XminExpr, "$3", "$4"), append(args, fw.x32, fw.window)
	}
	_, err := tx.Exec(ctx, `DECLARE `+cursor+` NO SCROLL CURSOR FOR SELECT `+o.selected+`, `+confirmed+` FROM `+o.quoted+
		` WHERE `+o.timeCol+` >= $1 AND `+o.timeCol+` < $2`, args...)
	if err != nil {
		return fmt.Errorf("reading outbox rows: %w", err)
	}
	n := len(o.rel.Columns)
	r := &row{cols: make([]*pglogrepl.TupleDataColumn, n)}
	cells := make([]pglogrepl.TupleDataColumn, n)
	for i := range r.cols {
		r.cols[i] = &cells[i]
	}
	fetch := `FETCH FORWARD ` + strconv.Itoa(page) + ` FROM ` + cursor
	for {
		rows, err := tx.Query(ctx, fetch)
		if err != nil {
			return fmt.Errorf("reading outbox rows: %w", err)
		}
		got := 0
		for rows.Next() {
			got++
			raw := rows.RawValues()
			for i := range n {
				if raw[i] == nil {
					cells[i] = pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeNull}
				} else {
					cells[i] = pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeText, Length: uint32(len(raw[i])), Data: raw[i]}
				}
			}
			if r.at, err = timeValue(raw[n], rows.FieldDescriptions()[n].Format); err != nil {
				rows.Close()
				return fmt.Errorf("reading outbox column %s: %w", o.timeCol, err)
			}
			if r.confirmed, err = boolValue(raw[n+1], rows.FieldDescriptions()[n+1].Format); err != nil {
				rows.Close()
				return fmt.Errorf("reading whether an outbox row is confirmed: %w", err)
			}
			if err := each(r); err != nil {
				rows.Close()
				return err
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("reading outbox rows: %w", err)
		}
		if got < page {
			break
		}
	}
	if _, err := tx.Exec(ctx, `CLOSE `+cursor); err != nil {
		return fmt.Errorf("closing the outbox cursor: %w", err)
	}
	return nil
}

// pgEpoch is where Postgres's binary timestamps count microseconds from.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// timeValue decodes a timestamptz in the binary (format 1) or text format.
func timeValue(b []byte, format int16) (time.Time, error) {
	if b == nil {
		return time.Time{}, errors.New("NULL in the window's time column")
	}
	if format == pgx.BinaryFormatCode {
		if len(b) != 8 {
			return time.Time{}, fmt.Errorf("binary timestamptz of %d bytes", len(b))
		}
		return pgEpoch.Add(time.Duration(int64(binary.BigEndian.Uint64(b))) * time.Microsecond), nil
	}
	t, err := time.Parse("2006-01-02 15:04:05.999999Z07", string(b))
	if err != nil {
		return time.Time{}, fmt.Errorf("parsing timestamptz %q: %w", b, err)
	}
	return t, nil
}

// boolValue decodes a non-NULL boolean in the binary or text format.
func boolValue(b []byte, format int16) (bool, error) {
	switch {
	case len(b) != 1:
		return false, fmt.Errorf("boolean of %d bytes", len(b))
	case format == pgx.BinaryFormatCode:
		return b[0] == 1, nil
	default:
		return b[0] == 't', nil
	}
}

// existing returns which of ids are event ids of rows in any of tables (in
// any window).
func existing(ctx context.Context, conn *pgx.Conn, tables []*outbox, ids []string) (map[string]bool, error) {
	found := map[string]bool{}
	for _, o := range tables {
		if err := o.existing(ctx, conn, ids, found); err != nil {
			return nil, err
		}
	}
	return found, nil
}

// existing adds to found which of ids are event ids of rows in the table
// (in any window), in batches, on conn in a transaction of its own.
func (o *outbox) existing(ctx context.Context, conn *pgx.Conn, ids []string, found map[string]bool) error {
	if o.idCol == "" || len(ids) == 0 {
		return nil
	}
	// The cast to the column's own type lets Postgres use its index; an
	// id that is not of that type (a record's header from elsewhere)
	// fails the cast, and then the batch is compared as text.
	typed := `SELECT ` + o.idCol + `::text FROM ` + o.quoted + ` WHERE ` + o.idCol + ` = ANY($1::text[]::` + o.idType + `[])`
	asText := `SELECT ` + o.idCol + `::text FROM ` + o.quoted + ` WHERE ` + o.idCol + `::text = ANY($1::text[])`
	const batch = 1000
	for start := 0; start < len(ids); start += batch {
		part := ids[start:min(start+batch, len(ids))]
		var got []string
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, typed, part)
			if err == nil {
				got, err = pgx.CollectRows(rows, pgx.RowTo[string])
			}
			return err
		})
		if err != nil && o.idType != "" {
			err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				rows, err := tx.Query(ctx, asText, part)
				if err == nil {
					got, err = pgx.CollectRows(rows, pgx.RowTo[string])
				}
				return err
			})
		}
		if err != nil {
			return fmt.Errorf("looking up event ids in outbox table %s: %w", o.quoted, err)
		}
		for _, id := range got {
			found[id] = true
		}
	}
	return nil
}
