package router

import "github.com/jackc/pglogrepl"

// RawKey returns the key column's (table.field.event.key) value as the row
// holds it, and false when the tuple lacks it or it is NULL. It is for
// showing a row the router refuses (walrelay slot peek), so it never
// fails and applies no converter: a routed record's key is
// Message.Key.
func (p *Plan) RawKey(cols []*pglogrepl.TupleDataColumn) (string, bool) {
	c := rawColumn(p.key, cols)
	if c == nil {
		return "", false
	}
	return string(c.Data), true
}

// RawPayloadBytes returns the size of the payload column's
// (table.field.event.payload) value as the row holds it: 0 when the tuple
// lacks it or it is NULL. Like RawKey, for a row the router refuses.
func (p *Plan) RawPayloadBytes(cols []*pglogrepl.TupleDataColumn) int {
	if c := rawColumn(p.payload, cols); c != nil {
		return len(c.Data)
	}
	return 0
}

// rawColumn is f's column of cols when it holds a value.
func rawColumn(f field, cols []*pglogrepl.TupleDataColumn) *pglogrepl.TupleDataColumn {
	if f.idx < 0 || f.idx >= len(cols) {
		return nil
	}
	c := cols[f.idx]
	if c == nil || (c.DataType != pglogrepl.TupleDataTypeText && c.DataType != pglogrepl.TupleDataTypeBinary) {
		return nil
	}
	return c
}
