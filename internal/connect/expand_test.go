package connect

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// expandGoldenDiffers lists the expand.in payloads whose golden result is
// known not to be what ExpandJSON must return, and why.
var expandGoldenDiffers = map[string]struct {
	want error // what ExpandJSON returns instead; nil for a value
	why  string
}{
	`{"l": 9223372036854775807, "n": -1000000000000000000}`: {nil,
		"Jackson 2.14 (gen.sh's) reads every 19-digit integer as a BigInteger; 2.15 on (Kafka's and Debezium's) as a long (jackson-core #865)"},
	`{"arr": [{"a": 1}, {"b": 2}]}`:   {ErrUnreproducible, "the merge order is a HashSet's"},
	`{"arr": [{"a": 1}, {"a": 1.5}]}`: {ErrUnreproducible, "the merge order is a HashSet's"},
	`{"a": [{"x": {"p": 1}}, {"x": {"q": "s"}, "y": 2}]}`: {ErrUnreproducible,
		"the merge order is a HashSet's (this JVM kept x={p} and dropped q from the second object)"},
	`{"a": "\ud800"}`: {ErrUnsupported, "a Go string cannot hold a lone surrogate"},
	`[]`:              {ErrUnsupported, "Debezium hits a NullPointerException"},
}

// ExpandJSON does what Debezium's JsonSchemaData (compiled from its
// source by testdata/kafka/gen.sh) does with each payload of expand.in:
// the same schema and value, written through JsonConverter; or it refuses
// where Debezium refuses, in the same phase (ErrNotExpanded where
// Debezium keeps the string, ErrData where it fails after inferring the
// schema). The cases include JsonSchemaDataTest's payloads
// (restaurants5.json, the DBZ-6910/DBZ-6983 arrays, DBZ-5475, DBZ-5796,
// debezium/dbz#921).
func TestExpandJSONMatchesDebezium(t *testing.T) {
	in, err := os.ReadFile("testdata/kafka/expand.in")
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile("testdata/kafka/expand.golden")
	if err != nil {
		t.Fatal(err)
	}
	ins := strings.Split(strings.TrimSuffix(string(in), "\n"), "\n")
	wants := strings.Split(strings.TrimSuffix(string(golden), "\n"), "\n")
	if len(ins) != len(wants) {
		t.Fatalf("%d payloads, %d golden lines", len(ins), len(wants))
	}
	for i, line := range ins {
		behaviors, text, _ := strings.Cut(line, "\t")
		opts := ExpandOptions{
			NullAsOptionalBytes:        strings.HasPrefix(behaviors, "optional_bytes "),
			EmptyArrayAsOptionalString: strings.HasSuffix(behaviors, " optional_string"),
		}
		want := wants[i]
		schema, value, err := ExpandJSON("payload", text, opts)
		var got string
		if err == nil {
			b, cerr := JSONConverter{}.FromConnectData(schema, value)
			if cerr != nil {
				t.Fatalf("%s: writing the expanded payload: %v", text, cerr)
			}
			got = "=" + string(b)
		}
		if d, ok := expandGoldenDiffers[text]; ok {
			if d.want != nil && !errors.Is(err, d.want) || d.want == nil && err != nil {
				t.Errorf("%s: got %v (%s); expected %v because %s", text, err, got, d.want, d.why)
			}
			continue
		}
		switch {
		case strings.HasPrefix(want, "schema!"):
			if !errors.Is(err, ErrNotExpanded) {
				t.Errorf("%s: got %v %s; Debezium keeps the string (%s)", text, err, got, want)
			}
		case strings.HasPrefix(want, "data!"):
			if !errors.Is(err, ErrData) {
				t.Errorf("%s: got %v %s; Debezium fails the record (%s)", text, err, got, want)
			}
		case err != nil:
			t.Errorf("%s: %v; Debezium makes %s", text, err, want)
		case got != want:
			t.Errorf("%s:\n got %s\nwant %s", text, got, want)
		}
	}
}

