package connect

import (
	"encoding/base64"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// SimpleHeaderConverter is Kafka Connect's default header converter,
// org.apache.kafka.connect.storage.SimpleHeaderConverter (connect/api/src/
// main/java/org/apache/kafka/connect/storage/SimpleHeaderConverter.java):
// a header value becomes Values.convertToString(schema, value) as UTF-8
// (connect/api/src/main/java/org/apache/kafka/connect/data/Values.java,
// append), nil stays a null header value.
type SimpleHeaderConverter struct{}

// FromConnectHeader returns the header value's bytes, nil for nil.
// Strings as they are, numbers and booleans by Java's toString, bytes as
// standard base64; arrays, maps and structs in Values' own JSON-like form
// (strings inside quoted with only \ and " escaped, a struct's unset
// fields as their defaults); time.Time as Values formats a
// java.util.Date, in a JVM whose default zone is assumed to be UTC:
// HH:mm:ss.SSS'Z' before 1970-01-02, yyyy-MM-dd at midnight, else
// yyyy-MM-dd'T'HH:mm:ss.SSS'Z'. The schema is not used, as in Connect.
func (SimpleHeaderConverter) FromConnectHeader(_ *Schema, v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	b, err := appendValues(make([]byte, 0, 16), v, false)
	if err != nil {
		return nil, fmt.Errorf("SimpleHeaderConverter: %w", err)
	}
	return b, nil
}

// appendValues is Values.append: embedded is true inside arrays, maps and
// structs.
func appendValues(dst []byte, v any, embedded bool) ([]byte, error) {
	var err error
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		if !utf8.ValidString(x) {
			return dst, fmt.Errorf("text is not valid UTF-8")
		}
		if !embedded {
			return append(dst, x...), nil
		}
		x = strings.ReplaceAll(strings.ReplaceAll(x, `\`, `\\`), `"`, `\"`)
		return append(append(append(dst, '"'), x...), '"'), nil
	case []byte:
		if embedded {
			dst = append(dst, '"')
		}
		dst = base64.StdEncoding.AppendEncode(dst, x)
		if embedded {
			dst = append(dst, '"')
		}
		return dst, nil
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = appendValues(dst, e, true); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case Map:
		dst = append(dst, '{')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = appendValues(dst, e.Key, true); err != nil {
				return dst, err
			}
			dst = append(dst, ':')
			if dst, err = appendValues(dst, e.Value, true); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	case *Struct:
		dst = append(dst, '{')
		for i, f := range x.schema.Fields {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = appendValues(dst, f.Name, true); err != nil {
				return dst, err
			}
			dst = append(dst, ':')
			if dst, err = appendValues(dst, x.Get(f.Name), true); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	case time.Time:
		// Values.dateFormatFor, by the value and not by the schema; the
		// text is never quoted, even embedded.
		const day = 24 * 60 * 60 * 1000
		ms := x.UnixMilli()
		t := time.UnixMilli(ms).UTC()
		switch {
		case ms < day:
			return t.AppendFormat(dst, "15:04:05.000Z"), nil
		case ms%day == 0:
			return t.AppendFormat(dst, "2006-01-02"), nil
		}
		return t.AppendFormat(dst, "2006-01-02T15:04:05.000Z"), nil
	}
	return appendJavaScalar(dst, v)
}
