package avrojson_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"github.com/twmb/avro"

	"github.com/walrelay/walrelay/internal/avrojson"
	"github.com/walrelay/walrelay/internal/testenv"
)

// orderSchema is the nested record: a record with a nested record
// (address) and an array of records (items), with defaults, a nullable
// field, an enum with a default symbol and a timestamp-millis.
const orderSchema = `{
  "type": "record", "name": "Order", "namespace": "com.example.shop",
  "fields": [
    {"name": "id", "type": "long"},
    {"name": "customer", "type": "string"},
    {"name": "address", "type": {
      "type": "record", "name": "Address",
      "fields": [
        {"name": "street", "type": "string"},
        {"name": "city", "type": "string"},
        {"name": "zip", "type": ["null", "string"], "default": null}
      ]}},
    {"name": "items", "type": {"type": "array", "items": {
      "type": "record", "name": "Item",
      "fields": [
        {"name": "sku", "type": "string"},
        {"name": "qty", "type": "int"},
        {"name": "price", "type": "double"}
      ]}}},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "UNKNOWN"], "default": "UNKNOWN"}, "default": "NEW"},
    {"name": "note", "type": "string", "default": "none"},
    {"name": "tags", "type": {"type": "map", "values": "int"}, "default": {}},
    {"name": "created", "type": {"type": "long", "logicalType": "timestamp-millis"}}
  ]
}`

const orderJSON = `{
  "id": 7,
  "customer": "ana",
  "address": {"street": "1 Rua Augusta", "city": "Lisboa", "zip": "1100-048"},
  "items": [
    {"sku": "A-1", "qty": 2, "price": 9.5},
    {"sku": "B-2", "qty": 1, "price": 20}
  ],
  "status": "PAID",
  "note": "leave at the door",
  "tags": {"gift": 1},
  "created": 1714564800000
}`

// orderDecoded is orderJSON as python3-avro decodes the Avro body.
const orderDecoded = `{"address":{"city":"Lisboa","street":"1 Rua Augusta","zip":"1100-048"},"created":"2024-05-01T12:00:00+00:00","customer":"ana","id":7,` +
	`"items":[{"price":9.5,"qty":2,"sku":"A-1"},{"price":20.0,"qty":1,"sku":"B-2"}],"note":"leave at the door","status":"PAID","tags":{"gift":1}}`

func compile(t *testing.T, schema string) *avrojson.Codec {
	t.Helper()
	c, err := avrojson.Compile(schema)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func encode(t *testing.T, c *avrojson.Codec, js string) []byte {
	t.Helper()
	b, err := c.AppendJSON(nil, []byte(js))
	if err != nil {
		t.Fatalf("AppendJSON(%s): %v", js, err)
	}
	return b
}

// pyJSON decodes body with python3-avro and renders it as JSON, keys sorted.
func pyJSON(t *testing.T, schema string, body []byte) string {
	t.Helper()
	b, err := json.Marshal(testenv.DecodeAvro(t, schema, body))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// twmbEncode is the body twmb/avro writes for js, through its own Avro-JSON
// decoder and binary encoder: a second opinion independent of ours.
func twmbEncode(t *testing.T, schema, js string) []byte {
	t.Helper()
	s := avro.MustParse(schema)
	var v any
	if err := s.DecodeJSON([]byte(js), &v); err != nil {
		t.Fatalf("twmb/avro DecodeJSON: %v", err)
	}
	b, err := s.AppendEncode(nil, v)
	if err != nil {
		t.Fatalf("twmb/avro Encode: %v", err)
	}
	return b
}

func wantFieldError(t *testing.T, err error, path string, sentinel error) {
	t.Helper()
	var fe *avrojson.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T), want a *FieldError at %q", err, err, path)
	}
	if fe.Path != path || !errors.Is(err, sentinel) {
		t.Fatalf("error %q: path %q, want %q wrapping %q", err, fe.Path, path, sentinel)
	}
	t.Logf("%v", err)
}