// JsonSchemaDataTest's assertions, ported (the avro field name adjustment
// of its "test$" case is not implemented).
func TestExpandJSONSchemas(t *testing.T) {
	expand := func(t *testing.T, text string, opts ExpandOptions) *Schema {
		t.Helper()
		s, _, err := ExpandJSON("payload", text, opts)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		return s
	}
	fieldType := func(s *Schema, name string) Type {
		if f := s.Field(name); f != nil {
			return f.Schema.Type
		}
		return 0
	}
	t.Run("shouldCreateCorrectSchemaFromArrayJson", func(t *testing.T) {
		for _, tt := range []struct {
			json string
			opts ExpandOptions
			desc Type
		}{
			{`[{"code":"100","description":"some description"},{"code":"200","description":"another description"},{"code":"300"}]`, ExpandOptions{}, TypeString},
			{`[{"code":"100","description": null},{"code":"200","description":"another description"},{"code":"300"}]`, ExpandOptions{}, TypeString},
			{`[{"code":"100","description": null},{"code":"200","description": null},{"code":"300"}]`, ExpandOptions{NullAsOptionalBytes: true}, TypeBytes},
			{`[{"code":"100","description": null},{"code":"200","description": "another description"},{"code":"300"}]`, ExpandOptions{NullAsOptionalBytes: true}, TypeString},
		} {
			// The test passes the array to toConnectSchema directly; the
			// router would fail a top-level array, so it is wrapped here.
			items := expand(t, `{"test_arr": `+tt.json+`}`, tt.opts).Field("test_arr").Schema.Items
			if items.Field("code") == nil || fieldType(items, "description") != tt.desc {
				t.Errorf("%s: items %+v, want code and a %s description", tt.json, items.Fields, tt.desc)
			}
		}
	})
	t.Run("failSchemaCheckForArrayWithDifferentNumberTypes", func(t *testing.T) {
		_, _, err := ExpandJSON("payload", `{"test": [1, 2.0, 3.0]}`, ExpandOptions{})
		const msg = "Field is not a homogenous array (1 x 2.0), different number types (Schema{INT32} x Schema{FLOAT64})"
		if !errors.Is(err, ErrNotExpanded) || !strings.HasSuffix(err.Error(), msg) {
			t.Errorf("got %v, want ErrNotExpanded: %s", err, msg)
		}
	})
	t.Run("shouldConvertNullNodeToOptionalBytes", func(t *testing.T) {
		s := expand(t, `{"heartbeat": 1, "email": null}`, ExpandOptions{NullAsOptionalBytes: true})
		if fieldType(s, "email") != TypeBytes {
			t.Errorf("email is %v, want BYTES", fieldType(s, "email"))
		}
	})
	t.Run("shouldDropEmptyArrayFieldByDefault", func(t *testing.T) {
		s := expand(t, `{"heartbeat": 1, "tags": []}`, ExpandOptions{})
		if s.Field("heartbeat") == nil || s.Field("tags") != nil {
			t.Errorf("fields %+v, want heartbeat and no tags", s.Fields)
		}
	})
	t.Run("shouldKeepNestedEmptyArrayFieldAsOptionalStringArray", func(t *testing.T) {
		s := expand(t, `{"nested": {"tags": []}}`, ExpandOptions{EmptyArrayAsOptionalString: true})
		tags := s.Field("nested").Schema.Field("tags")
		if tags == nil || tags.Schema.Type != TypeArray || tags.Schema.Items.Type != TypeString {
			t.Errorf("nested.tags is %+v, want an array of strings", tags)
		}
	})
	t.Run("shouldConvertEmptyArrayFieldToEmptyList", func(t *testing.T) {
		_, v, err := ExpandJSON("payload", `{"heartbeat": 1, "tags": []}`, ExpandOptions{EmptyArrayAsOptionalString: true})
		if err != nil {
			t.Fatal(err)
		}
		if tags, ok := v.Get("tags").([]any); !ok || len(tags) != 0 {
			t.Errorf("tags = %#v, want an empty list", v.Get("tags"))
		}
	})
}
