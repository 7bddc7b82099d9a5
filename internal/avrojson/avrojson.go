// Package avrojson encodes a JSON document as the Avro binary of a given
// Avro schema: the outbox's JSON payload becomes a typed Avro record by the
// schema the registry holds for its subject (issue 36 item 3,
// converter.<side>.avro.schema: registry), instead of an Avro string holding
// JSON. Applications keep writing natural JSON ({"a": 1}); consumers get
// Avro.
//
// In: the registered schema's text (Compile, once per registry id) and a
// JSON document per row (Codec.AppendJSON). Out: the Avro binary body,
// without Confluent's 5-byte header (the relay writes it), or a *FieldError
// naming the offending field by its dotted path ("address.city",
// "items[2].sku"), which the relay turns into a payload_invalid dead letter.
// The package does no registry I/O.
//
// The JSON is read as a reader with the schema would read data written with
// another, by Avro's schema resolution rules (specification, "Schema
// Resolution"):
//
//   - a JSON member the record lacks is ignored (a writer-only field); a
//     member named by one of a field's aliases counts as the field (a field given
//     twice, or by name and alias, takes the last member, as encoding/json
//     does);
//   - a field the JSON lacks takes the field's default, and is an error
//     (ErrMissingField) without one, even for a nullable field: a union with
//     null has no implicit default in Avro;
//   - a string that is not one of an enum's symbols takes the enum's default
//     symbol, and is an error (ErrSymbol) without one.
//
// Values (JSON → Avro):
//
//   - null only for null, or a union with a null branch (else ErrNull);
//   - int and long: an integer literal in range (no fraction, no exponent;
//     else ErrType or ErrRange); float and double: any JSON number, rounded to
//     the nearest (an underflow to zero), one beyond the type's range is
//     ErrRange; also the strings "NaN",
//     "Infinity" and "-Infinity" (Java Avro's JSON encoding);
//   - string: a JSON string; enum: a symbol; bytes and fixed: a JSON string
//     of code points U+0000..U+00FF, one per byte, as Avro's JSON encoding
//     writes them (fixed: exactly size of them);
//   - array: a JSON array; map: a JSON object; record: a JSON object;
//   - union: a bare value, the natural form ({"a": 1}): the first branch, in
//     the schema's order, that accepts the JSON value takes it (JSON null →
//     the null branch). Avro's tagged JSON form ({"a": {"int": 1}}) is read
//     as tagged when it is unambiguous: an object with exactly one member,
//     whose name is a branch's type name (a primitive name, "array", "map",
//     or a named type's full or short name), in a union with no map branch
//     and no record branch having a field of that name; else the object is a
//     bare value.
//
// Logical types (the underlying type's JSON is always accepted too):
//
//   - timestamp-millis, -micros, -nanos: a JSON integer (units since the
//     epoch) or an RFC 3339 string with an offset ("2024-05-01T12:00:00.5Z");
//     local-timestamp-*: an integer or the same string without an offset;
//     a string finer than the unit ("…00.1234Z" for millis) is ErrLogical,
//     never rounded;
//   - date: an integer (days) or "2024-05-01"; time-millis, time-micros: an
//     integer or "12:34:56.789" (same precision rule);
//   - decimal (bytes or fixed): a JSON number or a string holding a decimal
//     numeral ("12.34"), with no more fractional digits than the scale and
//     no more digits than the precision (ErrLogical). A decimal's JSON string
//     is read as a numeral, not as Avro-JSON bytes;
//   - uuid, duration, big-decimal and unknown logical types: the underlying
//     type, unchecked.
//
// Schema references (a registered schema that references another subject's
// types) are out of scope: Compile of a schema naming a type it does not
// define fails ("unknown type").
//
// The body is what Confluent's serializer writes after its 5-byte header:
// the Avro binary, except that the value of a top-level "bytes" schema is
// written without its length prefix, as AbstractKafkaAvroSerializer does
// (`if (rawSchema.getType().equals(Type.BYTES)) baos.write((byte[]) value)`;
// docs/design/avro.md 1.2) and its deserializer expects.
//
// Avro binary writing follows the specification's Binary Encoding: zig-zag
// varints, length-prefixed strings and bytes, one block for a non-empty
// array or map followed by the 0 end block, a union's branch index before
// its value, record fields in schema order. Defaults are encoded once, at
// Compile, by github.com/twmb/avro from the parsed schema.
package avrojson

import (
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/avro"
)

// Errors a FieldError wraps; errors.Is tells them apart.
var (
	// ErrInvalidJSON: the document is not JSON.
	ErrInvalidJSON = errors.New("not valid JSON")
	// ErrMissingField: the JSON lacks a record field that has no default.
	ErrMissingField = errors.New("missing required field (no default in the schema)")
	// ErrNull: a JSON null where the schema's type is not nullable.
	ErrNull = errors.New("null for a non-nullable field")
	// ErrType: a JSON value of a kind the schema's type does not take.
	ErrType = errors.New("type mismatch")
	// ErrRange: a number outside its Avro type's range.
	ErrRange = errors.New("number out of range")
	// ErrSymbol: a string that is not a symbol of the enum (which has no default).
	ErrSymbol = errors.New("not a symbol of the enum")
	// ErrUnion: no branch of a union takes the JSON value.
	ErrUnion = errors.New("no union branch accepts the value")
	// ErrLogical: a value a logical type cannot represent exactly, or a
	// string not in the logical type's format.
	ErrLogical = errors.New("invalid value for the logical type")
)

// FieldError is a JSON document that does not match the schema, at Path: the
// dotted path of the field from the top ("address.city", "items[2].sku",
// `attrs["k"]`), "" for the document itself. Err wraps one of the Err*
// sentinels. The message never quotes the payload's values (a map key in
// Path is the only payload text in it).
type FieldError struct {
	Path string
	Err  error
}

func (e *FieldError) Error() string {
	if e.Path == "" {
		return "payload: " + e.Err.Error()
	}
	return "field " + e.Path + ": " + e.Err.Error()
}

func (e *FieldError) Unwrap() error { return e.Err }

// Codec encodes JSON documents by one compiled schema. It is safe for
// concurrent use.
type Codec struct {
	root   *node
	schema *avro.Schema
	states sync.Pool // *encoder scratch
}

// Compile parses an Avro schema (the registry's text) once; the relay caches
// the *Codec per registry id.
func Compile(schema string) (*Codec, error) {
	s, err := avro.Parse(schema)
	if err != nil {
		return nil, fmt.Errorf("parsing Avro schema (schema references to other subjects are not supported): %w", err)
	}
	root, err := compile(s.Root())
	if err != nil {
		return nil, fmt.Errorf("compiling Avro schema: %w", err)
	}
	return &Codec{root: root, schema: s}, nil
}

// Schema is the parsed schema.
func (c *Codec) Schema() *avro.Schema { return c.schema }

// AppendJSON appends the Avro binary of the JSON document js (no Confluent
// header; a top-level bytes value without its length prefix, as Confluent
// writes it) to dst. On error it returns dst unchanged (in length) and a
// *FieldError.
func (c *Codec) AppendJSON(dst, js []byte) ([]byte, error) {
	e, _ := c.states.Get().(*encoder)
	if e == nil {
		e = new(encoder)
	}
	out, err := e.encodeDocument(dst, js, c.root)
	e.reset()
	c.states.Put(e)
	if err != nil {
		return dst, err
	}
	return out, nil
}
