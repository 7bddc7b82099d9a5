package router

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/jackc/pglogrepl"
)

// MessageNamespace is the namespace of the relation a MessagePlan binds:
// its Table is "message:<prefix>", and an envelope's Connect schema names
// it "<topic.prefix>.message.<prefix>".
const MessageNamespace = "message"

// MessagePlan routes the JSON content of logical decoding messages (the
// table-less outbox: pg_logical_emit_message(true, prefix, content)) with
// the same machinery as rows. It binds a Plan to a relation whose columns
// are the router's configured column names (id, aggregate type and id,
// payload, timestamp, span context, additional placements, schema
// version); Columns turns one message's content into a tuple of that
// relation, and the Plan routes the tuple as it routes an INSERT.
//
// A JSON string is the column's text (as a text column), a number or a
// boolean its JSON text, null or an absent key SQL NULL, an object or an
// array its JSON text. The payload's value, whatever JSON value it is
// (null excepted), is its JSON text as written, as from a jsonb column.
// Keys that name no configured column are ignored. A MessagePlan is not
// safe for concurrent use; the tuple Columns returns is valid until the
// next call and points into content.
type MessagePlan struct {
	*Plan
	prefix  string
	names   []string // column names, in tuple order
	payload int      // index of the payload column
	id      int      // index of the id column
	store   []pglogrepl.TupleDataColumn
	cols    []*pglogrepl.TupleDataColumn
	tmp     [][]byte // unescaped strings, per column
}

// BindMessage binds a MessagePlan for messages with prefix.
func (r *Router) BindMessage(prefix string) (*MessagePlan, error) {
	cfg := r.cfg
	m := &MessagePlan{prefix: prefix, payload: -1, id: -1}
	var cols []Column
	add := func(name string, oid uint32) int {
		if name == "" {
			return -1
		}
		for i, n := range m.names {
			if n == name {
				return i
			}
		}
		m.names = append(m.names, name)
		cols = append(cols, Column{Name: name, TypeOID: oid, TypeModifier: -1})
		return len(m.names) - 1
	}
	// The payload first, so a column named twice keeps its JSON kind.
	m.payload = add(cfg.FieldEventPayload, oidJSONB)
	m.id = add(cfg.FieldEventID, oidText)
	add(cfg.FieldEventKey, oidText)
	add(cfg.FieldEventTimestamp, oidText)
	add(cfg.RouteByField, oidText)
	add(cfg.TracingSpanContextField, oidText)
	// Debezium reads the schema version with Struct.getInt32: an int4.
	add(cfg.FieldEventSchemaVersion, oidInt4)
	for _, a := range r.additional {
		add(a.column, oidText)
	}
	p, err := r.Bind(Relation{Namespace: MessageNamespace, Name: prefix, Columns: cols})
	if err != nil {
		return nil, fmt.Errorf("binding the router to messages with prefix %q: %w", prefix, err)
	}
	p.table = MessageNamespace + ":" + prefix
	m.Plan = p
	m.store = make([]pglogrepl.TupleDataColumn, len(m.names))
	m.cols = make([]*pglogrepl.TupleDataColumn, len(m.names))
	m.tmp = make([][]byte, len(m.names))
	for i := range m.store {
		m.cols[i] = &m.store[i]
	}
	return m, nil
}

// Prefix returns the message prefix the plan routes.
func (m *MessagePlan) Prefix() string { return m.prefix }

// Columns turns a message's content into a tuple of the plan's relation,
// for RouteTo (not RouteInPlace: the tuple may point into the plan's own
// scratch). Content that is not valid UTF-8, not JSON, not an object, or
// without an event id is a ClassPayloadInvalid *RowError.
func (m *MessagePlan) Columns(content []byte) ([]*pglogrepl.TupleDataColumn, error) {
	for i := range m.store {
		m.store[i] = pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeNull}
	}
	invalid := func(err error) error { return &RowError{Class: ClassPayloadInvalid, Err: err} }
	switch {
	case !utf8.Valid(content):
		return nil, invalid(errors.New("message content is not valid UTF-8"))
	case !json.Valid(content):
		return nil, invalid(errors.New("message content is not valid JSON"))
	}
	s := scanner{b: content}
	s.space()
	if s.peek() != '{' {
		return nil, invalid(fmt.Errorf("message content is a JSON %s, not an object", jsonKind(s.peek())))
	}
	s.i++
	for {
		s.space()
		if s.peek() == '}' {
			break
		}
		key, escaped := s.str()
		s.space()
		s.i++ // ':'
		s.space()
		start := s.i
		s.value()
		val := content[start:s.i]
		s.space()
		if s.peek() == ',' {
			s.i++
		}
		if escaped {
			var k string
			if err := json.Unmarshal(key, &k); err != nil {
				return nil, invalid(fmt.Errorf("message content: key %s: %w", key, err))
			}
			key = []byte(k)
		} else {
			key = key[1 : len(key)-1]
		}
		idx := m.index(key)
		if idx < 0 {
			continue
		}
		c := &m.store[idx]
		switch {
		case val[0] == 'n': // null
			*c = pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeNull}
		case idx == m.payload || val[0] != '"':
			*c = pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeText, Data: val}
		case bytes.IndexByte(val, '\\') < 0:
			*c = pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeText, Data: val[1 : len(val)-1]}
		default:
			var str string
			if err := json.Unmarshal(val, &str); err != nil {
				return nil, invalid(fmt.Errorf("message content: %q: %w", m.names[idx], err))
			}
			m.tmp[idx] = append(m.tmp[idx][:0], str...)
			*c = pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeText, Data: m.tmp[idx]}
		}
	}
	if m.id >= 0 && m.store[m.id].DataType == pglogrepl.TupleDataTypeNull {
		return nil, &RowError{Class: ClassPayloadInvalid, Column: m.names[m.id],
			Err: fmt.Errorf("message content has no %q (the event id)", m.names[m.id])}
	}
	return m.cols, nil
}

func (m *MessagePlan) index(key []byte) int {
	for i, n := range m.names {
		if n == string(key) {
			return i
		}
	}
	return -1
}

// jsonKind names the JSON value starting with c.
func jsonKind(c byte) string {
	switch c {
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// scanner walks JSON that json.Valid accepted: it never meets an error.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// str returns the string at s.i with its quotes, and whether it holds an
// escape.
func (s *scanner) str() (raw []byte, escaped bool) {
	start := s.i
	s.i++
	for s.b[s.i] != '"' {
		if s.b[s.i] == '\\' {
			escaped = true
			s.i++
		}
		s.i++
	}
	s.i++
	return s.b[start:s.i], escaped
}

// value moves past the value at s.i.
func (s *scanner) value() {
	switch s.peek() {
	case '"':
		s.str()
	case '{', '[':
		depth := 0
		for {
			switch s.b[s.i] {
			case '"':
				s.str()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			s.i++
			if depth == 0 {
				return
			}
		}
	default: // a number, true, false, null
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return
			}
			s.i++
		}
	}
}
