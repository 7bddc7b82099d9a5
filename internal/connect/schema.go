package connect

import (
	"fmt"
	"strconv"
)

// This file models Kafka Connect's schemas: connect/api/src/main/java/org/
// apache/kafka/connect/data/{Schema,ConnectSchema,SchemaBuilder,Field}.java.

// Type is a Connect schema type (Schema.Type).
type Type int8

// The Connect schema types.
const (
	TypeBoolean Type = iota + 1
	TypeInt8
	TypeInt16
	TypeInt32
	TypeInt64
	TypeFloat32
	TypeFloat64
	TypeBytes
	TypeString
	TypeArray
	TypeMap
	TypeStruct
)

// typeNames holds Schema.Type's Java names (used in Connect's messages)
// and JsonConverter's type names (JsonSchema.java).
var typeNames = [...]struct{ java, json string }{
	TypeBoolean: {"BOOLEAN", "boolean"}, TypeInt8: {"INT8", "int8"}, TypeInt16: {"INT16", "int16"},
	TypeInt32: {"INT32", "int32"}, TypeInt64: {"INT64", "int64"}, TypeFloat32: {"FLOAT32", "float"},
	TypeFloat64: {"FLOAT64", "double"}, TypeBytes: {"BYTES", "bytes"}, TypeString: {"STRING", "string"},
	TypeArray: {"ARRAY", "array"}, TypeMap: {"MAP", "map"}, TypeStruct: {"STRUCT", "struct"},
}