// TestNestedRecord is the "Done when" for item 3: a nested record
// schema, a payload that matches (checked by python3-avro and by twmb/avro's
// own encoder), a missing required field (named address.city), an extra
// field (dropped, as Avro's reader drops writer-only fields) and a missing
// field with a default (the default is written).
func TestNestedRecord(t *testing.T) {
	c := compile(t, orderSchema)
	body := encode(t, c, orderJSON)
	t.Run("python3-avro", func(t *testing.T) {
		if got := pyJSON(t, orderSchema, body); got != orderDecoded {
			t.Errorf("python3-avro decoded\n%s\nwant\n%s", got, orderDecoded)
		}
	})
	if want := twmbEncode(t, orderSchema, orderJSON); !bytes.Equal(body, want) {
		t.Errorf("body %x\ntwmb/avro writes %x", body, want)
	}

	t.Run("missing required field", func(t *testing.T) {
		_, err := c.AppendJSON(nil, []byte(`{"id": 7, "customer": "ana", "address": {"street": "x"}, "items": [], "created": 0}`))
		wantFieldError(t, err, "address.city", avrojson.ErrMissingField)
	})
	t.Run("missing required field in an array element", func(t *testing.T) {
		_, err := c.AppendJSON(nil, []byte(`{"id": 7, "customer": "ana", "address": {"street": "x", "city": "y"},
			"items": [{"sku": "a", "qty": 1, "price": 1}, {"sku": "b", "qty": 1, "price": 1}, {"qty": 1, "price": 1}], "created": 0}`))
		wantFieldError(t, err, "items[2].sku", avrojson.ErrMissingField)
	})
	t.Run("extra fields", func(t *testing.T) {
		extra := `{"id": 7, "customer": "ana", "loyalty": {"tier": [1, "gold", {"x": null}]},
			"address": {"street": "1 Rua Augusta", "city": "Lisboa", "zip": "1100-048", "country": "PT"},
			"items": [{"sku": "A-1", "qty": 2, "price": 9.5, "colour": "red"}, {"sku": "B-2", "qty": 1, "price": 20}],
			"status": "PAID", "note": "leave at the door", "tags": {"gift": 1}, "created": 1714564800000, "z": true}`
		if got := encode(t, c, extra); !bytes.Equal(got, body) {
			t.Errorf("with extra fields %x\nwithout them     %x", got, body)
		}
	})
	t.Run("defaults", func(t *testing.T) {
		got := encode(t, c, `{"id": 7, "customer": "ana", "address": {"street": "s", "city": "c"}, "items": [], "created": 0}`)
		if want := twmbEncode(t, orderSchema, `{"id": 7, "customer": "ana", "address": {"street": "s", "city": "c"}, "items": [], "created": 0}`); !bytes.Equal(got, want) {
			t.Errorf("body %x\ntwmb/avro writes %x", got, want)
		}
		const want = `{"address":{"city":"c","street":"s","zip":null},"created":"1970-01-01T00:00:00+00:00","customer":"ana","id":7,"items":[],"note":"none","status":"NEW","tags":{}}`
		if dec := pyJSON(t, orderSchema, got); dec != want {
			t.Errorf("python3-avro decoded\n%s\nwant\n%s", dec, want)
		}
	})
}

