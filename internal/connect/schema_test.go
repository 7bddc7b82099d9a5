package connect

import (
	"errors"
	"testing"
	"time"
)

// Validate refuses what SchemaBuilder refuses.
func TestSchemaValidate(t *testing.T) {
	str := &Schema{Type: TypeString}
	tests := []struct {
		name   string
		schema *Schema
		ok     bool
	}{
		{"string", str, true},
		{"struct", &Schema{Type: TypeStruct, Fields: []Field{{"a", str}, {"b", str}}}, true},
		{"duplicate field", &Schema{Type: TypeStruct, Fields: []Field{{"a", str}, {"a", str}}}, false},
		{"empty field name", &Schema{Type: TypeStruct, Fields: []Field{{"", str}}}, false},
		{"array without items", &Schema{Type: TypeArray}, false},
		{"map without values", &Schema{Type: TypeMap, Keys: str}, false},
		{"fields on a string", &Schema{Type: TypeString, Fields: []Field{{"a", str}}}, false},
		{"duplicate parameter", &Schema{Type: TypeString, Params: []Param{{"a", "1"}, {"a", "2"}}}, false},
		{"default of the wrong type", &Schema{Type: TypeInt32, Default: int64(1)}, false},
		{"default", &Schema{Type: TypeInt32, Default: int32(1)}, true},
		{"timestamp default", &Schema{Type: TypeInt64, Name: TimestampName, Default: time.Unix(0, 0)}, true},
		{"unknown type", &Schema{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.schema.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// Struct.Put checks values as Connect's Struct.put does, with its messages.
func TestStructPut(t *testing.T) {
	s := &Schema{Type: TypeStruct, Fields: []Field{{"n", &Schema{Type: TypeInt32}}}}
	st, err := NewStruct(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		field string
		value any
		want  string
	}{
		{"n", int64(1), `kafka connect refuses the data: Invalid Java object for schema with type INT32: class java.lang.Long for field: "n"`},
		{"n", nil, `kafka connect refuses the data: Invalid value: null used for required field: "n", schema type: INT32`},
		{"m", int32(1), `kafka connect refuses the data: m is not a valid field name`},
	} {
		if err := st.Put(tt.field, tt.value); err == nil || err.Error() != tt.want {
			t.Errorf("Put(%q, %#v) = %v, want %s", tt.field, tt.value, err, tt.want)
		}
	}
	if _, err := NewStruct(&Schema{Type: TypeString}); !errors.Is(err, ErrData) {
		t.Errorf("NewStruct(string schema) = %v, want ErrData", err)
	}
}

// Logical types this package does not implement fail instead of being
// written as their base type.
func TestUnsupportedLogicalTypes(t *testing.T) {
	for _, name := range []string{decimalName, dateName, timeName} {
		s := &Schema{Type: TypeInt32, Name: name}
		if _, err := (JSONConverter{}).FromConnectData(s, time.Unix(0, 0)); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", name, err)
		}
	}
}
