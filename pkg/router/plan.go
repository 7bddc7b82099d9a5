package router

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
)

// Column describes one column of a table as a pgoutput Relation message does.
type Column struct {
	// Name is the column name, matched exactly (case-sensitively) against the
	// configured names.
	Name string
	// TypeOID is the column's type OID; it selects how values are decoded.
	TypeOID uint32
}

// Relation describes a table as a pgoutput Relation message does.
type Relation struct {
	ID        uint32
	Namespace string
	Name      string
	// Columns are in tuple order.
	Columns []Column
}

// Header is one Kafka record header.
type Header struct {
	Key string
	// Value is nil when the column is NULL (a Kafka null header value).
	Value []byte
}

// Message is one routed outbox event, ready to produce. Its Key, Value and
// header values point into Buf when it was routed with Route or RouteTo, and
// into the tuple given to RouteInPlace (decoded bytea values excepted, which
// are in Buf) when it was routed with that; an envelope Value has its own
// allocation either way.
type Message struct {
	Topic string
	// Key is nil when the key column is NULL or no key column is configured.
	Key []byte
	// Value is nil for a tombstone.
	Value []byte
	// Headers hold "id" (the event id) first, then the header placements in
	// configuration order.
	Headers []Header
	// Timestamp is the record timestamp: the timestamp column when configured
	// and not NULL, else the transaction's commit time.
	Timestamp time.Time
	// Partition is meaningful only when HasPartition is true.
	Partition    int32
	HasPartition bool

	// Buf holds the copied bytes Key, Value and the header values point
	// into: all of them with RouteTo, only decoded bytea values with
	// RouteInPlace. Routing writes them into Buf when it has room and into
	// a new buffer, left in Buf, otherwise. A caller that keeps a message's
	// bytes after the next RouteTo or RouteInPlace into the same Message
	// moves Buf away first (sets it to nil, or to a spare buffer it owns):
	// recycling buffers that way, routing allocates nothing.
	Buf []byte
}

// Type OIDs with special handling (pg_type.dat).
const (
	oidBool    = 16
	oidBytea   = 17
	oidInt8    = 20
	oidInt2    = 21
	oidInt4    = 23
	oidJSON    = 114
	oidFloat4  = 700
	oidFloat8  = 701
	oidNumeric = 1700
	oidJSONB   = 3802
)

// kind is how a column's text is interpreted.
type kind uint8

const (
	kindText   kind = iota // the text itself (also every type not listed below)
	kindJSON               // json, jsonb: the text is JSON
	kindBytea              // bytea: \x hex, decoded to raw bytes
	kindNumber             // int2/4/8, float4/8, numeric: a JSON number when it is one
	kindBool               // bool: t or f
)

func kindOf(oid uint32) kind {
	switch oid {
	case oidJSON, oidJSONB:
		return kindJSON
	case oidBytea:
		return kindBytea
	case oidInt2, oidInt4, oidInt8, oidFloat4, oidFloat8, oidNumeric:
		return kindNumber
	case oidBool:
		return kindBool
	}
	return kindText
}

// field is a configured column resolved against a relation; idx < 0 means
// the option is unset.
type field struct {
	idx  int
	name string
	kind kind
}

// extra is a bound additional placement.
type extra struct {
	field
	alias   string
	jsonKey []byte // `,"alias":` for envelope placements
}

// piece is one byte slice of a message: copied into its buffer, or kept in
// the tuple (RouteInPlace).
type piece struct {
	f    *field
	src  []byte
	null bool
	n    int    // length once decoded
	out  []byte // the copy, in the message buffer, or src itself when kept
	kept bool   // left where it is (RouteInPlace): out is src
}

// maxCachedTopics bounds a Plan's topic cache; it is cleared when full.
const maxCachedTopics = 4096

// envelopePayloadField is the envelope's payload field name (Debezium's
// ENVELOPE_PAYLOAD).
const envelopePayloadField = "payload"

// Plan routes the rows of one relation. Make one with Router.Bind; make a new
// one when a new Relation message arrives for the table. A Plan is not safe
// for concurrent use.
type Plan struct {
	r         *Router
	table     string
	need      int // len(cols) must be at least this
	id        field
	key       field
	payload   field
	ts        field
	route     field
	part      field
	headers   []extra
	envFields []extra

	topics map[string]string // route.by.field value -> valid topic
	pieces []piece           // scratch: key, id, payload, header placements
	tmp    []byte            // scratch for bytea inside an envelope
}

