package connect

import (
	"bytes"
	"fmt"
	"time"
)

// This file models Connect's values: connect/api/src/main/java/org/apache/
// kafka/connect/data/Struct.java and ConnectSchema.validateValue.

// Map is a MAP value: its entries in order, as a java.util.LinkedHashMap
// keeps them. Keys must be distinct. Connect code that builds a
// java.util.HashMap writes its entries in hash order, which this package
// does not reproduce: give the entries in the order the Java map iterates.
type Map []MapEntry

// MapEntry is one key and value of a Map.
type MapEntry struct{ Key, Value any }

// Struct is a STRUCT value (Connect's Struct): a schema and one value per
// field, nil where unset.
type Struct struct {
	schema *Schema
	values []any
}

// NewStruct returns an empty Struct of schema s, which must be a STRUCT
// schema.
func NewStruct(s *Schema) (*Struct, error) {
	if s == nil || s.Type != TypeStruct {
		return nil, dataErrorf("Not a struct schema: %v", s)
	}
	return &Struct{schema: s, values: make([]any, len(s.Fields))}, nil
}

// Schema returns the struct's schema.
func (st *Struct) Schema() *Schema { return st.schema }

// Put sets field name to v after checking v against the field's schema, as
// Struct.put does (a nested Struct is validated whole).
func (st *Struct) Put(name string, v any) error {
	i := st.schema.fieldIndex(name)
	if i < 0 {
		return dataErrorf("%s is not a valid field name", name)
	}
	f := st.schema.Fields[i]
	if err := validateValue(f.Schema, v, fmt.Sprintf("field: %q", name)); err != nil {
		return err
	}
	st.values[i] = v
	return nil
}

// Get returns field name's value, or its schema's default when the value
// is unset (Struct.get); nil for an unknown field.
func (st *Struct) Get(name string) any {
	i := st.schema.fieldIndex(name)
	if i < 0 {
		return nil
	}
	if v := st.values[i]; v != nil {
		return v
	}
	return st.schema.Fields[i].Schema.Default
}

// At returns the value of the i-th field of the struct's schema, or its
// schema's default when the value is unset: Get by position, for
// converters that walk the fields in order (internal/connect/avro).
func (st *Struct) At(i int) any {
	if v := st.values[i]; v != nil {
		return v
	}
	return st.schema.Fields[i].Schema.Default
}

// Validate checks that every field without a value is optional or has a
// default and that the values fit (Struct.validate).
func (st *Struct) Validate() error {
	for i, f := range st.schema.Fields {
		v := st.values[i]
		if v == nil && (f.Schema.Optional || f.Schema.Default != nil) {
			continue
		}
		if err := validateValue(f.Schema, v, fmt.Sprintf("field: %q", f.Name)); err != nil {
			return err
		}
	}
	return nil
}

// validateValue is ConnectSchema.validateValue: v must be of the Go type
// standing for the schema's Java class, recursively; location is the
// message's "for ..." part.
func validateValue(s *Schema, v any, location string) error {
	if v == nil {
		if !s.Optional {
			return dataErrorf("Invalid value: null used for required %s, schema type: %s", location, s.Type)
		}
		return nil
	}
	if !fitsSchema(s, v) {
		name := ""
		if s.Name != "" {
			name = fmt.Sprintf(" %q", s.Name)
		}
		return dataErrorf("Invalid Java object for schema%s with type %s: %s for %s", name, s.Type, javaClass(v), location)
	}
	switch s.Type {
	case TypeStruct:
		st := v.(*Struct)
		if !st.schema.Equal(s) {
			return dataErrorf("Struct schemas do not match.")
		}
		return st.Validate()
	case TypeArray:
		loc := "element of array " + location
		if s.Items == nil {
			return dataErrorf("No schema defined for %s", loc)
		}
		for _, e := range v.([]any) {
			if err := validateValue(s.Items, e, loc); err != nil {
				return err
			}
		}
	case TypeMap:
		kl, vl := "key of map "+location, "value of map "+location
		if s.Keys == nil {
			return dataErrorf("No schema defined for %s", kl)
		}
		if s.Values == nil {
			return dataErrorf("No schema defined for %s", vl)
		}
		for _, e := range v.(Map) {
			if err := validateValue(s.Keys, e.Key, kl); err != nil {
				return err
			}
			if err := validateValue(s.Values, e.Value, vl); err != nil {
				return err
			}
		}
	}
	return nil
}

