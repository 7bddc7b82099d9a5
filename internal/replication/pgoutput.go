package replication

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
)

// decoder decodes pgoutput messages. The hot ones (Begin, Insert, Commit:
// every outbox event is one Insert, usually between a Begin and a Commit)
// are decoded into structs it reuses, with tuple data aliasing the input:
// no allocation per message. Everything else goes through pglogrepl.Parse.
//
// A message it returns is valid until the next call to decode, and its
// tuple bytes until the input buffer is reused: the Handler contract.
type decoder struct {
	begin  pglogrepl.BeginMessage
	commit pglogrepl.CommitMessage
	insert pglogrepl.InsertMessage
	tuple  pglogrepl.TupleData
	cols   []pglogrepl.TupleDataColumn // backing store for tuple.Columns
}

// errShort reports a message shorter than its contents say.
var errShort = errors.New("message truncated")

func (d *decoder) decode(data []byte) (pglogrepl.Message, error) {
	if len(data) == 0 {
		return nil, errors.New("empty pgoutput message")
	}
	switch pglogrepl.MessageType(data[0]) {
	case pglogrepl.MessageTypeBegin:
		if err := d.begin.Decode(data[1:]); err != nil {
			return nil, err
		}
		return &d.begin, nil
	case pglogrepl.MessageTypeCommit:
		if err := d.commit.Decode(data[1:]); err != nil {
			return nil, err
		}
		return &d.commit, nil
	case pglogrepl.MessageTypeInsert:
		if err := d.decodeInsert(data[1:]); err != nil {
			return nil, fmt.Errorf("decoding Insert: %w", err)
		}
		return &d.insert, nil
	}
	return pglogrepl.Parse(data)
}

// decodeInsert decodes 'I' relid:int32 'N' tuple.
func (d *decoder) decodeInsert(src []byte) error {
	if len(src) < 5 {
		return errShort
	}
	d.insert.RelationID = binary.BigEndian.Uint32(src)
	if src[4] != 'N' {
		return fmt.Errorf("tuple type %q, want 'N'", src[4])
	}
	if err := d.decodeTuple(src[5:]); err != nil {
		return err
	}
	d.insert.Tuple = &d.tuple
	d.insert.SetType(pglogrepl.MessageTypeInsert)
	return nil
}

// decodeTuple decodes ncols:int16 then per column a kind byte ('n' null,
// 'u' unchanged toast, 't' text, 'b' binary) and for 't'/'b' len:int32 and
// the bytes, which are aliased, not copied.
func (d *decoder) decodeTuple(src []byte) error {
	if len(src) < 2 {
		return errShort
	}
	n := int(binary.BigEndian.Uint16(src))
	src = src[2:]
	if cap(d.cols) < n {
		d.cols = make([]pglogrepl.TupleDataColumn, n)
		d.tuple.Columns = make([]*pglogrepl.TupleDataColumn, n)
		for i := range d.cols {
			d.tuple.Columns[i] = &d.cols[i]
		}
	}
	d.tuple.ColumnNum = uint16(n)
	d.tuple.Columns = d.tuple.Columns[:n]
	for i := range n {
		c := &d.cols[i]
		if len(src) < 1 {
			return errShort
		}
		c.DataType, src = src[0], src[1:]
		switch c.DataType {
		case pglogrepl.TupleDataTypeText, pglogrepl.TupleDataTypeBinary:
			if len(src) < 4 {
				return errShort
			}
			l := binary.BigEndian.Uint32(src)
			src = src[4:]
			if uint64(len(src)) < uint64(l) {
				return errShort
			}
			c.Length, c.Data, src = l, src[:l:l], src[l:]
		case pglogrepl.TupleDataTypeNull, pglogrepl.TupleDataTypeToast:
			c.Length, c.Data = 0, nil
		default:
			return fmt.Errorf("column %d: unknown kind %q", i, c.DataType)
		}
	}
	return nil
}
