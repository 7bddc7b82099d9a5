package outbox

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// Style is how an event is written.
type Style int

const (
	// StyleRow inserts the event as a row of the outbox table: what
	// walrelay (and Debezium) relay by default. The row stays in the table
	// until something removes it (walrelay's outbox.retention).
	StyleRow Style = iota
	// StyleMessage emits the event as a transactional logical decoding
	// message, pg_logical_emit_message(true, prefix, content): no table,
	// no vacuum, no cleanup. walrelay relays it when its
	// outbox.message_prefix is the same prefix.
	StyleMessage
)

// String returns "row" or "message".
func (s Style) String() string {
	switch s {
	case StyleRow:
		return "row"
	case StyleMessage:
		return "message"
	}
	return "Style(" + strconv.Itoa(int(s)) + ")"
}

// DefaultTable is the outbox table of walrelay setup (sql/001_outbox_table.sql).
const DefaultTable = "public.outbox"

// maxIdentifier is the longest identifier Postgres keeps (NAMEDATALEN-1);
// it truncates longer ones silently, which would write to another name.
const maxIdentifier = 63

// Config says where and how a Writer writes. The zero value writes rows
// into public.outbox with Debezium's column names.
type Config struct {
	// Style is StyleRow (the default) or StyleMessage.
	Style Style
	// Table is the outbox table, "schema.table" or "table" (found on the
	// search_path), unquoted. StyleRow only; default DefaultTable.
	Table string
	// Prefix is the logical messages' prefix: walrelay's
	// outbox.message_prefix. Required for StyleMessage; must be empty for
	// StyleRow.
	Prefix string
	// Columns are the outbox column names, which are also the keys of a
	// message's JSON content. Empty fields take Debezium's defaults.
	Columns Columns
}

// Columns are the outbox column names walrelay's router is configured
// with. Each empty field takes the default named on it.
type Columns struct {
	// ID holds Event.ID (router table.field.event.id; header "id").
	// Default "id".
	ID string
	// AggregateType holds Event.AggregateType (router route.by.field).
	// Default "aggregatetype".
	AggregateType string
	// AggregateID holds Event.AggregateID (router table.field.event.key).
	// Default "aggregateid".
	AggregateID string
	// Type holds Event.Type (placed by the router's
	// table.fields.additional.placement, e.g. type:header:eventType).
	// Default "type".
	Type string
	// Payload holds Event.Payload (router table.field.event.payload).
	// Default "payload".
	Payload string
	// Timestamp holds Event.Timestamp when it is set (router
	// table.field.event.timestamp, which walrelay leaves unset by default:
	// the record then carries the commit time). Default "created_at".
	Timestamp string
}

func (c Columns) withDefaults() Columns {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&c.ID, "id")
	def(&c.AggregateType, "aggregatetype")
	def(&c.AggregateID, "aggregateid")
	def(&c.Type, "type")
	def(&c.Payload, "payload")
	def(&c.Timestamp, "created_at")
	return c
}

// names returns the columns with the Config field naming each.
func (c Columns) names() [][2]string {
	return [][2]string{
		{"Columns.ID", c.ID}, {"Columns.AggregateType", c.AggregateType}, {"Columns.AggregateID", c.AggregateID},
		{"Columns.Type", c.Type}, {"Columns.Payload", c.Payload}, {"Columns.Timestamp", c.Timestamp},
	}
}

// Event is one outbox event.
type Event struct {
	// ID is the event id, the record's "id" header that consumers dedupe
	// on. Empty: Emit generates a UUID version 7 and returns it. With the
	// default table it must be a UUID.
	ID string
	// AggregateType routes the event: topic outbox.event.<AggregateType>
	// with the router's defaults. Required.
	AggregateType string
	// AggregateID is the record key: one aggregate's events go to one
	// partition in commit order. Required.
	AggregateID string
	// Type is the event type, e.g. OrderPaid. Required. walrelay sends it
	// only where the router's table.fields.additional.placement puts it,
	// as Debezium does (e.g. type:header:eventType).
	Type string
	// Payload is the record value: JSON, sent as given (a row's jsonb
	// column sends it as Postgres normalizes it). Nil is SQL NULL, a
	// record without a value.
	Payload []byte
	// Timestamp, when set, is written to Columns.Timestamp; the record
	// carries it if walrelay's table.field.event.timestamp names that
	// column. Zero: a row takes the column's default, a message has no
	// such key.
	Timestamp time.Time
	// Fields are other columns, by name: those walrelay places in headers
	// or the envelope (table.fields.additional.placement), the tracing
	// column, or any column a row needs. For StyleMessage a value must be
	// nil, a string, a bool, a number or a time.Time.
	Fields map[string]any
}

// Writer writes events in the caller's transaction. Create it with New;
// it holds no connection and is safe for concurrent use.
type Writer struct {
	style  Style
	prefix string
	cols   Columns
	table  string // quoted, for StyleRow
	where  string // what errors name: the table or the prefix
}

