package conformance

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestAvroModelExamples pins the Avro model to the examples of
// docs/design/avro.md §1.7, whose schema texts and bodies were printed by
// Apache Avro 1.8.2's own Java code (Schema.toString() and
// GenericDatumWriter over a direct BinaryEncoder, fed by a line-cited port
// of AvroData.fromConnectSchema) and decoded back by python3-avro 1.11.1:
// as TestModelBytes pins the JsonConverter model to issue 21's bytes.
func TestAvroModelExamples(t *testing.T) {
	jsonb := func(optional bool) *Schema {
		return &Schema{Type: "string", Optional: optional, Name: "io.debezium.data.Json", Version: 1}
	}
	jsonbDefault := jsonb(false)
	jsonbDefault.Default = "{}"
	envE := structS("test_server.public.outbox.order.Value", false,
		field("payload", jsonb(true)),
		field("eventType", strS()),
		field("prio", &Schema{Type: "int16", Optional: true}),
		field("status", &Schema{Type: "string", Optional: true, Default: "new"}))
	envE.Version = 3
	address := structS("payload.address", true, field("city", optStrS()))
	expF := structS("payload", true,
		field("a", optI32S()), field("address", address), field("tags", arrayS(optStrS())))
	valF := Struct{expF, map[string]any{"a": int32(1),
		"address": Struct{address, map[string]any{"city": "X"}}, "tags": []any{"t"}}}
	envF2 := structS("test_server.public.outbox.order.Value", false, field("payload", expF), field("type", strS()))

	for _, tc := range []struct {
		name   string
		schema *Schema
		value  any
		text   string
		body   string // hex; "-" for a Kafka null
	}{
		{"A text NOT NULL", strS(), "abc", `"string"`, "06616263"},
		{"B jsonb nullable", jsonb(true), `{"a": 1}`,
			`["null",{"type":"string","connect.version":1,"connect.name":"io.debezium.data.Json"}]`, "02107b2261223a20317d"},
		{"C jsonb NOT NULL DEFAULT '{}'", jsonbDefault, "{}",
			`{"type":"string","connect.version":1,"connect.default":"{}","connect.name":"io.debezium.data.Json"}`, "047b7d"},
		{"D bytea NOT NULL", bytesS(), []byte{1, 2}, `"bytes"`, "0102"},
		{"D2 bytea nullable", opt(bytesS()), []byte{1, 2}, `["null","bytes"]`, "02040102"},
		{"K uuid NOT NULL", uuidS(), "f9171eb6-19f3-4579-9206-0e179d2ebad7",
			`{"type":"string","connect.version":1,"connect.name":"io.debezium.data.Uuid"}`,
			"48" + hex.EncodeToString([]byte("f9171eb6-19f3-4579-9206-0e179d2ebad7"))},
		{"E envelope", envE, Struct{envE, map[string]any{"payload": `{"a": 1}`, "eventType": "OrderCreated"}},
			`{"type":"record","name":"Value","namespace":"test_server.public.outbox.order","fields":[{"name":"payload","type":["null",{"type":"string","connect.version":1,"connect.name":"io.debezium.data.Json"}],"default":null},{"name":"eventType","type":"string"},{"name":"prio","type":["null",{"type":"int","connect.type":"int16"}],"default":null},{"name":"status","type":[{"type":"string","connect.default":"new"},"null"],"default":"new"}],"connect.version":3,"connect.name":"test_server.public.outbox.order.Value"}`,
			"02107b2261223a20317d184f7264657243726561746564000006" + "6e6577"},
		{"F expanded JSON", expF, valF,
			`["null",{"type":"record","name":"payload","fields":[{"name":"a","type":["null","int"],"default":null},{"name":"address","type":["null",{"type":"record","name":"address","namespace":"payload","fields":[{"name":"city","type":["null","string"],"default":null}],"connect.name":"payload.address"}],"default":null},{"name":"tags","type":["null",{"type":"array","items":["null","string"]}],"default":null}],"connect.name":"payload"}]`,
			"02020202020258020202027400"},
		{"T tombstone", nil, nil, "", "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.schema == nil {
				if _, ok := avroBody(nil, nil, tc.value); ok {
					t.Errorf("a null value is not a Kafka null")
				}
				return
			}
			n := avroSchemaOf(tc.schema, true)
			if got := avroText(n); got != tc.text {
				t.Errorf("schema text:\n got  %s\n want %s", got, tc.text)
			}
			body, ok := avroBody(n, tc.schema, tc.value)
			if got := hex.EncodeToString(body); !ok || got != tc.body {
				t.Errorf("body: got %s (ok %v), want %s", got, ok, tc.body)
			}
		})
	}

	// F2: the expanded struct as the envelope's payload field: the inner
	// record is written with "namespace":"" (a null namespace inside a
	// non-null one) and the field defaults to null.
	t.Run("F2 expanded JSON in an envelope", func(t *testing.T) {
		got := avroText(avroSchemaOf(envF2, true))
		want := `{"name":"payload","type":["null",{"type":"record","name":"payload","namespace":"","fields":[`
		if !strings.Contains(got, want) {
			t.Errorf("schema text %s\nlacks %s", got, want)
		}
		if !strings.Contains(got, `"connect.name":"payload"}],"default":null}`) {
			t.Errorf("schema text %s: the payload field does not default to null", got)
		}
	})

	// connect.meta.data=false (AvroDataConfig CONNECT_META_DATA_CONFIG):
	// no connect.* property anywhere (AD 1008-1037 are skipped).
	t.Run("E without connect.meta.data", func(t *testing.T) {
		got := avroText(avroSchemaOf(envE, false))
		want := `{"type":"record","name":"Value","namespace":"test_server.public.outbox.order","fields":[{"name":"payload","type":["null","string"],"default":null},{"name":"eventType","type":"string"},{"name":"prio","type":["null","int"],"default":null},{"name":"status","type":["string","null"],"default":"new"}]}`
		if got != want {
			t.Errorf("schema text:\n got  %s\n want %s", got, want)
		}
	})
}

