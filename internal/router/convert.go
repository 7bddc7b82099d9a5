package router

import (
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/connect"
	"github.com/walrelay/walrelay/internal/connect/avro"
)

// This file applies the key, value and header converters other than raw:
// each column becomes the Connect value and schema Debezium gives it
// (debezium.go), and the record is built as Debezium's
// EventRouterDelegate.apply builds it
// (debezium-connect-plugins/src/main/java/io/debezium/transforms/outbox/EventRouterDelegate.java)
// before the converter (internal/connect) turns it into bytes.

// headerConverter turns a header's Connect value into bytes.
type headerConverter func(*connect.Schema, any) ([]byte, error)

// converter returns the internal/connect converter for s; nil for raw
// (and for avro.schema registry, which writes the column's text). interner
// is the Router's, for the avro converter.
func (s convSpec) converter(interner *avro.Interner) connect.Converter {
	switch s.conv {
	case ConvString:
		return connect.StringConverter{}
	case ConvJSON:
		return connect.JSONConverter{DisableSchemas: !s.schemas}
	case ConvBytes:
		return connect.ByteArrayConverter{}
	case ConvBinary:
		var d connect.Converter
		if s.delegate != 0 {
			d = convSpec{conv: s.delegate, schemas: s.schemas}.converter(nil)
		}
		return connect.BinaryDataConverter{Delegate: d}
	case ConvAvro:
		if s.avro.Registry {
			return nil // the column's text, as raw; the relay encodes it
		}
		return avroConverter{opts: s.avro.Options, interner: interner}
	}
	return nil
}

// headerFunc returns the header converter for h; nil for raw.
func (h HeaderConverter) headerFunc() headerConverter {
	switch h {
	case HeaderSimple:
		return connect.SimpleHeaderConverter{}.FromConnectHeader
	case HeaderString:
		return connect.StringConverter{}.FromConnectData
	}
	return nil
}

// typed is the Connect side of a bound column: Debezium's schema for it.
type typed struct {
	t colType
	s *connect.Schema
}

// bindTyped gives f its Connect type and schema; opt names the option that
// selected the column, for the error.
func bindTyped(f *field, c Column, opt string) error {
	t, err := debeziumType(c.TypeOID, c.TypeModifier)
	if err != nil {
		return fmt.Errorf("%s column %q: %w", opt, c.Name, err)
	}
	f.typed = &typed{t: t, s: t.schema(!c.NotNull)}
	if c.HasDefault {
		if v, ok := debeziumDefault(c.TypeOID, t, c.Default); ok {
			f.typed.s.Default = v
		}
	}
	return nil
}

// connectValue returns column f's Connect value as EventRouterDelegate
// reads it, with Struct.get: a NULL is the schema's default when the column
// has one, else nil.
func connectValue(cols []*pglogrepl.TupleDataColumn, f *field) (any, error) {
	d, null, err := columnData(cols, f)
	if err != nil || null {
		return f.typed.s.Default, err
	}
	v, err := debeziumValue(f.typed.t, d)
	if err != nil {
		return nil, &RowError{Class: ClassPayloadInvalid, Column: f.name, Value: errValue(d), Err: err}
	}
	return v, nil
}

// convert replaces the raw key, value and header values of msg with what
// the configured converters write. tombstone is a tombstone asked for by
// route.tombstone.on.empty.payload; rv is the route.by.field value.
func (p *Plan) convert(msg *Message, cols []*pglogrepl.TupleDataColumn, rv []byte, tombstone bool) error {
	r := p.r
	if r.keyConverter != nil {
		var ks *connect.Schema
		var kv any
		if p.key.idx >= 0 {
			var err error
			if kv, err = connectValue(cols, &p.key); err != nil {
				return err
			}
			ks = p.key.typed.s
		}
		if r.keyConv.conv == ConvAvro {
			if err := p.avroKeyTo(msg, ks, kv); err != nil {
				return err
			}
		} else if b, err := r.keyConverter.FromConnectData(ks, kv); err != nil {
			return &RowError{Class: ClassPayloadInvalid, Column: p.key.name, Err: fmt.Errorf("key converter %s: %w", r.keyConv.conv, err)}
		} else {
			msg.Key = b
		}
	}
	if r.headerConverter != nil {
		// The id header follows the trace headers; placements follow it.
		first := len(msg.Headers) - 1 - len(p.headers)
		for i := first; i < len(msg.Headers); i++ {
			f := &p.id
			if i > first {
				f = &p.headers[i-first-1].field
			}
			v, err := connectValue(cols, f)
			if err != nil {
				return err
			}
			b, err := r.headerConverter(f.typed.s, v)
			if err != nil {
				return &RowError{Class: ClassPayloadInvalid, Column: f.name, Err: fmt.Errorf("header converter: %w", err)}
			}
			msg.Headers[i].Value = b
		}
	}
	if r.valueConverter == nil {
		return nil
	}
	if tombstone {
		return nil // Debezium's null schema and value: a Kafka null
	}
	if r.valueConv.conv == ConvAvro {
		return p.avroValueTo(msg, cols, rv)
	}
	s, v, err := p.connectPayload(cols)
	if err != nil {
		return err
	}
	if p.r.envelope {
		if s, v, err = p.connectEnvelope(cols, rv, s, v); err != nil {
			return err
		}
	}
	b, err := r.valueConverter.FromConnectData(s, v)
	if err != nil {
		return &RowError{Class: ClassPayloadInvalid, Column: p.payload.name, Err: fmt.Errorf("value converter %s: %w", r.valueConv.conv, err)}
	}
	msg.Value = b
	return nil
}