// Bind resolves the configured columns against rel. A configured column the
// relation lacks yields a *MissingColumnError.
func (r *Router) Bind(rel Relation) (*Plan, error) {
	p := &Plan{
		r:      r,
		table:  rel.Namespace + "." + rel.Name,
		topics: make(map[string]string),
	}
	lookup := func(opt, col string) (field, error) {
		if col == "" {
			return field{idx: -1}, nil
		}
		for i, c := range rel.Columns {
			if c.Name == col {
				p.need = max(p.need, i+1)
				return field{idx: i, name: col, kind: kindOf(c.TypeOID)}, nil
			}
		}
		e := &MissingColumnError{Column: col, Option: opt, Table: p.table}
		for _, c := range rel.Columns {
			if strings.EqualFold(c.Name, col) {
				e.Suggestion = c.Name
				break
			}
		}
		return field{}, e
	}
	cfg := r.cfg
	var err error
	for _, b := range [...]struct {
		dst      *field
		opt, col string
	}{
		{&p.id, optFieldEventID, cfg.FieldEventID},
		{&p.key, optFieldEventKey, cfg.FieldEventKey},
		{&p.payload, optFieldEventPayload, cfg.FieldEventPayload},
		{&p.ts, optFieldEventTimestamp, cfg.FieldEventTimestamp},
		{&p.route, optRouteByField, cfg.RouteByField},
	} {
		if *b.dst, err = lookup(b.opt, b.col); err != nil {
			return nil, err
		}
	}
	p.part.idx = -1
	for _, a := range r.additional {
		f, err := lookup(optAdditionalPlacement, a.column)
		if err != nil {
			return nil, err
		}
		switch a.place {
		case placeHeader:
			p.headers = append(p.headers, extra{field: f, alias: a.alias})
		case placeEnvelope:
			k := append([]byte{','}, appendJSONStringLossy(nil, a.alias)...)
			p.envFields = append(p.envFields, extra{field: f, alias: a.alias, jsonKey: append(k, ':')})
		case placePartition:
			p.part = f
		}
	}
	p.pieces = make([]piece, 3+len(p.headers))
	return p, nil
}

// Table returns the bound relation as "namespace.name".
func (p *Plan) Table() string { return p.table }

// EventID returns the text of the event id column for log lines, or "" when
// the tuple lacks it or it is NULL. It never fails.
func (p *Plan) EventID(cols []*pglogrepl.TupleDataColumn) string {
	if p.id.idx < 0 || p.id.idx >= len(cols) {
		return ""
	}
	c := cols[p.id.idx]
	if c == nil || c.DataType != pglogrepl.TupleDataTypeText {
		return ""
	}
	return string(c.Data)
}

// Route turns the new tuple of one INSERT (pgoutput text format) into a
// Message. commitTime is the transaction's commit time. The Message holds
// copies: the caller may reuse cols' buffers once Route returns. Errors are
// *RowError.
func (p *Plan) Route(cols []*pglogrepl.TupleDataColumn, commitTime time.Time) (Message, error) {
	var msg Message
	if err := p.RouteTo(&msg, cols, commitTime); err != nil {
		return Message{}, err
	}
	return msg, nil
}

// RouteTo is Route writing into *out, whose Headers slice and Buf it
// reuses: the headers are valid until the next RouteTo with the same out,
// and so are their bytes unless out.Buf was moved away (see Message.Buf).
// On error *out is unspecified.
func (p *Plan) RouteTo(out *Message, cols []*pglogrepl.TupleDataColumn, commitTime time.Time) error {
	return p.routeTo(out, cols, commitTime, false)
}

// RouteInPlace is RouteTo without copying what needs no decoding: the key,
// a raw payload and the header values point into cols' bytes, except those
// of bytea columns, which are decoded into out.Buf. The caller keeps cols'
// bytes unchanged for as long as it uses the message.
func (p *Plan) RouteInPlace(out *Message, cols []*pglogrepl.TupleDataColumn, commitTime time.Time) error {
	return p.routeTo(out, cols, commitTime, true)
}