// New validates cfg and returns a Writer. Errors wrap ErrInvalidConfig
// and name the field and value at fault.
func New(cfg Config) (*Writer, error) {
	w := &Writer{style: cfg.Style, prefix: cfg.Prefix, cols: cfg.Columns.withDefaults()}
	bad := func(format string, args ...any) (*Writer, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	seen := make(map[string]string)
	for _, n := range w.cols.names() {
		if err := checkIdentifier(n[1]); err != nil {
			return bad("%s %q: %v", n[0], n[1], err)
		}
		if other, dup := seen[n[1]]; dup {
			return bad("%s and %s are both %q: each event field needs its own column", other, n[0], n[1])
		}
		seen[n[1]] = n[0]
	}
	switch cfg.Style {
	case StyleRow:
		if cfg.Prefix != "" {
			return bad("Prefix %q is set for StyleRow: a prefix is for StyleMessage; leave it empty or set Style", cfg.Prefix)
		}
		table := cfg.Table
		if table == "" {
			table = DefaultTable
		}
		parts := strings.Split(table, ".")
		if len(parts) > 2 {
			return bad("Table %q: want \"schema.table\" or \"table\", unquoted", table)
		}
		for _, p := range parts {
			if err := checkIdentifier(p); err != nil {
				return bad("Table %q: %v", table, err)
			}
		}
		w.table = pgx.Identifier(parts).Sanitize()
		w.where = "table " + table
	case StyleMessage:
		if cfg.Prefix == "" {
			return bad("Prefix is empty for StyleMessage: set it to walrelay's outbox.message_prefix (e.g. \"outbox\")")
		}
		if !utf8.ValidString(cfg.Prefix) || strings.ContainsRune(cfg.Prefix, 0) {
			return bad("Prefix %q: not UTF-8 text without NUL", cfg.Prefix)
		}
		if cfg.Table != "" {
			return bad("Table %q is set for StyleMessage, which writes no table: leave it empty", cfg.Table)
		}
		w.where = "message prefix " + strconv.Quote(cfg.Prefix)
	default:
		return bad("Style %d: want StyleRow or StyleMessage", int(cfg.Style))
	}
	return w, nil
}

func checkIdentifier(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty name")
	case len(s) > maxIdentifier:
		return fmt.Errorf("longer than Postgres's %d bytes (it would truncate it)", maxIdentifier)
	case !utf8.ValidString(s) || strings.ContainsRune(s, 0):
		return fmt.Errorf("not UTF-8 text without NUL")
	}
	return nil
}

// Style returns the style the Writer writes in.
func (w *Writer) Style() Style { return w.style }

// Emit writes ev in tx and returns its id (generated when ev.ID is
// empty). The event commits or rolls back with tx. An invalid event is
// refused before anything is sent (errors wrap ErrInvalidEvent); a
// Postgres error aborts tx, as any failed statement does.
func (w *Writer) Emit(ctx context.Context, tx pgx.Tx, ev Event) (string, error) {
	query, args, id, err := w.statement(ev)
	if err != nil {
		return "", err
	}
	if _, err := tx.Exec(ctx, query, args...); err != nil {
		return "", fmt.Errorf("writing outbox event %s to %s: %w", id, w.where, err)
	}
	return id, nil
}

// Emit writes ev in tx as a row of public.outbox with Debezium's column
// names, as a Writer from New(Config{}) does, and returns its id.
func Emit(ctx context.Context, tx pgx.Tx, ev Event) (string, error) {
	w, err := New(Config{})
	if err != nil {
		return "", err // not with the zero Config
	}
	return w.Emit(ctx, tx, ev)
}

// EmitSQL is Emit for database/sql (with pgx's stdlib driver, or another
// Postgres driver that takes $n parameters).
func (w *Writer) EmitSQL(ctx context.Context, tx *sql.Tx, ev Event) (string, error) {
	query, args, id, err := w.statement(ev)
	if err != nil {
		return "", err
	}
	if _, err := tx.ExecContext(ctx, query, args...); err != nil {
		return "", fmt.Errorf("writing outbox event %s to %s: %w", id, w.where, err)
	}
	return id, nil
}

// emitMessage is the statement of StyleMessage. The casts choose the
// text variant of pg_logical_emit_message over the bytea one.
const emitMessage = `SELECT pg_logical_emit_message(true, $1::text, $2::text)`