// fitsSchema reports whether v is of the Go type for s: by logical type
// name first (the date and time ones take time.Time), then by type.
func fitsSchema(s *Schema, v any) bool {
	switch s.Name {
	case TimestampName, dateName, timeName:
		_, ok := v.(time.Time)
		return ok
	case decimalName:
		return false // java.math.BigDecimal has no Go counterpart here
	}
	t, ok := typeOf(v)
	return ok && t == s.Type
}

// typeOf returns the schema type of a Go value, as
// ConnectSchema.schemaType does for Java classes; false for a Go type
// that stands for no Connect type (time.Time included: Connect does not
// infer logical types).
func typeOf(v any) (Type, bool) {
	switch v.(type) {
	case bool:
		return TypeBoolean, true
	case int8:
		return TypeInt8, true
	case int16:
		return TypeInt16, true
	case int32:
		return TypeInt32, true
	case int64:
		return TypeInt64, true
	case float32:
		return TypeFloat32, true
	case float64:
		return TypeFloat64, true
	case string:
		return TypeString, true
	case []byte:
		return TypeBytes, true
	case []any:
		return TypeArray, true
	case Map:
		return TypeMap, true
	case *Struct:
		return TypeStruct, true
	}
	return 0, false
}

// javaClass returns what Java's Object.getClass() prints for the Java
// counterpart of v, for Connect's messages.
func javaClass(v any) string {
	switch v.(type) {
	case bool:
		return "class java.lang.Boolean"
	case int8:
		return "class java.lang.Byte"
	case int16:
		return "class java.lang.Short"
	case int32:
		return "class java.lang.Integer"
	case int64:
		return "class java.lang.Long"
	case float32:
		return "class java.lang.Float"
	case float64:
		return "class java.lang.Double"
	case string:
		return "class java.lang.String"
	case []byte:
		return "class [B"
	case []any:
		return "class java.util.ArrayList"
	case Map:
		return "class java.util.LinkedHashMap"
	case *Struct:
		return "class org.apache.kafka.connect.data.Struct"
	case time.Time:
		return "class java.util.Date"
	}
	return fmt.Sprintf("(Go type %T, which stands for no Java class)", v)
}

// equalValues compares two values as Objects.deepEquals does for the
// Java counterparts (byte arrays by content, structs by schema and
// values), except that maps compare in entry order.
func equalValues(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalValues(x[i], y[i]) {
				return false
			}
		}
		return true
	case Map:
		y, ok := b.(Map)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalValues(x[i].Key, y[i].Key) || !equalValues(x[i].Value, y[i].Value) {
				return false
			}
		}
		return true
	case *Struct:
		y, ok := b.(*Struct)
		if !ok || !x.schema.Equal(y.schema) {
			return false
		}
		for i := range x.values {
			if !equalValues(x.values[i], y.values[i]) {
				return false
			}
		}
		return true
	case time.Time:
		y, ok := b.(time.Time)
		return ok && x.UnixMilli() == y.UnixMilli()
	case float64:
		// Double.equals: by bits (NaN equals NaN, 0.0 differs from -0.0).
		y, ok := b.(float64)
		return ok && (x == y && (x != 0 || signbit(x) == signbit(y)) || x != x && y != y)
	}
	return a == b
}

func signbit(f float64) bool { return f < 0 || 1/f < 0 }