func (p *Plan) routeTo(out *Message, cols []*pglogrepl.TupleDataColumn, commitTime time.Time, inPlace bool) error {
	if len(cols) < p.need {
		return &RowError{Class: ClassColumnMissing,
			Err: fmt.Errorf("tuple has %d columns, table %q needs at least %d", len(cols), p.table, p.need)}
	}
	*out = Message{Headers: out.Headers[:0], Buf: out.Buf}
	msg := out

	rv, null, err := columnData(cols, &p.route)
	if err != nil {
		return err
	}
	if null || len(rv) == 0 {
		what := "empty"
		if null {
			what = "NULL"
		}
		return &RowError{Class: ClassRoutingValueMissing, Column: p.route.name,
			Err: fmt.Errorf("%s value is %s", optRouteByField, what)}
	}
	if msg.Topic, err = p.topic(rv); err != nil {
		return &RowError{Class: ClassTopicInvalid, Column: p.route.name, Value: errValue(rv), Err: err}
	}

	msg.Timestamp = commitTime
	if p.ts.idx >= 0 {
		d, null, err := columnData(cols, &p.ts)
		if err != nil {
			return err
		}
		if !null {
			if msg.Timestamp, err = parseTimestamp(d); err == nil {
				err = checkRecordTime(msg.Timestamp)
			}
			if err != nil {
				return &RowError{Class: ClassPayloadInvalid, Column: p.ts.name, Value: errValue(d), Err: err}
			}
		}
	}

	if p.part.idx >= 0 {
		d, null, err := columnData(cols, &p.part)
		if err != nil {
			return err
		}
		if !null {
			if msg.Partition, err = parsePartition(d); err != nil {
				return &RowError{Class: ClassPayloadInvalid, Column: p.part.name, Value: errValue(d), Err: err}
			}
			msg.HasPartition = true
		}
	}

	pd, pnull, err := columnData(cols, &p.payload)
	if err != nil {
		return err
	}
	tombstone := pnull && len(p.envFields) == 0 // Debezium forwards a null payload as a null value
	if p.r.cfg.TombstoneOnEmptyPayload && (pnull || payloadEmpty(pd, p.payload.kind)) {
		tombstone = true
	}

	// Collect every slice the message returns, size them, then copy them all
	// (in place: those that need decoding) into one allocation.
	pcs := p.pieces[:0]
	pcs = append(pcs, piece{f: &p.id})
	if p.key.idx >= 0 {
		pcs = append(pcs, piece{f: &p.key})
	}
	rawPayload := !tombstone && len(p.envFields) == 0
	if rawPayload {
		pcs = append(pcs, piece{f: &p.payload, src: pd, null: pnull})
	}
	for i := range p.headers {
		pcs = append(pcs, piece{f: &p.headers[i].field})
	}
	defer clear(pcs) // drop references to the caller's and the message's buffers
	total := 0
	for i := range pcs {
		pc := &pcs[i]
		if pc.f != &p.payload {
			if pc.src, pc.null, err = columnData(cols, pc.f); err != nil {
				return err
			}
		}
		if pc.null {
			continue
		}
		if inPlace && pc.f.kind != kindBytea {
			pc.out, pc.kept = pc.src[:len(pc.src):len(pc.src)], true
			continue
		}
		if pc.n, err = decodedLen(pc.src, pc.f.kind); err != nil {
			return p.valueErr(pc.f, pc.src, err)
		}
		total += pc.n
	}
	buf := msg.Buf
	if cap(buf) < total {
		buf = make([]byte, total)
	}
	buf = buf[:total]
	msg.Buf = buf
	off := 0
	for i := range pcs {
		pc := &pcs[i]
		if pc.null || pc.kept {
			continue
		}
		pc.out = buf[off : off+pc.n : off+pc.n]
		off += pc.n
		if err := decodeInto(pc.out, pc.src, pc.f.kind); err != nil {
			return p.valueErr(pc.f, pc.src, err)
		}
	}

	i := 0
	msg.Headers = append(msg.Headers[:0], Header{Key: "id", Value: pcs[i].out})
	i++
	if p.key.idx >= 0 {
		msg.Key = pcs[i].out
		i++
	}
	if rawPayload {
		msg.Value = pcs[i].out
		i++
	}
	for h := range p.headers {
		msg.Headers = append(msg.Headers, Header{Key: p.headers[h].alias, Value: pcs[i].out})
		i++
	}

	if !tombstone && len(p.envFields) > 0 {
		if msg.Value, err = p.envelope(cols, pd, pnull); err != nil {
			return err
		}
	}
	return nil
}

// topic returns the topic for a route.by.field value, from the cache when it
// has been seen before.
func (p *Plan) topic(rv []byte) (string, error) {
	if t, ok := p.topics[string(rv)]; ok {
		return t, nil
	}
	v := string(rv)
	t := p.r.topicFor(v)
	if err := validateTopic(t); err != nil {
		return "", err
	}
	if len(p.topics) >= maxCachedTopics {
		clear(p.topics)
	}
	p.topics[v] = t
	return t, nil
}