// TestMismatches: each value the schema does not take is a FieldError at the
// field's path, with the sentinel that says why.
func TestMismatches(t *testing.T) {
	const schema = `{"type": "record", "name": "R", "fields": [
		{"name": "i", "type": "int", "default": 0},
		{"name": "l", "type": "long", "default": 0},
		{"name": "f", "type": "float", "default": 0},
		{"name": "s", "type": "string", "default": ""},
		{"name": "b", "type": "boolean", "default": false},
		{"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}, "default": "A"},
		{"name": "x", "type": {"type": "fixed", "name": "F", "size": 2}, "default": "\u0000\u0000"},
		{"name": "m", "type": {"type": "map", "values": {"type": "array", "items": "int"}}, "default": {}},
		{"name": "r", "type": {"type": "record", "name": "In", "fields": [{"name": "v", "type": "int"}]}, "default": {"v": 1}}
	]}`
	c := compile(t, schema)
	for _, tc := range []struct {
		name, js, path string
		err            error
	}{
		{"string for int", `{"i": "1"}`, "i", avrojson.ErrType},
		{"fraction for int", `{"i": 1.5}`, "i", avrojson.ErrType},
		{"exponent for long", `{"l": 1e3}`, "l", avrojson.ErrType},
		{"int above 2^31-1", `{"i": 2147483648}`, "i", avrojson.ErrRange},
		{"int below -2^31", `{"i": -2147483649}`, "i", avrojson.ErrRange},
		{"long above 2^63-1", `{"l": 9223372036854775808}`, "l", avrojson.ErrRange},
		{"float above float32", `{"f": 1e39}`, "f", avrojson.ErrRange},
		{"float from other string", `{"f": "1.5"}`, "f", avrojson.ErrType},
		{"number for string", `{"s": 1}`, "s", avrojson.ErrType},
		{"object for string", `{"s": {}}`, "s", avrojson.ErrType},
		{"string for boolean", `{"b": "true"}`, "b", avrojson.ErrType},
		{"unknown symbol, no enum default", `{"e": "C"}`, "e", avrojson.ErrSymbol},
		{"fixed of the wrong size", `{"x": "abc"}`, "x", avrojson.ErrType},
		{"bytes above U+00FF", `{"x": "\u0100a"}`, "x", avrojson.ErrType},
		{"map value", `{"m": {"k1": [1], "k2": [1, "2"]}}`, `m["k2"][1]`, avrojson.ErrType},
		{"array for map", `{"m": [1]}`, "m", avrojson.ErrType},
		{"nested record", `{"r": {"v": true}}`, "r.v", avrojson.ErrType},
		{"null for int", `{"i": null}`, "i", avrojson.ErrNull},
		{"null for string", `{"s": null}`, "s", avrojson.ErrNull},
		{"null for a record", `{"r": null}`, "r", avrojson.ErrNull},
		{"null in an array", `{"m": {"k": [1, null]}}`, `m["k"][1]`, avrojson.ErrNull},
		{"document not an object", `[1]`, "", avrojson.ErrType},
		{"document null", `null`, "", avrojson.ErrNull},
		{"not JSON", `{"i": 1`, "", avrojson.ErrInvalidJSON},
		{"empty", ``, "", avrojson.ErrInvalidJSON},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := []byte("prefix")
			out, err := c.AppendJSON(dst, []byte(tc.js))
			wantFieldError(t, err, tc.path, tc.err)
			if string(out) != "prefix" {
				t.Errorf("dst after an error: %q, want it unchanged", out)
			}
		})
	}
}

