package avro

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/connect"
)

// Debezium's column schemas as internal/router gives them.
func jsonCol(optional bool) *connect.Schema {
	return &connect.Schema{Type: connect.TypeString, Optional: optional, Name: "io.debezium.data.Json", Version: 1, HasVersion: true}
}

func mustStruct(t testing.TB, s *connect.Schema, kv ...any) *connect.Struct {
	t.Helper()
	st, err := connect.NewStruct(s)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(kv); i += 2 {
		if err := st.Put(kv[i].(string), kv[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// envelopeE is case E of docs/design/avro.md 1.7: the envelope of a
// nullable jsonb payload, eventType varchar NOT NULL, prio int2 and
// status varchar DEFAULT 'new', schema version 3.
func envelopeE(payload *connect.Schema) *connect.Schema {
	return &connect.Schema{Type: connect.TypeStruct, Name: "test_server.public.outbox.order.Value", Version: 3, HasVersion: true,
		Fields: []connect.Field{
			{Name: "payload", Schema: payload},
			{Name: "eventType", Schema: &connect.Schema{Type: connect.TypeString}},
			{Name: "prio", Schema: &connect.Schema{Type: connect.TypeInt16, Optional: true}},
			{Name: "status", Schema: &connect.Schema{Type: connect.TypeString, Optional: true, Default: "new"}},
		}}
}

const (
	textE = `{"type":"record","name":"Value","namespace":"test_server.public.outbox.order","fields":[{"name":"payload","type":["null",{"type":"string","connect.version":1,"connect.name":"io.debezium.data.Json"}],"default":null},{"name":"eventType","type":"string"},{"name":"prio","type":["null",{"type":"int","connect.type":"int16"}],"default":null},{"name":"status","type":[{"type":"string","connect.default":"new"},"null"],"default":"new"}],"connect.version":3,"connect.name":"test_server.public.outbox.order.Value"}`
	textF = `["null",{"type":"record","name":"payload","fields":[{"name":"a","type":["null","int"],"default":null},{"name":"address","type":["null",{"type":"record","name":"address","namespace":"payload","fields":[{"name":"city","type":["null","string"],"default":null}],"connect.name":"payload.address"}],"default":null},{"name":"tags","type":["null",{"type":"array","items":["null","string"]}],"default":null}],"connect.name":"payload"}]`
	jsonF = `{"a":1,"address":{"city":"X"},"tags":["t"]}`
)

type schemaCase struct {
	name     string
	schema   func(t testing.TB) (*connect.Schema, any)
	opts     Options
	text     string
	body     string // hex
	record   string // FullName, "" for a schema that is not a record
	rawBytes bool
}

// table17 is docs/design/avro.md section 1.7: each schema text and body
// was printed by Apache Avro 1.8.2's Schema.toString and
// GenericDatumWriter (and decoded back by python3-avro) when the note was
// written.
func table17() []schemaCase {
	meta := Options{ConnectMetaData: true}
	return []schemaCase{
		{name: "A text not null", opts: meta, text: `"string"`, body: "06 616263",
			schema: func(testing.TB) (*connect.Schema, any) { return &connect.Schema{Type: connect.TypeString}, "abc" }},
		{name: "B jsonb nullable", opts: meta,
			text: `["null",{"type":"string","connect.version":1,"connect.name":"io.debezium.data.Json"}]`, body: "02 10 7b2261223a20317d",
			schema: func(testing.TB) (*connect.Schema, any) { return jsonCol(true), `{"a": 1}` }},
		{name: "C jsonb not null default", opts: meta,
			text: `{"type":"string","connect.version":1,"connect.default":"{}","connect.name":"io.debezium.data.Json"}`, body: "04 7b7d",
			schema: func(testing.TB) (*connect.Schema, any) {
				s := jsonCol(false)
				s.Default = "{}"
				return s, "{}"
			}},
		{name: "D bytea not null", opts: meta, text: `"bytes"`, body: "01 02", rawBytes: true,
			schema: func(testing.TB) (*connect.Schema, any) {
				return &connect.Schema{Type: connect.TypeBytes}, []byte{1, 2}
			}},
		{name: "D2 bytea nullable", opts: meta, text: `["null","bytes"]`, body: "02 04 01 02",
			schema: func(testing.TB) (*connect.Schema, any) {
				return &connect.Schema{Type: connect.TypeBytes, Optional: true}, []byte{1, 2}
			}},
		{name: "K uuid key", opts: meta,
			text: `{"type":"string","connect.version":1,"connect.name":"io.debezium.data.Uuid"}`,
			body: "48 " + hex.EncodeToString([]byte("7d4a3b1e-0c2f-4a8e-9b1d-2f3c4d5e6f70")),
			schema: func(testing.TB) (*connect.Schema, any) {
				return &connect.Schema{Type: connect.TypeString, Name: "io.debezium.data.Uuid", Version: 1, HasVersion: true},
					"7d4a3b1e-0c2f-4a8e-9b1d-2f3c4d5e6f70"
			}},
		{name: "E envelope", opts: meta, text: textE, record: "test_server.public.outbox.order.Value",
			body: "02 10 7b2261223a20317d 18 4f7264657243726561746564 00 00 06 6e6577",
			schema: func(t testing.TB) (*connect.Schema, any) {
				s := envelopeE(jsonCol(true))
				return s, mustStruct(t, s, "payload", `{"a": 1}`, "eventType", "OrderCreated")
			}},
		{name: "F expanded", opts: meta, text: textF, body: "02 02 02 02 02 02 58 02 02 02 02 74 00",
			schema: func(t testing.TB) (*connect.Schema, any) {
				s, v, err := connect.ExpandJSON("payload", jsonF, connect.ExpandOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return s, v
			}},
		{name: "F2 expanded in an envelope", opts: meta, record: "test_server.public.outbox.order.Value",
			text: `{"type":"record","name":"Value","namespace":"test_server.public.outbox.order","fields":[{"name":"payload","type":["null",{"type":"record","name":"payload","namespace":"",` +
				`"fields":[{"name":"a","type":["null","int"],"default":null},{"name":"address","type":["null",{"type":"record","name":"address","namespace":"payload","fields":[{"name":"city","type":["null","string"],"default":null}],"connect.name":"payload.address"}],"default":null},{"name":"tags","type":["null",{"type":"array","items":["null","string"]}],"default":null}],"connect.name":"payload"}],"default":null},` +
				`{"name":"eventType","type":"string"},{"name":"prio","type":["null",{"type":"int","connect.type":"int16"}],"default":null},{"name":"status","type":[{"type":"string","connect.default":"new"},"null"],"default":"new"}],"connect.version":3,"connect.name":"test_server.public.outbox.order.Value"}`,
			body: "02 02 02 02 02 02 58 02 02 02 02 74 00" + " 18 4f7264657243726561746564 02 04 00 06 6e6577",
			schema: func(t testing.TB) (*connect.Schema, any) {
				ps, pv, err := connect.ExpandJSON("payload", jsonF, connect.ExpandOptions{})
				if err != nil {
					t.Fatal(err)
				}
				s := envelopeE(ps)
				return s, mustStruct(t, s, "payload", pv, "eventType", "OrderCreated", "prio", int16(2))
			}},
	}
}

// noMeta are the cases of table17 with connect.meta.data=false: no
// connect.* properties at all.
func noMeta() []schemaCase {
	o := Options{}
	return []schemaCase{
		{name: "B jsonb nullable no meta", opts: o, text: `["null","string"]`, body: "02 10 7b2261223a20317d",
			schema: func(testing.TB) (*connect.Schema, any) { return jsonCol(true), `{"a": 1}` }},
		{name: "C jsonb default no meta", opts: o, text: `"string"`, body: "04 7b7d",
			schema: func(testing.TB) (*connect.Schema, any) {
				s := jsonCol(false)
				s.Default = "{}"
				return s, "{}"
			}},
		{name: "E envelope no meta", opts: o, record: "test_server.public.outbox.order.Value",
			text: `{"type":"record","name":"Value","namespace":"test_server.public.outbox.order","fields":[{"name":"payload","type":["null","string"],"default":null},{"name":"eventType","type":"string"},{"name":"prio","type":["null","int"],"default":null},{"name":"status","type":["string","null"],"default":"new"}]}`,
			body: "02 10 7b2261223a20317d 18 4f7264657243726561746564 00 00 06 6e6577",
			schema: func(t testing.TB) (*connect.Schema, any) {
				s := envelopeE(jsonCol(true))
				return s, mustStruct(t, s, "payload", `{"a": 1}`, "eventType", "OrderCreated")
			}},
		{name: "F expanded no meta", opts: o,
			text: `["null",{"type":"record","name":"payload","fields":[{"name":"a","type":["null","int"],"default":null},{"name":"address","type":["null",{"type":"record","name":"address","namespace":"payload","fields":[{"name":"city","type":["null","string"],"default":null}]}],"default":null},{"name":"tags","type":["null",{"type":"array","items":["null","string"]}],"default":null}]}]`,
			body: "02 02 02 02 02 02 58 02 02 02 02 74 00",
			schema: func(t testing.TB) (*connect.Schema, any) {
				s, v, err := connect.ExpandJSON("payload", jsonF, connect.ExpandOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return s, v
			}},
	}
}

// more are the naming rules: unnamed structs (AvroDataTest.
// testFromConnectStructsWithNullName), objects in arrays of arrays of
// expanded JSON, scrubbing (testFromConnectWithInvalidName), and typed
// defaults.
func more() []schemaCase {
	meta := Options{ConnectMetaData: true}
	return []schemaCase{
		{name: "unnamed structs: ConnectDefault, ConnectDefault2 and a name reference", opts: meta, record: "io.confluent.connect.avro.ConnectDefault",
			text: `{"type":"record","name":"ConnectDefault","namespace":"io.confluent.connect.avro","fields":[{"name":"struct","type":["null",{"type":"record","name":"ConnectDefault2","fields":[{"name":"value","type":"long"}]}],"default":null},{"name":"array","type":{"type":"array","items":["null","ConnectDefault2"]}}]}`,
			body: "02 aad505 02 02 aad505 00",
			schema: func(t testing.TB) (*connect.Schema, any) {
				inner := &connect.Schema{Type: connect.TypeStruct, Optional: true, Fields: []connect.Field{{Name: "value", Schema: &connect.Schema{Type: connect.TypeInt64}}}}
				outer := &connect.Schema{Type: connect.TypeStruct, Fields: []connect.Field{
					{Name: "struct", Schema: inner},
					{Name: "array", Schema: &connect.Schema{Type: connect.TypeArray, Items: inner}},
				}}
				in := mustStruct(t, inner, "value", int64(46421))
				return outer, mustStruct(t, outer, "struct", in, "array", []any{in})
			}},
		{name: "objects in arrays of arrays are ConnectDefault", opts: meta,
			text: `["null",{"type":"record","name":"payload","fields":[{"name":"m","type":["null",{"type":"array","items":["null",{"type":"array","items":["null",{"type":"record","name":"ConnectDefault","namespace":"io.confluent.connect.avro","fields":[{"name":"x","type":["null","int"],"default":null}]}]}]}],"default":null},` +
				`{"name":"n","type":["null",{"type":"array","items":["null",{"type":"array","items":["null",{"type":"record","name":"ConnectDefault2","namespace":"io.confluent.connect.avro","fields":[{"name":"y","type":["null","string"],"default":null}]}]}]}],"default":null},` +
				`{"name":"o","type":["null",{"type":"array","items":["null",{"type":"array","items":["null","io.confluent.connect.avro.ConnectDefault"]}]}],"default":null}],"connect.name":"payload"}]`,
			body: "02 02 02 02 02 02 02 02 00 00 02 02 02 02 02 02 02 7a 00 00 02 02 02 02 02 02 04 00 00",
			schema: func(t testing.TB) (*connect.Schema, any) {
				s, v, err := connect.ExpandJSON("payload", `{"m":[[{"x":1}]],"n":[[{"y":"z"}]],"o":[[{"x":2}]]}`, connect.ExpandOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return s, v
			}},
		{name: "scrubbed names (testFromConnectWithInvalidName)", opts: Options{ScrubInvalidNames: true}, record: "org.acme_corp.invalid_record_name",
			text: `{"type":"record","name":"invalid_record_name","namespace":"org.acme_corp","fields":[{"name":"invalid_field_name","type":"string"}]}`,
			body: "06 666f6f",
			schema: func(t testing.TB) (*connect.Schema, any) {
				s := &connect.Schema{Type: connect.TypeStruct, Name: "org.acme-corp.invalid record-name",
					Fields: []connect.Field{{Name: "invalid field-name", Schema: &connect.Schema{Type: connect.TypeString}}}}
				return s, mustStruct(t, s, "invalid field-name", "foo")
			}},
		{name: "scrubbed JSON keys keep connect.name unscrubbed", opts: Options{ConnectMetaData: true, ScrubInvalidNames: true},
			text: `["null",{"type":"record","name":"payload","fields":[{"name":"first_name","type":["null","string"],"default":null},{"name":"x1st","type":["null",{"type":"record","name":"x1st","namespace":"payload","fields":[{"name":"_24x","type":["null","boolean"],"default":null}],"connect.name":"payload.1st"}],"default":null}],"connect.name":"payload"}]`,
			body: "02 02 02 61 02 02 01",
			schema: func(t testing.TB) (*connect.Schema, any) {
				s, v, err := connect.ExpandJSON("payload", `{"first-name":"a","1st":{"$x":true}}`, connect.ExpandOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return s, v
			}},
		{name: "typed defaults", opts: meta, record: "t.Value",
			text: `{"type":"record","name":"Value","namespace":"t","fields":[` +
				`{"name":"f4","type":[{"type":"float","connect.default":1.1},"null"],"default":1.100000023841858},` +
				`{"name":"f8","type":{"type":"double","connect.default":2.5E-7},"default":2.5E-7},` +
				`{"name":"b","type":[{"type":"boolean","connect.default":true},"null"],"default":true},` +
				`{"name":"ts","type":{"type":"long","connect.version":1,"connect.default":0,"connect.name":"io.debezium.time.MicroTimestamp"},"default":0},` +
				`{"name":"i2","type":{"type":"int","connect.default":-3,"connect.type":"int16"},"default":-3},` +
				`{"name":"s","type":[{"type":"string","connect.default":"a\"\\\n\u0001é😀"},"null"],"default":"a\"\\\n\u0001é😀"}],"connect.name":"t.Value"}`,
			body: "00 cdcc8c3f 8dedb5a0f7c6903e 00 01 00 05 00 04 6869",
			schema: func(t testing.TB) (*connect.Schema, any) {
				s := &connect.Schema{Type: connect.TypeStruct, Name: "t.Value", Fields: []connect.Field{
					{Name: "f4", Schema: &connect.Schema{Type: connect.TypeFloat32, Optional: true, Default: float32(1.1)}},
					{Name: "f8", Schema: &connect.Schema{Type: connect.TypeFloat64, Default: 2.5e-7}},
					{Name: "b", Schema: &connect.Schema{Type: connect.TypeBoolean, Optional: true, Default: true}},
					{Name: "ts", Schema: &connect.Schema{Type: connect.TypeInt64, Name: "io.debezium.time.MicroTimestamp", Version: 1, HasVersion: true, Default: int64(0)}},
					{Name: "i2", Schema: &connect.Schema{Type: connect.TypeInt16, Default: int16(-3)}},
					{Name: "s", Schema: &connect.Schema{Type: connect.TypeString, Optional: true, Default: "a\"\\\n\x01é😀"}},
				}}
				return s, mustStruct(t, s, "i2", int16(-3), "s", "hi")
			}},
	}
}

func TestFromConnectSchema(t *testing.T) {
	var cases []schemaCase
	cases = append(cases, table17()...)
	cases = append(cases, noMeta()...)
	cases = append(cases, more()...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, v := tc.schema(t)
			as, err := FromConnectSchema(s, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if as.String() != tc.text {
				t.Errorf("schema\n got %s\nwant %s", as, tc.text)
			}
			name, ok := as.FullName()
			if name != tc.record || ok != (tc.record != "") {
				t.Errorf("FullName() = %q, %v; want %q", name, ok, tc.record)
			}
			if as.RawBytes() != tc.rawBytes {
				t.Errorf("RawBytes() = %v", as.RawBytes())
			}
			body, err := AppendBinary(nil, s, as, v)
			if err != nil {
				t.Fatal(err)
			}
			if want := unhex(t, tc.body); string(body) != string(want) {
				t.Errorf("body\n got % x\nwant % x", body, want)
			}
			msg, err := AppendMessage([]byte("x"), s, as, v)
			if err != nil {
				t.Fatal(err)
			}
			if string(msg) != "x\x00\x00\x00\x00\x00"+string(body) {
				t.Errorf("AppendMessage = % x", msg)
			}
		})
	}
}

func TestInvalidNames(t *testing.T) {
	for _, tc := range []struct {
		name, json, want string
	}{
		{"hyphen", `{"first-name":"a"}`, `field "first-name": Illegal character in: first-name`},
		{"digit first", `{"a":{"1st":1}}`, `field "a.1st": Illegal initial character: 1st`},
		{"dollar", `{"$x":1}`, `field "$x": Illegal initial character: $x`},
		{"nested record name", `{"a-b":{"c":1}}`, `field "a-b": Illegal character in: a-b`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, err := connect.ExpandJSON("payload", tc.json, connect.ExpandOptions{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = FromConnectSchema(s, Options{ConnectMetaData: true})
			if !errors.Is(err, ErrInvalidName) {
				t.Fatalf("err = %v, want ErrInvalidName", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to say %s", err, tc.want)
			}
		})
	}
	// Unicode letters are Avro names for Java's Avro (a current registry's
	// strict parser refuses them: docs/design/avro.md 0.10).
	s, _, err := connect.ExpandJSON("payload", `{"größe":1}`, connect.ExpandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FromConnectSchema(s, Options{}); err != nil {
		t.Errorf("größe: %v", err)
	}
}

func TestAppendBinaryErrors(t *testing.T) {
	req := &connect.Schema{Type: connect.TypeString}
	if _, err := AppendBinary(nil, req, nil, nil); !errors.Is(err, connect.ErrData) {
		t.Errorf("null for a required string: %v", err)
	}
	if _, err := AppendBinary(nil, req, nil, int32(1)); !errors.Is(err, connect.ErrData) {
		t.Errorf("int32 for a string: %v", err)
	}
	if _, err := FromConnectSchema(&connect.Schema{Type: connect.TypeMap, Keys: req, Values: req}, Options{}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("map: %v", err)
	}
}

func TestInterner(t *testing.T) {
	in := NewInterner(2)
	a, err := in.FromConnectSchema(jsonCol(true), Options{ConnectMetaData: true})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := in.FromConnectSchema(jsonCol(true), Options{ConnectMetaData: true})
	if a != b {
		t.Error("equal schemas gave two pointers")
	}
	c, _ := in.FromConnectSchema(jsonCol(true), Options{})
	if c == a || c.String() == a.String() || c.Fingerprint() == a.Fingerprint() {
		t.Error("different schemas share a pointer, a text or a fingerprint")
	}
	if in.Len() != 2 {
		t.Errorf("Len = %d", in.Len())
	}
	in.FromConnectSchema(jsonCol(false), Options{}) // full: starts again
	if in.Len() != 1 {
		t.Errorf("Len after the bound = %d, want 1", in.Len())
	}
}
