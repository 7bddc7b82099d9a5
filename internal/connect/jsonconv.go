package connect

import (
	"time"
)

// This file is Kafka Connect's JsonConverter.fromConnectData: connect/json/
// src/main/java/org/apache/kafka/connect/json/JsonConverter.java
// (asJsonSchema, convertToJson) with JsonSchema.java's names, serialized
// as JsonSerializer's plain ObjectMapper writes the JsonNode tree: no
// whitespace, object keys in insertion order.

// JSONConverter is org.apache.kafka.connect.json.JsonConverter. The zero
// value is Connect's default configuration.
type JSONConverter struct {
	// DisableSchemas is schemas.enable=false: the value alone instead of
	// the {"schema":…,"payload":…} envelope.
	DisableSchemas bool
	// KeepNulls is replace.null.with.default=false: a null value whose
	// schema has a default is written as null rather than as the default.
	KeepNulls bool
}

// FromConnectData returns the bytes JsonConverter.fromConnectData returns
// for value v of schema s (nil for a schemaless value). It returns nil, a
// Kafka null, only when both are nil, with or without schemas; a nil value
// of an optional schema is {"schema":{…},"payload":null}, or the 4 bytes
// null without schemas.
func (c JSONConverter) FromConnectData(s *Schema, v any) ([]byte, error) {
	if s == nil && v == nil {
		return nil, nil
	}
	var dst []byte
	var err error
	if c.DisableSchemas {
		dst, err = c.appendValue(dst, s, v)
	} else {
		dst = append(dst, `{"schema":`...)
		if dst, err = c.appendSchema(dst, s); err != nil {
			return nil, err
		}
		dst = append(dst, `,"payload":`...)
		if dst, err = c.appendValue(dst, s, v); err != nil {
			return nil, err
		}
		dst = append(dst, '}')
	}
	if err != nil {
		return nil, err
	}
	return dst, nil
}

// appendSchema appends asJsonSchema(s): "type"; then "fields", "items" or
// "keys" and "values"; "optional"; then, when set, "name", "version",
// "doc", "parameters", "default". A struct field's schema ends with
// "field". A nil schema is null (JsonSchema.envelope sets a null node).
func (c JSONConverter) appendSchema(dst []byte, s *Schema) ([]byte, error) {
	return c.appendSchemaField(dst, s, "")
}