// connectPayload returns the payload's schema and value, expanded when
// table.expand.json.payload is set and the payload is JSON text.
func (p *Plan) connectPayload(cols []*pglogrepl.TupleDataColumn) (*connect.Schema, any, error) {
	v, err := connectValue(cols, &p.payload)
	if err != nil {
		return nil, nil, err
	}
	s, isString := v.(string)
	if !p.r.cfg.ExpandJSONPayload || !isString {
		return p.payload.typed.s, v, nil
	}
	es, ev, err := connect.ExpandJSON(p.payload.name, s, connect.ExpandOptions{
		NullAsOptionalBytes:        p.r.jsonNulls,
		EmptyArrayAsOptionalString: p.r.emptyArrays,
	})
	switch {
	case errors.Is(err, connect.ErrNotExpanded):
		// Debezium logs "JSON expansion failed" and sends the string.
		return p.payload.typed.s, v, nil
	case err != nil:
		return nil, nil, &RowError{Class: ClassPayloadInvalid, Column: p.payload.name,
			Err: fmt.Errorf("%s: %w", optExpandJSONPayload, err)}
	}
	return es, ev, nil
}

// connectEnvelope builds the envelope struct of EventRouterDelegate: a
// schema named after the row's schema with the route.by.field value before
// its last segment (getSchemaName), fields "payload" then the envelope
// placements with their columns' schemas, and the version from
// table.field.event.schema.version.
func (p *Plan) connectEnvelope(cols []*pglogrepl.TupleDataColumn, rv []byte, ps *connect.Schema, pv any) (*connect.Schema, any, error) {
	var version any
	if p.version.idx >= 0 {
		var err error
		if version, err = connectValue(cols, &p.version); err != nil {
			return nil, nil, err
		}
	}
	s := p.envelopeSchema(rv, version, ps)
	st, err := connect.NewStruct(s)
	if err == nil {
		err = st.Put(envelopePayloadField, pv)
	}
	for i := 0; err == nil && i < len(p.envFields); i++ {
		e := &p.envFields[i]
		var v any
		if v, err = connectValue(cols, &e.field); err == nil {
			err = st.Put(e.alias, v)
		}
	}
	if err != nil {
		return nil, nil, &RowError{Class: ClassPayloadInvalid, Err: fmt.Errorf("building the envelope: %w", err)}
	}
	return s, st, nil
}

// envelopeSchema returns the envelope's Connect schema for routing value
// rv, schema version (nil for none) and payload schema ps.
func (p *Plan) envelopeSchema(rv []byte, version any, ps *connect.Schema) *connect.Schema {
	s := &connect.Schema{Type: connect.TypeStruct, Name: p.schemaPrefix + string(rv) + ".Value"}
	if version != nil {
		s.Version, s.HasVersion = version.(int32), true
	}
	s.Fields = make([]connect.Field, 0, 1+len(p.envFields))
	s.Fields = append(s.Fields, connect.Field{Name: envelopePayloadField, Schema: ps})
	for i := range p.envFields {
		e := &p.envFields[i]
		s.Fields = append(s.Fields, connect.Field{Name: e.alias, Schema: e.typed.s})
	}
	return s
}

// nullPayloadDefault reports, for a NULL payload, whether a converter
// other than raw reads a default in its place (Struct.get), and if so
// whether route.tombstone.on.empty.payload counts it as empty
// (payload.toString().trim().isEmpty(): only a string default can be).
func (p *Plan) nullPayloadDefault() (has, empty bool) {
	if p.payload.typed == nil || p.payload.typed.s.Default == nil {
		return false, false
	}
	s, isString := p.payload.typed.s.Default.(string)
	return true, isString && payloadEmpty([]byte(s), kindText)
}