// String returns the Java enum name (INT32), as Connect's messages print it.
func (t Type) String() string {
	if t.valid() {
		return typeNames[t].java
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

func (t Type) valid() bool { return t >= TypeBoolean && t <= TypeStruct }

// TimestampName is the name of Connect's Timestamp logical type
// (org.apache.kafka.connect.data.Timestamp): an INT64 schema of version 1
// whose values are time.Time, written as epoch milliseconds.
const TimestampName = "org.apache.kafka.connect.data.Timestamp"

// Names of the logical types Connect knows and this package does not
// implement: their values are refused with ErrUnsupported.
const (
	decimalName = "org.apache.kafka.connect.data.Decimal"
	dateName    = "org.apache.kafka.connect.data.Date"
	timeName    = "org.apache.kafka.connect.data.Time"
)

// Schema is a Connect schema (ConnectSchema). Build it as a literal and do
// not change it once values use it; Validate checks what SchemaBuilder
// would have refused. Empty strings stand for Java's null name and doc.
type Schema struct {
	Type     Type
	Optional bool
	// Name is the schema's name, "" for none.
	Name string
	// Version is the schema's version when HasVersion is set; JsonConverter
	// writes "version" only then (SchemaBuilder.version(Integer) is
	// nullable).
	Version    int32
	HasVersion bool
	// Doc is the schema's documentation, "" for none.
	Doc string
	// Params are the schema's parameters in insertion order, as
	// SchemaBuilder's LinkedHashMap keeps them; keys are distinct. None is
	// the same as Java's null map (SchemaBuilder never builds an empty one).
	Params []Param
	// Default is the default value, nil for none; it must fit the schema.
	Default any
	// Fields are a STRUCT's fields in order.
	Fields []Field
	// Items is an ARRAY's element schema.
	Items *Schema
	// Keys and Values are a MAP's key and value schemas.
	Keys, Values *Schema
}

// Param is one schema parameter.
type Param struct{ Key, Value string }

// Field is a STRUCT field: a name and its schema.
type Field struct {
	Name   string
	Schema *Schema
}

// Timestamp returns Connect's Timestamp.SCHEMA (or its optional variant,
// Timestamp.builder().optional()).
func Timestamp(optional bool) *Schema {
	return &Schema{Type: TypeInt64, Optional: optional, Name: TimestampName, Version: 1, HasVersion: true}
}

// Field returns the field called name, or nil.
func (s *Schema) Field(name string) *Field {
	i := s.fieldIndex(name)
	if i < 0 {
		return nil
	}
	return &s.Fields[i]
}

func (s *Schema) fieldIndex(name string) int {
	for i := range s.Fields {
		if s.Fields[i].Name == name {
			return i
		}
	}
	return -1
}

// String returns ConnectSchema.toString: Schema{INT32} or
// Schema{name:STRUCT}.
func (s *Schema) String() string {
	if s.Name != "" {
		return "Schema{" + s.Name + ":" + s.Type.String() + "}"
	}
	return "Schema{" + s.Type.String() + "}"
}

// Validate reports what SchemaBuilder and ConnectSchema would refuse: an
// unknown type, a missing element, key or value schema, a STRUCT field
// without a name or schema or with a duplicate name, a duplicate
// parameter key, a default value that does not fit.
func (s *Schema) Validate() error {
	if !s.Type.valid() {
		return fmt.Errorf("schema has unknown type %d", s.Type)
	}
	switch s.Type {
	case TypeArray:
		if s.Items == nil {
			return fmt.Errorf("%s schema has no element schema", s.Type)
		}
		if err := s.Items.Validate(); err != nil {
			return fmt.Errorf("array elements: %w", err)
		}
	case TypeMap:
		if s.Keys == nil || s.Values == nil {
			return fmt.Errorf("%s schema needs key and value schemas", s.Type)
		}
		if err := s.Keys.Validate(); err != nil {
			return fmt.Errorf("map keys: %w", err)
		}
		if err := s.Values.Validate(); err != nil {
			return fmt.Errorf("map values: %w", err)
		}
	case TypeStruct:
		for i, f := range s.Fields {
			if f.Name == "" || f.Schema == nil {
				return fmt.Errorf("struct field %d needs a name and a schema", i)
			}
			if s.fieldIndex(f.Name) != i {
				return fmt.Errorf("struct field %q is defined twice", f.Name)
			}
			if err := f.Schema.Validate(); err != nil {
				return fmt.Errorf("struct field %q: %w", f.Name, err)
			}
		}
	}
	if s.Type != TypeStruct && len(s.Fields) > 0 || s.Type != TypeArray && s.Items != nil ||
		s.Type != TypeMap && (s.Keys != nil || s.Values != nil) {
		return fmt.Errorf("%s schema has fields, items, keys or values of another type", s.Type)
	}
	for i, p := range s.Params {
		for _, q := range s.Params[:i] {
			if q.Key == p.Key {
				return fmt.Errorf("schema parameter %q is set twice", p.Key)
			}
		}
	}
	if s.Default != nil {
		if err := validateValue(s, s.Default, "value"); err != nil {
			return fmt.Errorf("invalid default value: %w", err)
		}
	}
	return nil
}

// Equal reports whether two schemas are equal as ConnectSchema.equals
// decides: every attribute, recursively, and defaults by value.
func (s *Schema) Equal(o *Schema) bool {
	if s == o {
		return true
	}
	if s == nil || o == nil {
		return false
	}
	if s.Type != o.Type || s.Optional != o.Optional || s.Name != o.Name || s.HasVersion != o.HasVersion ||
		s.HasVersion && s.Version != o.Version || s.Doc != o.Doc || len(s.Params) != len(o.Params) ||
		len(s.Fields) != len(o.Fields) || !s.Items.Equal(o.Items) || !s.Keys.Equal(o.Keys) || !s.Values.Equal(o.Values) ||
		!equalValues(s.Default, o.Default) {
		return false
	}
	for i := range s.Fields {
		if s.Fields[i].Name != o.Fields[i].Name || !s.Fields[i].Schema.Equal(o.Fields[i].Schema) {
			return false
		}
	}
	// Java compares the parameter maps, whose order does not count.
	for _, p := range s.Params {
		found := false
		for _, q := range o.Params {
			if q == p {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
