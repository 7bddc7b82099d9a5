package testenv

import (
	"encoding/json"
	"testing"
)

// TestDecodeAvro checks the python3-avro decoder on bodies written by hand
// from the Avro specification (Binary Encoding): zig-zag varint ints and
// longs, length-prefixed strings and bytes, a union's branch index, a
// record's fields in schema order, a timestamp-millis logical type, and
// Confluent's prefix-less top-level bytes.
func TestDecodeAvro(t *testing.T) {
	rec := `{"type":"record","name":"R","fields":[
		{"name":"a","type":"int"},
		{"name":"s","type":"string"},
		{"name":"u","type":["null","long"]},
		{"name":"b","type":"bytes"},
		{"name":"xs","type":{"type":"array","items":"int"}}]}`
	for _, tc := range []struct {
		name   string
		schema string
		bodies [][]byte
		want   string // JSON of the decoded values, keys sorted
	}{
		{"int zigzag", `"int"`, [][]byte{{0x00}, {0x01}, {0x02}, {0x03}, {0x7f}, {0x80, 0x01}, {0xfe, 0xff, 0xff, 0xff, 0x0f}, {0xff, 0xff, 0xff, 0xff, 0x0f}},
			`[0,-1,1,-2,-64,64,2147483647,-2147483648]`},
		{"string", `"string"`, [][]byte{{0x06, 'f', 'o', 'o'}, {0x00}, {0x04, 0xc3, 0xa9}},
			`["foo","","é"]`},
		{"union", `["null","string"]`, [][]byte{{0x00}, {0x02, 0x02, 'a'}},
			`[null,"a"]`},
		{"record", rec, [][]byte{{
			0x54,           // a = 42
			0x04, 'h', 'i', // s = "hi"
			0x02, 0x01, // u: branch 1 (long), -1
			0x04, 0x00, 0xff, // b = 00ff
			0x04, 0x02, 0x04, 0x00, // xs: block of 2 (1, 2), end
		}}, `[{"a":42,"b":"00ff","s":"hi","u":-1,"xs":[1,2]}]`},
		{"timestamp-millis", `{"type":"long","logicalType":"timestamp-millis"}`, [][]byte{{0xd0, 0x0f}}, // 1000 ms
			`["1970-01-01T00:00:01+00:00"]`},
		{"confluent top-level bytes", `"bytes"`, [][]byte{{0x01, 0x02, 0xff}}, `["0102ff"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(DecodeAvroBatch(t, tc.schema, tc.bodies))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("decoded %s\nwant    %s", got, tc.want)
			}
		})
	}
}

// TestDecodeAvroRejects checks that the decoder reports what is not one
// datum of the schema (trailing bytes, a truncated body, a branch index out
// of range) instead of decoding something.
func TestDecodeAvroRejects(t *testing.T) {
	bodies := [][]byte{{0x02, 0x00}, {0x00, 0x06, 'f'}, {0x04}}
	res, err := decodeAvroPython(`["string","null"]`, bodies)
	if err != nil {
		skipNoPyAvro(t, err)
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Error == "" {
			t.Errorf("body %x decoded as %v, want an error", bodies[i], r.V)
		} else {
			t.Logf("body %x: %s", bodies[i], r.Error)
		}
	}
}