// envelope builds the JSON object {"payload": ..., "<alias>": ...}.
func (p *Plan) envelope(cols []*pglogrepl.TupleDataColumn, pd []byte, pnull bool) ([]byte, error) {
	est := len(`{"payload":}`) + len(pd) + len(pd)/2
	for i := range p.envFields {
		est += len(p.envFields[i].jsonKey) + 24
	}
	b := make([]byte, 0, est)
	b = append(b, `{"`+envelopePayloadField+`":`...)
	var err error
	if b, err = p.appendJSON(b, pd, pnull, p.payload.kind); err != nil {
		return nil, &RowError{Class: ClassPayloadInvalid, Column: p.payload.name,
			Err: fmt.Errorf("encoding payload for the envelope: %w", err)}
	}
	for i := range p.envFields {
		e := &p.envFields[i]
		d, null, err := columnData(cols, &e.field)
		if err != nil {
			return nil, err
		}
		b = append(b, e.jsonKey...)
		if b, err = p.appendJSON(b, d, null, e.kind); err != nil {
			return nil, &RowError{Class: ClassPayloadInvalid, Column: e.name, Value: errValue(d),
				Err: fmt.Errorf("encoding envelope field %q: %w", e.alias, err)}
		}
	}
	return append(b, '}'), nil
}

// appendJSON appends a column value as JSON: null, raw JSON for json/jsonb,
// numbers and booleans as such, base64 strings for bytea, strings otherwise.
func (p *Plan) appendJSON(b, d []byte, null bool, k kind) ([]byte, error) {
	if null {
		return append(b, "null"...), nil
	}
	switch k {
	case kindJSON:
		return append(b, d...), nil
	case kindNumber:
		if isJSONNumber(d) {
			return append(b, d...), nil
		}
		// NaN and ±Infinity have no JSON number form: send their text.
	case kindBool:
		switch string(d) {
		case "t":
			return append(b, "true"...), nil
		case "f":
			return append(b, "false"...), nil
		}
		return b, fmt.Errorf("boolean text %q is neither t nor f", errValue(d))
	case kindBytea:
		n, err := decodedLen(d, kindBytea)
		if err != nil {
			return b, err
		}
		if cap(p.tmp) < n {
			p.tmp = make([]byte, n)
		}
		raw := p.tmp[:n]
		if err := decodeInto(raw, d, kindBytea); err != nil {
			return b, err
		}
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, raw)
		return append(b, '"'), nil
	}
	return appendJSONString(b, d)
}

// valueErr builds the RowError for a value that cannot be decoded. A payload
// is never echoed into the error.
func (p *Plan) valueErr(f *field, d []byte, err error) error {
	re := &RowError{Class: ClassPayloadInvalid, Column: f.name, Err: err}
	if f != &p.payload {
		re.Value = errValue(d)
	}
	return re
}

// columnData returns the text of column f, or null. A column sent as
// unchanged TOAST or in binary format is a ClassPayloadInvalid RowError: an
// INSERT in text mode never carries either.
func columnData(cols []*pglogrepl.TupleDataColumn, f *field) ([]byte, bool, error) {
	c := cols[f.idx]
	if c == nil {
		return nil, true, nil
	}
	switch c.DataType {
	case pglogrepl.TupleDataTypeText:
		return c.Data, false, nil
	case pglogrepl.TupleDataTypeNull:
		return nil, true, nil
	case pglogrepl.TupleDataTypeToast:
		return nil, false, &RowError{Class: ClassPayloadInvalid, Column: f.name, Err: errToast}
	case pglogrepl.TupleDataTypeBinary:
		return nil, false, &RowError{Class: ClassPayloadInvalid, Column: f.name, Err: errBinary}
	}
	return nil, false, &RowError{Class: ClassPayloadInvalid, Column: f.name,
		Err: fmt.Errorf("unknown tuple data type %q", c.DataType)}
}

var (
	// errToast is the RowError.Err for a column sent as unchanged TOAST.
	errToast = errors.New("value sent as unchanged TOAST, which an INSERT never carries")
	// errBinary is the RowError.Err for a column sent in binary format.
	errBinary = errors.New("value sent in binary format; walrelay streams text format")
)

// payloadEmpty reports whether a non-NULL payload counts as empty for
// route.tombstone.on.empty.payload: text that Java's String.trim() empties
// (only bytes <= ' '), or a zero-length bytea.
func payloadEmpty(d []byte, k kind) bool {
	if k == kindBytea {
		return len(d) == 2 && d[0] == '\\' && d[1] == 'x'
	}
	for _, c := range d {
		if c > ' ' {
			return false
		}
	}
	return true
}