// TestValues pins the bytes of each Avro type, written by hand from the
// specification's Binary Encoding, and has python3-avro decode them.
func TestValues(t *testing.T) {
	for _, tc := range []struct {
		name, schema, js, hex, decoded string
	}{
		{"int", `"int"`, `-2147483648`, "ffffffff0f", `-2147483648`},
		{"long", `"long"`, `9223372036854775807`, "feffffffffffffffff01", `9223372036854775807`},
		{"long min", `"long"`, `-9223372036854775808`, "ffffffffffffffffff01", `-9223372036854775808`},
		{"float", `"float"`, `1.5`, "0000c03f", `1.5`},
		{"float from an integer", `"float"`, `2`, "00000040", `2.0`},
		{"double NaN", `"double"`, `"NaN"`, "000000000000f87f", `"NaN"`},
		{"double -Infinity", `"double"`, `"-Infinity"`, "000000000000f0ff", `"-Infinity"`},
		{"boolean", `"boolean"`, `true`, "01", `true`},
		{"null", `"null"`, `null`, "", `null`},
		{"string with escapes", `"string"`, `"a\"\\\/\n\u00e9\ud83d\ude00"`, "16" + hex.EncodeToString([]byte("a\"\\/\né😀")), `"a\"\\/\né😀"`},
		{"string with a lone surrogate", `"string"`, `"\ud800x"`, "08efbfbd78", "\"\ufffdx\""},
		{"bytes as code points", `{"type": "array", "items": "bytes"}`, `["\u0000\u00ffA"]`, "02" + "0600ff41" + "00", `["00ff41"]`},
		{"top-level bytes: no length prefix, as Confluent writes it", `"bytes"`, `"\u0000\u00ffA"`, "00ff41", `"00ff41"`},
		{"top-level decimal bytes: no length prefix", `{"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}`, `-1.29`, "ff7f", `"ff7f"`},
		{"fixed", `{"type": "fixed", "name": "F", "size": 2}`, `"\u0001\u00fe"`, "01fe", `"01fe"`},
		{"enum", `{"type": "enum", "name": "E", "symbols": ["A", "B"]}`, `"B"`, "02", `"B"`},
		{"enum default for an unknown symbol", `{"type": "enum", "name": "E", "symbols": ["A", "B"], "default": "B"}`, `"Z"`, "02", `"B"`},
		{"array", `{"type": "array", "items": "int"}`, `[1, 2, 3]`, "0602040600", `[1,2,3]`},
		{"empty array", `{"type": "array", "items": "int"}`, `[]`, "00", `[]`},
		{"map", `{"type": "map", "values": "boolean"}`, `{"a": true, "b\u00e9": false}`, "04" + "026101" + "0662c3a900" + "00", `{"a":true,"bé":false}`},
		{"map key with an escape", `{"type": "map", "values": "int"}`, `{"a\"b": 1}`, "0206612262" + "0200", `{"a\"b":1}`},
		{"field alias", `{"type": "record", "name": "R", "fields": [{"name": "new", "type": "int", "aliases": ["old"]}]}`, `{"old": 3}`, "06", `{"new":3}`},
		{"repeated member: the last wins", `{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}`, `{"a": 1, "a": 2}`, "04", `{"a":2}`},
		{"member with an escaped name", `{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}`, `{"\u0061": 1}`, "02", `{"a":1}`},
		{"recursive record", `{"type": "record", "name": "Node", "fields": [{"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"], "default": null}]}`,
			`{"v": 1, "next": {"v": 2, "next": {"v": 3}}}`, "02" + "02" + "04" + "02" + "06" + "00", `{"next":{"next":{"next":null,"v":3},"v":2},"v":1}`},
		{"defaults of referenced named types", `{"type": "record", "name": "O", "namespace": "com.x", "fields": [
			{"name": "a", "type": {"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "string"], "default": null}]}},
			{"name": "b", "type": "Address", "default": {"city": "Porto"}},
			{"name": "c", "type": {"type": "array", "items": "com.x.Address"}, "default": [{"city": "Faro", "zip": "8000"}]},
			{"name": "u", "type": ["null", "Address"], "default": null}]}`,
			`{"a": {"city": "Lisboa"}, "u": {"Address": {"city": "Braga"}}}`, "0c4c6973626f6100" + "0a506f72746f00" + "02084661726f0208383030300" + "0" + "020a427261676100",
			`{"a":{"city":"Lisboa","zip":null},"b":{"city":"Porto","zip":null},"c":[{"city":"Faro","zip":"8000"}],"u":{"city":"Braga","zip":null}}`},
		{"whitespace around the document", `"int"`, " \n\t1 \r\n", "02", `1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := compile(t, tc.schema)
			got := encode(t, c, tc.js)
			if hex.EncodeToString(got) != tc.hex {
				t.Errorf("body %x, want %s", got, tc.hex)
			}
			if dec := pyJSON(t, tc.schema, got); dec != tc.decoded {
				t.Errorf("python3-avro decoded %s, want %s", dec, tc.decoded)
			}
		})
	}
}

// TestUnions: bare values take the first branch that accepts them; Avro's
// tagged form is read when unambiguous. The branch index (the first byte) is
// what tells branches apart: python3-avro returns the bare value.
func TestUnions(t *testing.T) {
	const addr = `{"type": "record", "name": "Address", "namespace": "com.example", "fields": [{"name": "city", "type": "string"}]}`
	for _, tc := range []struct {
		name, schema, js, hex string
	}{
		{"bare null", `["null", "string"]`, `null`, "00"},
		{"bare string", `["null", "string"]`, `"a"`, "020261"},
		{"tagged string", `["null", "string"]`, `{"string": "a"}`, "020261"},
		{"bare int", `["null", "int", "long"]`, `1`, "0202"},
		{"bare int too big for int: long", `["null", "int", "long"]`, `4294967296`, "0480808080 20"},
		{"tagged long", `["null", "int", "long"]`, `{"long": 1}`, "0402"},
		{"bare fraction: double", `["int", "double"]`, `0.5`, "02000000000000e03f"},
		{"bare record", `["null", ` + addr + `]`, `{"city": "x"}`, "020278"},
		{"tagged record, full name", `["null", ` + addr + `]`, `{"com.example.Address": {"city": "x"}}`, "020278"},
		{"tagged record, short name", `["null", ` + addr + `]`, `{"Address": {"city": "x"}}`, "020278"},
		{"one-member object with a map branch: bare", `["null", {"type": "map", "values": "string"}]`, `{"string": "a"}`, "0202" + "0c737472696e67" + "0261" + "00"},
		{"member named like a branch and like a field: bare", `["null", "string", {"type": "record", "name": "R", "fields": [{"name": "string", "type": "string"}]}]`, `{"string": "a"}`, "04" + "0261"},
		{"string: enum symbol before string", `[{"type": "enum", "name": "E", "symbols": ["A"]}, "string"]`, `"A"`, "0000"},
		{"string: not a symbol, so string", `[{"type": "enum", "name": "E", "symbols": ["A"]}, "string"]`, `"B"`, "020242"},
		{"timestamp string before string", `["null", {"type": "long", "logicalType": "timestamp-millis"}, "string"]`, `"1970-01-01T00:00:01Z"`, "02d00f"},
		{"not a timestamp, so string", `["null", {"type": "long", "logicalType": "timestamp-millis"}, "string"]`, `"soon"`, "0408736f6f6e"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := compile(t, tc.schema)
			got := encode(t, c, tc.js)
			if want := stripSpaces(tc.hex); hex.EncodeToString(got) != want {
				t.Errorf("body %x, want %s", got, want)
			}
			pyJSON(t, tc.schema, got) // python3-avro reads it
		})
	}

	for _, tc := range []struct {
		name, schema, js, path string
		err                    error
	}{
		{"null, no null branch", `{"type": "record", "name": "R", "fields": [{"name": "u", "type": ["int", "string"]}]}`, `{"u": null}`, "u", avrojson.ErrNull},
		{"no branch for a boolean", `{"type": "record", "name": "R", "fields": [{"name": "u", "type": ["null", "int", "string"]}]}`, `{"u": true}`, "u", avrojson.ErrUnion},
		{"one candidate: its error, with its path", `{"type": "record", "name": "R", "fields": [{"name": "u", "type": ["null", ` + addr + `]}]}`, `{"u": {"city": 1}}`, "u.city", avrojson.ErrType},
		{"tagged with a wrong value", `{"type": "record", "name": "R", "fields": [{"name": "u", "type": ["null", "int"]}]}`, `{"u": {"int": "x"}}`, "u", avrojson.ErrType},
		{"two candidates fail", `{"type": "record", "name": "R", "fields": [{"name": "u", "type": ["null", "int", "float"]}]}`, `{"u": 1e40}`, "u", avrojson.ErrUnion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := compile(t, tc.schema).AppendJSON(nil, []byte(tc.js))
			wantFieldError(t, err, tc.path, tc.err)
		})
	}
}

func stripSpaces(s string) string { return string(bytes.ReplaceAll([]byte(s), []byte(" "), nil)) }

// TestLogicalTypes: timestamps from JSON numbers and RFC 3339 strings, never
// rounded; dates, times and decimals.
func TestLogicalTypes(t *testing.T) {
	const schema = `{"type": "record", "name": "R", "fields": [
		{"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
		{"name": "us", "type": {"type": "long", "logicalType": "timestamp-micros"}, "default": 0},
		{"name": "lts", "type": {"type": "long", "logicalType": "local-timestamp-millis"}, "default": 0},
		{"name": "d", "type": {"type": "int", "logicalType": "date"}, "default": 0},
		{"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}, "default": 0},
		{"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}, "default": "\u0000"},
		{"name": "fdec", "type": {"type": "fixed", "name": "D", "size": 4, "logicalType": "decimal", "precision": 8, "scale": 1}, "default": "\u0000\u0000\u0000\u0000"}
	]}`
	c := compile(t, schema)
	number := encode(t, c, `{"ts": 1714564800123}`)
	str := encode(t, c, `{"ts": "2024-05-01T14:00:00.123+02:00"}`)
	if !bytes.Equal(number, str) {
		t.Errorf("timestamp-millis from a number %x, from a string %x", number, str)
	}
	got := encode(t, c, `{"ts": "2024-05-01T12:00:00.123Z", "us": "2024-05-01T12:00:00.123456Z", "lts": "2024-05-01T12:00:00.5",
		"d": "2024-05-01", "tm": "12:34:56.789", "dec": "-1234.5", "fdec": 12.3}`)
	// python3-avro 1.11.1 has no local-timestamp-millis: it prints the long.
	const want = `{"d":"2024-05-01","dec":"-1234.50","fdec":"12.3","lts":1714564800500,"tm":"12:34:56.789000","ts":"2024-05-01T12:00:00.123000+00:00","us":"2024-05-01T12:00:00.123456+00:00"}`
	t.Run("python3-avro", func(t *testing.T) {
		if dec := pyJSON(t, schema, got); dec != want {
			t.Errorf("python3-avro decoded\n%s\nwant\n%s", dec, want)
		}
	})
	if want := twmbEncode(t, schema, `{"ts": 1714564800123, "us": 1714564800123456, "lts": 1714564800500, "d": 19844, "tm": 45296789,
		"dec": "\u00fe\u001d\u00c6", "fdec": "\u0000\u0000\u0000\u007b"}`); !bytes.Equal(got, want) {
		t.Errorf("body %x\ntwmb/avro writes %x (from the same values as numbers and Avro-JSON bytes)", got, want)
	}

	for _, tc := range []struct {
		name, js, path string
		err            error
	}{
		{"timestamp finer than millis", `{"ts": "2024-05-01T12:00:00.1234Z"}`, "ts", avrojson.ErrLogical},
		{"timestamp without offset", `{"ts": "2024-05-01T12:00:00"}`, "ts", avrojson.ErrLogical},
		{"local timestamp with offset", `{"ts": 0, "lts": "2024-05-01T12:00:00Z"}`, "lts", avrojson.ErrLogical},
		{"timestamp not a time", `{"ts": "yesterday"}`, "ts", avrojson.ErrLogical},
		{"timestamp fraction number", `{"ts": 1.5}`, "ts", avrojson.ErrType},
		{"date", `{"ts": 0, "d": "01/05/2024"}`, "d", avrojson.ErrLogical},
		{"decimal beyond the scale", `{"ts": 0, "dec": 1.234}`, "dec", avrojson.ErrLogical},
		{"decimal beyond the precision", `{"ts": 0, "dec": "12345.6"}`, "dec", avrojson.ErrLogical},
		{"decimal not a numeral", `{"ts": 0, "dec": "1/3"}`, "dec", avrojson.ErrLogical},
		{"decimal with a huge exponent", `{"ts": 0, "dec": 1e999999999}`, "dec", avrojson.ErrLogical},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.AppendJSON(nil, []byte(tc.js))
			wantFieldError(t, err, tc.path, tc.err)
		})
	}
}

// TestCompile: a schema naming a type it does not define (a reference to
// another subject) is refused; an unknown logical type is its underlying
// type.
func TestCompile(t *testing.T) {
	_, err := avrojson.Compile(`{"type": "record", "name": "R", "fields": [{"name": "a", "type": "com.other.Thing"}]}`)
	if err == nil {
		t.Fatal("Compile of a schema with an unknown named type succeeded")
	}
	t.Log(err)
	if _, err := avrojson.Compile(`{"type": "record"`); err == nil {
		t.Fatal("Compile of invalid JSON succeeded")
	}
	c := compile(t, `{"type": "string", "logicalType": "x-made-up"}`)
	if got := encode(t, c, `"a"`); hex.EncodeToString(got) != "0261" {
		t.Errorf("body %x", got)
	}
}

// TestConcurrent: one Codec serves many goroutines (the relay shares the
// cached Codec of a registry id); run with -race.
func TestConcurrent(t *testing.T) {
	c := compile(t, orderSchema)
	want := encode(t, c, orderJSON)
	done := make(chan error)
	for range 4 {
		go func() {
			var buf []byte
			for range 200 {
				var err error
				if buf, err = c.AppendJSON(buf[:0], []byte(orderJSON)); err != nil {
					done <- err
					return
				}
				if !bytes.Equal(buf, want) {
					done <- errors.New("different bytes")
					return
				}
				if _, err := c.AppendJSON(nil, []byte(`{"items": [{}]}`)); err == nil {
					done <- errors.New("no error for a bad payload")
					return
				}
			}
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// FuzzAppendJSON: whatever the document, AppendJSON returns bytes or a
// *FieldError, never panics (its scanner trusts json.Valid's verdict).
func FuzzAppendJSON(f *testing.F) {
	for _, s := range []string{orderJSON, `{"items": [{"sku": "a\"]}"}]}`, `{"a\u0022": 1}`, `[]`, `"\ud800"`, `{"tags": {"": 1, "\\": 2}}`, `1e999`} {
		f.Add(s)
	}
	c, err := avrojson.Compile(orderSchema)
	if err != nil {
		f.Fatal(err)
	}
	u, err := avrojson.Compile(`["null", "int", "double", "string", {"type": "array", "items": ["null", "string"]}, {"type": "map", "values": "long"}]`)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, js string) {
		for _, c := range []*avrojson.Codec{c, u} {
			if _, err := c.AppendJSON(nil, []byte(js)); err != nil {
				var fe *avrojson.FieldError
				if !errors.As(err, &fe) {
					t.Fatalf("%q: error %v is not a *FieldError", js, err)
				}
			}
		}
	})
}

// TestDecimalsAgainstTwmb: the decimal's two's complement (minimal for
// bytes, sign-extended for fixed) equals twmb/avro's for numerals around
// every byte boundary.
func TestDecimalsAgainstTwmb(t *testing.T) {
	for _, schema := range []string{
		`{"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}`,
		`{"type": "fixed", "name": "F", "size": 6, "logicalType": "decimal", "precision": 12, "scale": 2}`,
	} {
		c := compile(t, `{"type": "array", "items": `+schema+`}`)
		s := avro.MustParse(schema)
		for _, base := range []int64{0, 1 << 7, 1 << 8, 1 << 15, 1 << 16, 1 << 23, 1 << 31, 1 << 39} {
			for _, delta := range []int64{-2, -1, 0, 1, 2} {
				for _, sign := range []int64{1, -1} {
					unscaled := sign * (base + delta)
					text := strconv.FormatFloat(float64(unscaled)/100, 'f', 2, 64)
					got := encode(t, c, `["`+text+`"]`)
					want, err := s.AppendEncode([]byte{0x02}, text) // one-item block
					if err != nil {
						t.Fatalf("twmb/avro %s: %v", text, err)
					}
					want = append(want, 0)
					if !bytes.Equal(got, want) {
						t.Errorf("%s by %s: %x, twmb/avro %x", text, schema, got, want)
					}
				}
			}
		}
	}
}
