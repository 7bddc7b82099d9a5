package router

import (
	"encoding/base64"
	"fmt"
	"strconv"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/connect"
)

// envelopePayloadField is the envelope's payload field name (Debezium's
// ENVELOPE_PAYLOAD).
const envelopePayloadField = "payload"

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
		v, err := parseBool(d)
		if err != nil {
			return b, err
		}
		return strconv.AppendBool(b, v), nil
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
	// Text is written as Kafka Connect's Jackson writes it (internal/connect).
	return connect.AppendJSONString(b, d)
}