// TestAvroModelPython decodes the model's body of every key and value of
// the catalog with Apache Avro's Python library (python3-avro 1.11.1),
// reading with the model's schema text, and compares the data with the
// case's Connect values: the model's schema and body agree with each
// other as an implementation nobody here wrote reads them.
func TestAvroModelPython(t *testing.T) {
	for _, meta := range []bool{true, false} {
		var batch pyavroBatch
		for _, c := range catalog() {
			for i, w := range c.Want {
				for _, side := range []struct {
					name string
					s    *Schema
					v    any
				}{{"key", w.KeySchema, w.Key}, {"value", w.ValueSchema, w.Value}} {
					if side.s == nil {
						continue
					}
					n := avroSchemaOf(side.s, meta)
					body, ok := avroBody(n, side.s, side.v)
					if !ok {
						continue
					}
					text := avroText(n)
					if bad := pythonRefuses(text); len(bad) > 0 {
						t.Logf("%s record %d %s: python3-avro refuses the names %q", c.Java, i, side.name, bad)
						continue
					}
					batch.add(text, fmt.Sprintf("%s record %d %s (connect.meta.data=%v)", c.Java, i, side.name, meta),
						body, avroPlain(side.s, side.v))
				}
			}
		}
		batch.check(t, "the model's schema")
	}
}

// TestAvroModelGoldens pins the model to the golden files of
// internal/connect/avro/testdata: the schema text and body (or the
// SchemaParseException) that Apache Avro 1.8.2's own Java code writes for
// each Connect schema and value of cases.json (its README says how they
// were made: a line-cited port of AvroData.fromConnectSchema building the
// schema with Avro's Schema API, Schema.toString() and GenericDatumWriter).
// The model shares no code with internal/connect/avro, which the same
// goldens pin: two readings of AvroData agreeing with Avro's own output.
func TestAvroModelGoldens(t *testing.T) {
	dir := filepath.Join("..", "connect", "avro", "testdata")
	raw, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	if err != nil {
		t.Fatalf("the goldens of internal/connect/avro: %v", err)
	}
	var cases []struct {
		Name    string
		Options struct {
			Meta  *bool `json:"connect.meta.data"`
			Scrub bool  `json:"scrub.invalid.names"`
		}
		Schema json.RawMessage
		Value  json.RawMessage
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			want := readAvroGolden(t, filepath.Join(dir, "golden", c.Name+".golden"))
			s, err := goldenSchema(c.Schema)
			if err != nil {
				t.Fatalf("schema: %v", err)
			}
			v, err := goldenValue(s, c.Value)
			if err != nil {
				t.Fatalf("value: %v", err)
			}
			if v == nil {
				v = s.Default // the router reads a NULL payload column as Struct.get does
			}
			n, err := avroSchemaOpts(s, c.Options.Meta == nil || *c.Options.Meta, c.Options.Scrub)
			if want["error"] != "" {
				if err == nil || err.Error() != want["error"] {
					t.Errorf("error %v, want Avro's %q", err, want["error"])
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := avroText(n); got != want["schema"] {
				t.Errorf("schema text:\n got  %s\n want %s", got, want["schema"])
			}
			body, _ := avroBody(n, s, v)
			if got := hex.EncodeToString(body); got != want["body"] {
				t.Errorf("body:\n got  %s\n want %s", got, want["body"])
			}
		})
	}
}