// statement validates ev and returns the SQL that writes it, its
// arguments and the event's id.
func (w *Writer) statement(ev Event) (query string, args []any, id string, err error) {
	if ev.ID == "" {
		ev.ID = newUUIDv7(time.Now())
	}
	if err := w.check(ev); err != nil {
		return "", nil, ev.ID, err
	}
	if w.style == StyleMessage {
		content, err := w.content(ev)
		if err != nil {
			return "", nil, ev.ID, err
		}
		return emitMessage, []any{w.prefix, content}, ev.ID, nil
	}
	cols := []string{w.cols.ID, w.cols.AggregateType, w.cols.AggregateID, w.cols.Type, w.cols.Payload}
	args = []any{ev.ID, ev.AggregateType, ev.AggregateID, ev.Type, nil}
	if ev.Payload != nil {
		args[4] = string(ev.Payload) // pgx sends a string as JSON text as is, for json, jsonb and text columns
	}
	if !ev.Timestamp.IsZero() {
		cols = append(cols, w.cols.Timestamp)
		args = append(args, ev.Timestamp)
	}
	for _, name := range slices.Sorted(maps.Keys(ev.Fields)) {
		cols = append(cols, name)
		args = append(args, ev.Fields[name])
	}
	var b strings.Builder
	b.WriteString("INSERT INTO ")
	b.WriteString(w.table)
	b.WriteString(" (")
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pgx.Identifier{c}.Sanitize())
	}
	b.WriteString(") VALUES (")
	for i := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("$" + strconv.Itoa(i+1))
	}
	b.WriteString(")")
	return b.String(), args, ev.ID, nil
}

// check refuses an event walrelay could not route, naming the field.
func (w *Writer) check(ev Event) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %s: "+format, append([]any{ErrInvalidEvent, ev.ID}, args...)...)
	}
	for _, f := range []struct{ name, v, why string }{
		{"ID", ev.ID, ""},
		{"AggregateType", ev.AggregateType, "walrelay routes on it (route.by.field)"},
		{"AggregateID", ev.AggregateID, "it is the record key that keeps the aggregate's events in order"},
		{"Type", ev.Type, "it is the event type consumers dispatch on"},
	} {
		if strings.TrimSpace(f.v) == "" && f.why != "" {
			return bad("%s is empty: %s", f.name, f.why)
		}
		if !utf8.ValidString(f.v) || strings.ContainsRune(f.v, 0) {
			return bad("%s %q is not UTF-8 text without NUL", f.name, f.v)
		}
	}
	if ev.Payload != nil && !json.Valid(ev.Payload) {
		return bad("Payload is not valid JSON: %.80q", ev.Payload)
	}
	for name := range ev.Fields {
		if err := checkIdentifier(name); err != nil {
			return bad("Fields[%q]: %v", name, err)
		}
		for _, n := range w.cols.names() {
			if name == n[1] {
				return bad("Fields[%q] is the %s column: set the Event's own field instead", name, strings.TrimPrefix(n[0], "Columns."))
			}
		}
	}
	return nil
}

// content is a message's JSON object, keys in a fixed order: the event's
// columns, then Fields sorted by name. Strings are not HTML-escaped, so
// the relay reads back exactly the text given.
func (w *Writer) content(ev Event) (string, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	key := func(k string) {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		appendString(&b, k)
		b.WriteByte(':')
	}
	for _, kv := range [][2]string{
		{w.cols.ID, ev.ID}, {w.cols.AggregateType, ev.AggregateType},
		{w.cols.AggregateID, ev.AggregateID}, {w.cols.Type, ev.Type},
	} {
		key(kv[0])
		appendString(&b, kv[1])
	}
	if ev.Payload != nil {
		key(w.cols.Payload)
		b.Write(bytes.TrimSpace(ev.Payload))
	}
	if !ev.Timestamp.IsZero() {
		key(w.cols.Timestamp)
		appendString(&b, formatTimestamp(ev.Timestamp))
	}
	for _, name := range slices.Sorted(maps.Keys(ev.Fields)) {
		key(name)
		if err := appendScalar(&b, ev.Fields[name]); err != nil {
			return "", fmt.Errorf("%w %s: Fields[%q]: %v", ErrInvalidEvent, ev.ID, name, err)
		}
	}
	b.WriteByte('}')
	return b.String(), nil
}

// formatTimestamp writes t as Postgres prints a timestamptz in UTC with
// DateStyle ISO, the text the router parses for a timestamp column.
func formatTimestamp(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04:05.999999") + "+00"
}

func appendString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)       // a string always encodes
	b.Truncate(b.Len() - 1) // Encode's newline
}

// appendScalar writes a Fields value of a message: JSON's scalars only,
// which the relay reads as a column's text (a string) or JSON text.
func appendScalar(b *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case string:
		if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
			return fmt.Errorf("%q is not UTF-8 text without NUL", v)
		}
		appendString(b, v)
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		fmt.Fprint(b, v)
	case float32:
		return appendFloat(b, float64(v), 32)
	case float64:
		return appendFloat(b, v, 64)
	case json.Number:
		if !json.Valid([]byte(v)) {
			return fmt.Errorf("json.Number %q is not a number", string(v))
		}
		b.WriteString(string(v))
	case time.Time:
		appendString(b, formatTimestamp(v))
	default:
		return fmt.Errorf("a %T: a message's field must be nil, a string, a bool, a number or a time.Time", v)
	}
	return nil
}

func appendFloat(b *bytes.Buffer, f float64, bits int) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("%v has no JSON form", f)
	}
	b.WriteString(strconv.FormatFloat(f, 'g', -1, bits))
	return nil
}