func (c JSONConverter) appendSchemaField(dst []byte, s *Schema, field string) ([]byte, error) {
	if s == nil {
		return append(dst, "null"...), nil
	}
	if !s.Type.valid() {
		return dst, dataErrorf("Couldn't translate unsupported schema type %v.", s)
	}
	var err error
	dst = append(dst, `{"type":"`...)
	dst = append(dst, typeNames[s.Type].json...)
	dst = append(dst, '"')
	switch s.Type {
	case TypeArray:
		dst = append(dst, `,"items":`...)
		if dst, err = c.appendSchema(dst, s.Items); err != nil {
			return dst, err
		}
	case TypeMap:
		dst = append(dst, `,"keys":`...)
		if dst, err = c.appendSchema(dst, s.Keys); err != nil {
			return dst, err
		}
		dst = append(dst, `,"values":`...)
		if dst, err = c.appendSchema(dst, s.Values); err != nil {
			return dst, err
		}
	case TypeStruct:
		dst = append(dst, `,"fields":[`...)
		for i, f := range s.Fields {
			if i > 0 {
				dst = append(dst, ',')
			}
			if f.Schema == nil {
				return dst, dataErrorf("struct field %q has no schema", f.Name)
			}
			if dst, err = c.appendSchemaField(dst, f.Schema, f.Name); err != nil {
				return dst, err
			}
		}
		dst = append(dst, ']')
	}
	if s.Optional {
		dst = append(dst, `,"optional":true`...)
	} else {
		dst = append(dst, `,"optional":false`...)
	}
	if s.Name != "" {
		dst = append(dst, `,"name":`...)
		if dst, err = AppendJSONString(dst, s.Name); err != nil {
			return dst, err
		}
	}
	if s.HasVersion {
		dst = append(dst, `,"version":`...)
		dst = appendJSONInt(dst, int64(s.Version))
	}
	if s.Doc != "" {
		dst = append(dst, `,"doc":`...)
		if dst, err = AppendJSONString(dst, s.Doc); err != nil {
			return dst, err
		}
	}
	if len(s.Params) > 0 {
		dst = append(dst, `,"parameters":{`...)
		for i, p := range s.Params {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = AppendJSONString(dst, p.Key); err != nil {
				return dst, err
			}
			dst = append(dst, ':')
			if dst, err = AppendJSONString(dst, p.Value); err != nil {
				return dst, err
			}
		}
		dst = append(dst, '}')
	}
	if s.Default != nil {
		dst = append(dst, `,"default":`...)
		if dst, err = c.appendValue(dst, s, s.Default); err != nil {
			return dst, err
		}
	}
	if field != "" {
		dst = append(dst, `,"field":`...)
		if dst, err = AppendJSONString(dst, field); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// appendValue appends convertToJson(s, v).
func (c JSONConverter) appendValue(dst []byte, s *Schema, v any) ([]byte, error) {
	if v == nil {
		switch {
		case s == nil:
			// Any schema is valid; Jackson turns the Java null into a null node.
			return append(dst, "null"...), nil
		case s.Default != nil && !c.KeepNulls:
			return c.appendValue(dst, s, s.Default)
		case s.Optional:
			return append(dst, "null"...), nil
		}
		return dst, dataErrorf("Conversion error: null value for field that is required and has no default value")
	}
	if s != nil {
		switch s.Name {
		case TimestampName:
			t, ok := v.(time.Time)
			if !ok {
				return dst, dataErrorf("Invalid type for Timestamp, expected Date but was %s", javaClass(v))
			}
			// Timestamp.fromLogical: java.util.Date.getTime(), whole
			// milliseconds rounded down.
			return appendJSONInt(dst, t.UnixMilli()), nil
		case decimalName, dateName, timeName:
			return dst, errorfUnsupported("the logical type %s", s.Name)
		}
	}
	var t Type
	if s == nil {
		var ok bool
		if t, ok = typeOf(v); !ok {
			return dst, dataErrorf("Java class %s does not have corresponding schema type.", javaClass(v))
		}
	} else {
		t = s.Type
	}
	// A Go value of the wrong type is Java's ClassCastException, turned
	// into this DataException.
	wrongType := func() error {
		name := "unknown schema"
		if s != nil {
			name = s.Type.String()
		}
		return dataErrorf("Invalid type for %s: %s", name, javaClass(v))
	}
	var err error
	switch t {
	case TypeInt8:
		x, ok := v.(int8)
		if !ok {
			return dst, wrongType()
		}
		return appendJSONInt(dst, int64(x)), nil
	case TypeInt16:
		x, ok := v.(int16)
		if !ok {
			return dst, wrongType()
		}
		return appendJSONInt(dst, int64(x)), nil
	case TypeInt32:
		x, ok := v.(int32)
		if !ok {
			return dst, wrongType()
		}
		return appendJSONInt(dst, int64(x)), nil
	case TypeInt64:
		x, ok := v.(int64)
		if !ok {
			return dst, wrongType()
		}
		return appendJSONInt(dst, x), nil
	case TypeFloat32:
		x, ok := v.(float32)
		if !ok {
			return dst, wrongType()
		}
		return appendJSONFloat(dst, float64(x), 32), nil
	case TypeFloat64:
		x, ok := v.(float64)
		if !ok {
			return dst, wrongType()
		}
		return appendJSONFloat(dst, x, 64), nil
	case TypeBoolean:
		x, ok := v.(bool)
		if !ok {
			return dst, wrongType()
		}
		if x {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case TypeString:
		x, ok := v.(string)
		if !ok {
			return dst, wrongType()
		}
		return AppendJSONString(dst, x)
	case TypeBytes:
		x, ok := v.([]byte)
		if !ok {
			return dst, dataErrorf("Invalid type for bytes type: %s", javaClass(v))
		}
		return appendJSONBytes(dst, x), nil
	case TypeArray:
		x, ok := v.([]any)
		if !ok {
			return dst, wrongType()
		}
		var items *Schema
		if s != nil {
			items = s.Items
		}
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = c.appendValue(dst, items, e); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case TypeMap:
		x, ok := v.(Map)
		if !ok {
			return dst, wrongType()
		}
		return c.appendMap(dst, s, x)
	case TypeStruct:
		x, ok := v.(*Struct)
		if !ok {
			return dst, wrongType()
		}
		if !x.schema.Equal(s) {
			return dst, dataErrorf("Mismatching schema.")
		}
		dst = append(dst, '{')
		for i, f := range s.Fields {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = AppendJSONString(dst, f.Name); err != nil {
				return dst, err
			}
			dst = append(dst, ':')
			// struct.getWithoutDefault: the default comes from convertToJson.
			if dst, err = c.appendValue(dst, f.Schema, x.values[i]); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	}
	return dst, dataErrorf("Couldn't convert %v to JSON.", v)
}
