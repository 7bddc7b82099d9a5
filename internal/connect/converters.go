package connect

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// Converter turns a Connect value of a schema (nil for schemaless) into
// record bytes, as a Kafka Connect Converter's fromConnectData does. A nil
// result is a Kafka null.
type Converter interface {
	FromConnectData(s *Schema, v any) ([]byte, error)
}

var (
	_ Converter = JSONConverter{}
	_ Converter = StringConverter{}
	_ Converter = ByteArrayConverter{}
	_ Converter = BinaryDataConverter{}
)

// StringConverter is org.apache.kafka.connect.storage.StringConverter
// (connect/api/src/main/java/org/apache/kafka/connect/storage/
// StringConverter.java) with its default UTF-8 encoding: the value's Java
// toString(), whatever the schema; nil for nil. A []byte anywhere in the
// value is ErrUnreproducible: Java prints byte arrays as "[B@" and an
// identity hash. Maps print in their entries' order (LinkedHashMap's),
// time.Time as java.util.Date.toString in a JVM whose default zone is UTC.
type StringConverter struct{}

// FromConnectData implements Converter.
func (StringConverter) FromConnectData(_ *Schema, v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	b, err := appendJavaString(make([]byte, 0, 16), v)
	if err != nil {
		return nil, fmt.Errorf("StringConverter: %w", err)
	}
	return b, nil
}

// appendJavaString appends String.valueOf(v) for the Java counterpart of v:
// Struct.toString, AbstractCollection.toString, AbstractMap.toString,
// Double.toString and so on.
func appendJavaString(dst []byte, v any) ([]byte, error) {
	var err error
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		if !utf8.ValidString(x) {
			return dst, fmt.Errorf("text is not valid UTF-8")
		}
		return append(dst, x...), nil
	case []byte:
		return dst, fmt.Errorf("%w: Java prints a byte[] as [B@ and its identity hash", ErrUnreproducible)
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			if dst, err = appendJavaString(dst, e); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case Map:
		dst = append(dst, '{')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			if dst, err = appendJavaString(dst, e.Key); err != nil {
				return dst, err
			}
			dst = append(dst, '=')
			if dst, err = appendJavaString(dst, e.Value); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	case *Struct:
		// Struct.toString: the fields whose own value is set, no defaults.
		dst = append(dst, "Struct{"...)
		first := true
		for i, f := range x.schema.Fields {
			if x.values[i] == nil {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = append(dst, f.Name...)
			dst = append(dst, '=')
			if dst, err = appendJavaString(dst, x.values[i]); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	case time.Time:
		// java.util.Date.toString: "EEE MMM dd HH:mm:ss zzz yyyy" in the
		// JVM's default zone (assumed UTC); Julian before 1582 and an
		// unpadded year, which this does not reproduce.
		t := x.UTC()
		if t.Year() < 1583 || t.Year() > 9999 {
			return dst, errorfUnsupported("java.util.Date.toString of %s", t.Format(time.RFC3339))
		}
		return t.AppendFormat(dst, "Mon Jan 02 15:04:05 UTC 2006"), nil
	}
	return appendJavaScalar(dst, v)
}

// appendJavaScalar appends Java's toString of a boolean or a number.
func appendJavaScalar(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case bool:
		if x {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case int8:
		return appendJSONInt(dst, int64(x)), nil
	case int16:
		return appendJSONInt(dst, int64(x)), nil
	case int32:
		return appendJSONInt(dst, int64(x)), nil
	case int64:
		return appendJSONInt(dst, x), nil
	case float32:
		return append(dst, FormatFloat(x)...), nil
	case float64:
		return append(dst, FormatDouble(x)...), nil
	}
	return dst, dataErrorf("no Connect value is of Go type %T", v)
}

// ByteArrayConverter is org.apache.kafka.connect.converters.
// ByteArrayConverter (connect/runtime/src/main/java/org/apache/kafka/
// connect/converters/ByteArrayConverter.java): a []byte as it is, nil as
// nil; a schema other than BYTES, or a value other than bytes, is an error.
type ByteArrayConverter struct{}

// FromConnectData implements Converter.
func (ByteArrayConverter) FromConnectData(s *Schema, v any) ([]byte, error) {
	if s != nil && s.Type != TypeBytes {
		return nil, dataErrorf("Invalid schema type for ByteArrayConverter: %s", s.Type)
	}
	if v == nil {
		return nil, nil
	}
	b, ok := v.([]byte)
	if !ok {
		return nil, dataErrorf("ByteArrayConverter is not compatible with objects of type %s", javaClass(v))
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// BinaryDataConverter is Debezium's io.debezium.converters.
// BinaryDataConverter (debezium-connect-plugins/src/main/java/io/debezium/
// converters/BinaryDataConverter.java): a []byte of a BYTES or nil schema
// as it is; any other schema or value goes to Delegate
// (delegate.converter.type), an error without one; nil of a BYTES or nil
// schema is nil.
type BinaryDataConverter struct {
	// Delegate converts what is not bytes; nil for none.
	Delegate Converter
}

// FromConnectData implements Converter.
func (c BinaryDataConverter) FromConnectData(s *Schema, v any) ([]byte, error) {
	if s != nil && s.Type != TypeBytes || v != nil {
		if b, ok := v.([]byte); ok && (s == nil || s.Type == TypeBytes) {
			if b == nil {
				b = []byte{}
			}
			return b, nil
		}
		if c.Delegate == nil {
			// Debezium names the topic here ("A <topic> of type ..."),
			// which this interface does not carry.
			text, err := appendJavaString(nil, v)
			if err != nil {
				text = fmt.Appendf(nil, "%v", v)
			}
			return nil, dataErrorf("A record of type '%s' requires a delegate.converter.type to be configured", text)
		}
		return c.Delegate.FromConnectData(s, v)
	}
	return nil, nil
}