// readAvroGolden reads a golden file's "key: value" lines (# comments).
func readAvroGolden(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, ok := strings.Cut(l, ": ")
		if !ok {
			t.Fatalf("%s: line %q", path, l)
		}
		out[k] = v
	}
	return out
}

// goldenSchema reads a cases.json schema (JsonConverter's type names,
// optional, name, version, default, fields, items) into the model's.
func goldenSchema(raw json.RawMessage) (*Schema, error) {
	var j struct {
		Type     string
		Optional bool
		Name     string
		Version  int
		Default  json.RawMessage
		Fields   []struct {
			Name   string
			Schema json.RawMessage
		}
		Items json.RawMessage
	}
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, err
	}
	s := &Schema{Type: j.Type, Optional: j.Optional, Name: j.Name, Version: j.Version}
	for _, f := range j.Fields {
		fs, err := goldenSchema(f.Schema)
		if err != nil {
			return nil, err
		}
		s.Fields = append(s.Fields, Field{f.Name, fs})
	}
	if j.Items != nil {
		var err error
		if s.Items, err = goldenSchema(j.Items); err != nil {
			return nil, err
		}
	}
	if j.Default != nil {
		d, err := goldenValue(s, j.Default)
		if err != nil {
			return nil, fmt.Errorf("default: %w", err)
		}
		s.Default = d
	}
	return s, nil
}

// goldenValue reads a cases.json value of schema s into the model's
// values: bytes from hex, a struct from an object (absent fields unset).
func goldenValue(s *Schema, raw json.RawMessage) (any, error) {
	if raw == nil || string(raw) == "null" {
		return nil, nil
	}
	var err error
	num := func() json.Number {
		var n json.Number
		err = json.Unmarshal(raw, &n)
		return n
	}
	switch s.Type {
	case "boolean":
		var b bool
		err = json.Unmarshal(raw, &b)
		return b, err
	case "int8", "int16", "int32", "int64":
		i, perr := strconv.ParseInt(string(num()), 10, 64)
		switch s.Type {
		case "int8":
			return int8(i), errors.Join(err, perr)
		case "int16":
			return int16(i), errors.Join(err, perr)
		case "int32":
			return int32(i), errors.Join(err, perr)
		}
		return i, errors.Join(err, perr)
	case "float":
		f, perr := strconv.ParseFloat(string(num()), 32)
		return float32(f), errors.Join(err, perr)
	case "double":
		f, perr := strconv.ParseFloat(string(num()), 64)
		return f, errors.Join(err, perr)
	case "string":
		var str string
		err = json.Unmarshal(raw, &str)
		return str, err
	case "bytes":
		var h string
		if err = json.Unmarshal(raw, &h); err != nil {
			return nil, err
		}
		return hex.DecodeString(h)
	case "array":
		var items []json.RawMessage
		if err = json.Unmarshal(raw, &items); err != nil {
			return nil, err
		}
		out := make([]any, len(items))
		for i, it := range items {
			if out[i], err = goldenValue(s.Items, it); err != nil {
				return nil, err
			}
		}
		return out, nil
	case "struct":
		var fields map[string]json.RawMessage
		if err = json.Unmarshal(raw, &fields); err != nil {
			return nil, err
		}
		st := Struct{Schema: s, Values: map[string]any{}}
		for _, f := range s.Fields {
			if fr, ok := fields[f.Name]; ok {
				if st.Values[f.Name], err = goldenValue(f.Schema, fr); err != nil {
					return nil, fmt.Errorf("field %s: %w", f.Name, err)
				}
			}
		}
		return st, nil
	}
	return nil, fmt.Errorf("type %q", s.Type)
}
