package router

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/connect/avro"
)

// Type OIDs with special handling (pg_type.dat).
const (
	oidBool    = 16
	oidBytea   = 17
	oidInt8    = 20
	oidInt2    = 21
	oidInt4    = 23
	oidText    = 25
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
	// typed is Debezium's Connect type of the column, set when a converter
	// other than raw writes it.
	typed *typed
}

// extra is a bound additional placement.
type extra struct {
	field
	alias   string
	jsonKey []byte // `,"alias":` for envelope placements
}

// maxCachedTopics bounds a Plan's topic cache; it is cleared when full.
const maxCachedTopics = 4096

// Plan routes the rows of one relation. Make one with Router.Bind; make a new
// one when a new Relation message arrives for the table. A Plan is not safe
// for concurrent use.
type Plan struct {
	r       *Router
	table   string
	need    int // len(cols) must be at least this
	id      field
	key     field
	payload field
	ts      field
	route   field
	part    field
	trace   field // tracing.span.context.field, when the table has it
	version field // table.field.event.schema.version, when an envelope schema carries it
	// schemaPrefix starts the envelope's Connect schema name:
	// "<topic.prefix>.<schema>.<table>.".
	schemaPrefix string
	headers      []extra
	envFields    []extra

	// The avro converter's schemas: the key column's and the payload
	// column's, derived at Bind; the envelope's per route.by.field value
	// and version; and the avro.schema.version.column columns.
	avroKey, avroValue               *avro.Schema
	avroEnv                          map[string][]envAvro
	avroKeyVersion, avroValueVersion field

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
	// The span context column is optional: Debezium looks for it in every
	// row and traces only rows of tables that have it.
	p.trace.idx = -1
	if tf := cfg.TracingSpanContextField; tf != "" {
		if f, err := lookup(optTracingField, tf); err == nil {
			p.trace = f
		}
	}
	for _, a := range r.additional {
		f, err := lookup(optAdditionalPlacement, a.column)
		var missing *MissingColumnError
		if errors.As(err, &missing) && r.ignoreMissing {
			continue // table.field.additional.missing=ignore: Debezium skips the placement
		}
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
	p.version.idx = -1
	if err := p.bindConverters(rel, lookup); err != nil {
		return nil, err
	}
	if err := p.bindAvro(rel, lookup); err != nil {
		return nil, err
	}
	p.pieces = make([]piece, 3+len(p.headers))
	return p, nil
}

// bindConverters gives the columns the converters other than raw write
// their Connect types.
func (p *Plan) bindConverters(rel Relation, lookup func(opt, col string) (field, error)) error {
	r := p.r
	typ := func(f *field, opt string) error {
		if f.idx < 0 {
			return nil
		}
		return bindTyped(f, rel.Columns[f.idx], opt)
	}
	if r.keyConverter != nil {
		if err := typ(&p.key, optFieldEventKey); err != nil {
			return err
		}
	}
	if r.headerConverter != nil {
		if err := typ(&p.id, optFieldEventID); err != nil {
			return err
		}
		for i := range p.headers {
			if err := typ(&p.headers[i].field, optAdditionalPlacement); err != nil {
				return err
			}
		}
	}
	if r.valueConverter == nil {
		return nil
	}
	if err := typ(&p.payload, optFieldEventPayload); err != nil {
		return err
	}
	if !r.envelope {
		return nil
	}
	for i := range p.envFields {
		if err := typ(&p.envFields[i].field, optAdditionalPlacement); err != nil {
			return err
		}
	}
	if prefix := r.conv.TopicPrefix; prefix != "" {
		p.schemaPrefix = prefix + "."
	}
	p.schemaPrefix += rel.Namespace + "." + rel.Name + "."
	if vc := r.cfg.FieldEventSchemaVersion; vc != "" {
		var err error
		if p.version, err = lookup(optSchemaVersion, vc); err != nil {
			return err
		}
		if c := rel.Columns[p.version.idx]; c.TypeOID != oidInt4 {
			// EventRouterDelegate reads it with Struct.getInt32.
			return fmt.Errorf("%s column %q: must be of type integer (int4), as Debezium reads it as an INT32", optSchemaVersion, vc)
		}
		if err := typ(&p.version, optSchemaVersion); err != nil {
			return err
		}
	}
	return nil
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
