package conformance

// A small model of Kafka Connect data and of the converters Debezium users
// run, written from Kafka's sources (apache/kafka at
// 1eb7644349cb07139d6a3c1ad1986979647cac99), independently of walrelay's
// internal/router and internal/connect:
//
//   - JsonConverter.fromConnectData / asJsonSchema / convertToJson
//     (connect/json/src/main/java/org/apache/kafka/connect/json/JsonConverter.java),
//     written by a plain Jackson ObjectMapper (no whitespace, Jackson's
//     string escaping);
//   - StringConverter.fromConnectData: value.toString()
//     (connect/api/.../storage/StringConverter.java), with Struct.toString
//     (connect/api/.../data/Struct.java) and java.util.List's toString;
//   - SimpleHeaderConverter.fromConnectHeader: Values.convertToString
//     (connect/api/.../data/Values.java, append()).

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Schema is a Connect schema: only what the cases use.
type Schema struct {
	// Type is the name JsonConverter writes: boolean int32 int64 double
	// bytes string struct array.
	Type     string
	Optional bool
	Name     string
	Version  int // 0: none
	Default  any // nil: none
	Fields   []Field
	Items    *Schema
}

// Field is a struct schema's field.
type Field struct {
	Name   string
	Schema *Schema
}

// Struct is a Connect Struct: values by field name, absent meaning null.
type Struct struct {
	Schema *Schema
	Values map[string]any
}

// Values in the model: nil, string, int32, int64, float64, bool, []byte,
// Struct, []any.

// Schema builders, named as Connect's constants and Debezium's semantic
// types (io.debezium.data.Json, io.debezium.data.Uuid).
func strS() *Schema    { return &Schema{Type: "string"} }
func optStrS() *Schema { return &Schema{Type: "string", Optional: true} }
func i32S() *Schema    { return &Schema{Type: "int32"} }
func boolS() *Schema   { return &Schema{Type: "boolean"} }
func bytesS() *Schema  { return &Schema{Type: "bytes"} }
func optJSONS() *Schema {
	return &Schema{Type: "string", Optional: true, Name: "io.debezium.data.Json", Version: 1}
}
func uuidS() *Schema { return &Schema{Type: "string", Name: "io.debezium.data.Uuid", Version: 1} }

// opt returns a copy of s made optional.
func opt(s *Schema) *Schema { c := *s; c.Optional = true; return &c }

// structS builds a struct schema from name/schema pairs.
func structS(name string, optional bool, fields ...Field) *Schema {
	return &Schema{Type: "struct", Name: name, Optional: optional, Fields: fields}
}

func field(name string, s *Schema) Field { return Field{Name: name, Schema: s} }

// arrayS is SchemaBuilder.array(items).optional(), as JsonSchemaData builds.
func arrayS(items *Schema) *Schema { return &Schema{Type: "array", Items: items, Optional: true} }

// jsonSchema renders s as JsonConverter.asJsonSchema does: type;
// fields/items; optional; then name, version, default when set. A struct
// field's schema gets "field" last.
func jsonSchema(b []byte, s *Schema, fieldName string) []byte {
	b = append(b, `{"type":`...)
	b = jacksonString(b, s.Type)
	switch s.Type {
	case "struct":
		b = append(b, `,"fields":[`...)
		for i, f := range s.Fields {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonSchema(b, f.Schema, f.Name)
		}
		b = append(b, ']')
	case "array":
		b = append(b, `,"items":`...)
		b = jsonSchema(b, s.Items, "")
	}
	b = append(b, `,"optional":`...)
	b = strconv.AppendBool(b, s.Optional)
	if s.Name != "" {
		b = append(b, `,"name":`...)
		b = jacksonString(b, s.Name)
	}
	if s.Version != 0 {
		b = append(b, `,"version":`...)
		b = strconv.AppendInt(b, int64(s.Version), 10)
	}
	if s.Default != nil {
		b = append(b, `,"default":`...)
		b = jsonValue(b, s, s.Default)
	}
	if fieldName != "" {
		b = append(b, `,"field":`...)
		b = jacksonString(b, fieldName)
	}
	return append(b, '}')
}

// jsonValue renders v as JsonConverter.convertToJson does: a null takes
// the schema's default (replace.null.with.default=true, Connect's default).
func jsonValue(b []byte, s *Schema, v any) []byte {
	if v == nil {
		if s != nil && s.Default != nil {
			return jsonValue(b, s, s.Default)
		}
		return append(b, "null"...)
	}
	switch v := v.(type) {
	case string:
		return jacksonString(b, v)
	case int32:
		return strconv.AppendInt(b, int64(v), 10)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case float64:
		return append(b, javaDouble(v)...) // Jackson writes doubles with Double.toString
	case bool:
		return strconv.AppendBool(b, v)
	case []byte:
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, v)
		return append(b, '"')
	case Struct:
		b = append(b, '{')
		for i, f := range v.Schema.Fields {
			if i > 0 {
				b = append(b, ',')
			}
			b = jacksonString(b, f.Name)
			b = append(b, ':')
			b = jsonValue(b, f.Schema, v.Values[f.Name])
		}
		return append(b, '}')
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonValue(b, s.Items, e)
		}
		return append(b, ']')
	}
	panic(fmt.Sprintf("jsonValue: unsupported %T", v))
}

