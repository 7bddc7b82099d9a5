package avro

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/walrelay/walrelay/internal/connect"
)

// This file writes the Avro binary body AvroConverter writes for a Connect
// value: AvroData.fromConnectData (AD 394-660) then Confluent's serializer
// (schema-registry avro-serializer AbstractKafkaAvroSerializer.java, "AKAS":
// GenericDatumWriter over a direct BinaryEncoder, writeDatum 249-262, and
// a top-level bytes schema written raw, 214-217). The Avro schema of each
// Connect schema is the one FromConnectSchema derives, so the body follows
// the Connect schema: an optional schema is a union whose null branch is
// first, or second when the schema has a default (AD maybeMakeOptional);
// an optional struct is always ["null", record].

// AppendBinary appends the Avro binary body of v, of Connect schema s
// whose Avro schema is as (from FromConnectSchema), to dst: a struct's
// fields in order, each read as Connect's Struct.get reads it (its
// schema's default when unset); a top-level required bytes value as the
// bytes themselves, without Avro's length prefix (as.RawBytes). A nil v
// is Avro's null for an optional s and an error for a required one; the
// caller writes a Kafka null for a null value instead (AvroConverter
// does).
//
// Errors wrap connect.ErrData for a value that does not fit s.
func AppendBinary(dst []byte, s *connect.Schema, as *Schema, v any) ([]byte, error) {
	if as != nil && as.rawBytes && !s.Optional {
		b, ok := v.([]byte)
		if !ok {
			return dst, mismatch(s, v)
		}
		return append(dst, b...), nil
	}
	return appendValue(dst, s, v)
}

// AppendMessage appends Confluent's wire format of v: the 5-byte header
// (magic byte 0, then the schema id, written as zero for the relay to
// patch in) then the body AppendBinary writes.
func AppendMessage(dst []byte, s *connect.Schema, as *Schema, v any) ([]byte, error) {
	dst = append(dst, 0, 0, 0, 0, 0)
	return AppendBinary(dst, s, as, v)
}

func mismatch(s *connect.Schema, v any) error {
	if v == nil {
		return fmt.Errorf("%w: Found null value for non-optional schema %s", connect.ErrData, s)
	}
	return fmt.Errorf("%w: Invalid type for %s: Go %T", connect.ErrData, s.Type, v)
}

func appendValue(dst []byte, s *connect.Schema, v any) ([]byte, error) {
	if s.Optional {
		// The union's branch (GenericData.resolveUnion).
		nullFirst := s.Default == nil || s.Type == connect.TypeStruct
		switch {
		case v == nil && nullFirst:
			return append(dst, 0), nil
		case v == nil:
			return append(dst, 2), nil // zigzag 1
		case nullFirst:
			dst = append(dst, 2)
		default:
			dst = append(dst, 0)
		}
	} else if v == nil {
		return dst, mismatch(s, v)
	}
	switch s.Type {
	case connect.TypeBoolean:
		x, ok := v.(bool)
		if !ok {
			return dst, mismatch(s, v)
		}
		if x {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case connect.TypeInt8:
		x, ok := v.(int8)
		if !ok {
			return dst, mismatch(s, v)
		}
		return binary.AppendVarint(dst, int64(x)), nil
	case connect.TypeInt16:
		x, ok := v.(int16)
		if !ok {
			return dst, mismatch(s, v)
		}
		return binary.AppendVarint(dst, int64(x)), nil
	case connect.TypeInt32:
		x, ok := v.(int32)
		if !ok {
			return dst, mismatch(s, v)
		}
		return binary.AppendVarint(dst, int64(x)), nil
	case connect.TypeInt64:
		x, ok := v.(int64)
		if !ok {
			return dst, mismatch(s, v)
		}
		return binary.AppendVarint(dst, x), nil
	case connect.TypeFloat32:
		x, ok := v.(float32)
		if !ok {
			return dst, mismatch(s, v)
		}
		return binary.LittleEndian.AppendUint32(dst, math.Float32bits(x)), nil
	case connect.TypeFloat64:
		x, ok := v.(float64)
		if !ok {
			return dst, mismatch(s, v)
		}
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(x)), nil
	case connect.TypeString:
		x, ok := v.(string)
		if !ok {
			return dst, mismatch(s, v)
		}
		dst = binary.AppendVarint(dst, int64(len(x)))
		return append(dst, x...), nil
	case connect.TypeBytes:
		x, ok := v.([]byte)
		if !ok {
			return dst, mismatch(s, v)
		}
		dst = binary.AppendVarint(dst, int64(len(x)))
		return append(dst, x...), nil
	case connect.TypeArray:
		x, ok := v.([]any)
		if !ok {
			return dst, mismatch(s, v)
		}
		// GenericDatumWriter.writeArray: one block of len(x) items, then
		// the 0 that ends the array.
		if len(x) > 0 {
			dst = binary.AppendVarint(dst, int64(len(x)))
		}
		var err error
		for _, e := range x {
			if dst, err = appendValue(dst, s.Items, e); err != nil {
				return dst, err
			}
		}
		return append(dst, 0), nil
	case connect.TypeStruct:
		x, ok := v.(*connect.Struct)
		if !ok {
			return dst, mismatch(s, v)
		}
		if xs := x.Schema(); xs != s && !xs.Equal(s) {
			return dst, fmt.Errorf("%w: Mismatching struct schema", connect.ErrData) // AD 612-615
		}
		var err error
		for i := range s.Fields {
			if dst, err = appendValue(dst, s.Fields[i].Schema, x.At(i)); err != nil {
				return dst, fmt.Errorf("field %q: %w", s.Fields[i].Name, err)
			}
		}
		return dst, nil
	}
	return dst, fmt.Errorf("%w: values of connect schema %s", ErrUnsupported, s)
}