// jsonConverter is JsonConverter.fromConnectData: a null schema and null
// value give a Kafka null; otherwise the envelope {"schema":…,"payload":…}
// with schemas.enable, the bare payload without.
func jsonConverter(s *Schema, v any, schemas bool) []byte {
	if s == nil && v == nil {
		return nil
	}
	var b []byte
	if !schemas {
		return jsonValue(b, s, v)
	}
	b = append(b, `{"schema":`...)
	if s == nil {
		b = append(b, "null"...)
	} else {
		b = jsonSchema(b, s, "")
	}
	b = append(b, `,"payload":`...)
	b = jsonValue(b, s, v)
	return append(b, '}')
}

// javaToString is String.valueOf(v) for the model's values, as
// StringConverter and Struct.toString use it. ok is false when the text
// depends on object identity (byte[]'s toString is "[B@" and a hash code).
func javaToString(v any) (s string, ok bool) {
	switch v := v.(type) {
	case nil:
		return "null", true
	case string:
		return v, true
	case int32:
		return strconv.FormatInt(int64(v), 10), true
	case int64:
		return strconv.FormatInt(v, 10), true
	case float64:
		return javaDouble(v), true
	case bool:
		return strconv.FormatBool(v), true
	case []byte:
		return "", false
	case Struct:
		// Struct.toString: Struct{name=value,...}, null fields skipped.
		var sb strings.Builder
		sb.WriteString("Struct{")
		first := true
		for _, f := range v.Schema.Fields {
			fv, present := v.Values[f.Name]
			if !present || fv == nil {
				continue
			}
			if !first {
				sb.WriteByte(',')
			}
			first = false
			t, ok := javaToString(fv)
			if !ok {
				return "", false
			}
			sb.WriteString(f.Name + "=" + t)
		}
		sb.WriteByte('}')
		return sb.String(), true
	case []any:
		// AbstractCollection.toString: [a, b].
		parts := make([]string, len(v))
		for i, e := range v {
			t, ok := javaToString(e)
			if !ok {
				return "", false
			}
			parts[i] = t
		}
		return "[" + strings.Join(parts, ", ") + "]", true
	}
	panic(fmt.Sprintf("javaToString: unsupported %T", v))
}

// stringConverter is StringConverter.fromConnectData. ok is false when
// Connect's bytes are not deterministic.
func stringConverter(v any) (b []byte, ok bool) {
	if v == nil {
		return nil, true
	}
	s, ok := javaToString(v)
	return []byte(s), ok
}

// simpleHeader is SimpleHeaderConverter.fromConnectHeader for the header
// values the cases use: Values.convertToString appends strings as they
// are, numbers and booleans by toString, byte[] as standard base64.
func simpleHeader(v any) []byte {
	switch v := v.(type) {
	case nil:
		return nil
	case []byte:
		return []byte(base64.StdEncoding.EncodeToString(v))
	}
	s, ok := javaToString(v)
	if !ok {
		panic(fmt.Sprintf("simpleHeader: unsupported %T", v))
	}
	return []byte(s)
}

// javaDouble is Double.toString for the doubles the cases use (plain
// decimals between 1e-3 and 1e7): the shortest repr, with ".0" for
// integers.
func javaDouble(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// jacksonString appends s as a JSON string as Jackson's UTF-8 generator
// writes it (jackson-core CharTypes.sOutputEscapes128): '"', '\\' and
// characters below 0x20 are escaped, \b \t \n \f \r in short form, the
// other controls as \u00XX with upper-case hex; characters beyond U+FFFF
// as their escaped UTF-16 surrogate pair; everything else as raw UTF-8.
func jacksonString(b []byte, s string) []byte { return javaJSONString(b, s, true) }

// javaJSONString is Jackson's string writing, by its UTF-8 generator
// (surrogates true: characters beyond U+FFFF as an escaped surrogate pair)
// or by its writer-based one (false: as they are; Avro's Schema.toString).
func javaJSONString(b []byte, s string, surrogates bool) []byte {
	const hexDigits = "0123456789ABCDEF"
	u := func(b []byte, r rune) []byte {
		return append(b, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
	}
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r == '\b':
			b = append(b, `\b`...)
		case r == '\t':
			b = append(b, `\t`...)
		case r == '\n':
			b = append(b, `\n`...)
		case r == '\f':
			b = append(b, `\f`...)
		case r == '\r':
			b = append(b, `\r`...)
		case r < 0x20:
			b = u(b, r)
		case r > 0xFFFF && surrogates:
			hi, lo := utf16.EncodeRune(r)
			b = u(u(b, hi), lo)
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return append(b, '"')
}
