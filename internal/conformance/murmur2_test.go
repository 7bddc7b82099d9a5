package conformance

import (
	"testing"

	"github.com/walrelay/walrelay/internal/testenv"
)

// Issue 21's partitions for agg-1 on 6 partitions, from the exact key bytes
// of each setting, by Kafka's partitioner (testenv.KafkaPartition).
func TestMurmur2(t *testing.T) {
	for _, c := range []struct {
		setting string
		key     string
		want    int32
	}{
		{"raw and string", `agg-1`, 3},
		{"json without schemas", `"agg-1"`, 0},
		{"json with schemas", `{"schema":{"type":"string","optional":false},"payload":"agg-1"}`, 4},
	} {
		if got := testenv.KafkaPartition([]byte(c.key), 6); got != c.want {
			t.Errorf("%s: partition of %s on 6 partitions = %d, want %d", c.setting, c.key, got, c.want)
		}
	}
}

// The model renders issue 21's table and docs/debezium-reference.md §6 as
// written there (hand-copied bytes, not produced by walrelay).
func TestModelBytes(t *testing.T) {
	for _, c := range []struct {
		name string
		got  []byte
		want string
	}{
		{"issue key json", jsonConverter(strS(), "agg-1", true), `{"schema":{"type":"string","optional":false},"payload":"agg-1"}`},
		{"issue value json", jsonConverter(optJSONS(), `{"a": 1}`, true), `{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"{\"a\": 1}"}`},
		{"issue key json no schemas", jsonConverter(strS(), "agg-1", false), `"agg-1"`},
		{"issue value json no schemas", jsonConverter(optJSONS(), `{"a": 1}`, false), `"{\"a\": 1}"`},
		{"reference key", jsonConverter(strS(), "10711fa5", true), `{"schema":{"type":"string","optional":false},"payload":"10711fa5"}`},
		{"reference value", jsonConverter(optJSONS(), `{}`, true), `{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"{}"}`},
		{"null with optional schema", jsonConverter(optJSONS(), nil, true), `{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":null}`},
		{"null without schemas", jsonConverter(optJSONS(), nil, false), `null`},
		{"jackson escapes", jacksonString(nil, "a\"\\\b\t\n\f\r\x01</>&\u2028🚀"), `"a\"\\\b\t\n\f\r\u0001</>&` + "\u2028" + `\uD83D\uDE80"`},
		{"default replaces null", jsonValue(nil, &Schema{Type: "boolean", Optional: true, Default: false}, nil), `false`},
		{"struct schema", jsonSchema(nil, structS("n", false, field("a", optJSONS()), field("b", &Schema{Type: "boolean", Optional: true, Default: false})), ""),
			`{"type":"struct","fields":[{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"a"},{"type":"boolean","optional":true,"default":false,"field":"b"}],"optional":false,"name":"n"}`},
		{"struct toString", func() []byte {
			b, _ := stringConverter(Struct{structS("n", false, field("payload", optStrS()), field("x", boolS()), field("l", arrayS(i32S()))),
				map[string]any{"x": true, "l": []any{nil, int32(2)}}})
			return b
		}(), `Struct{x=true,l=[null, 2]}`},
		{"simple header bytes", simpleHeader([]byte("{}")), `e30=`},
		{"simple header bool", simpleHeader(true), `true`},
	} {
		if string(c.got) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, c.got, c.want)
		}
	}
	if _, ok := stringConverter([]byte("x")); ok {
		t.Error("StringConverter of byte[] must be reported as not deterministic")
	}
	if jsonConverter(nil, nil, true) != nil {
		t.Error("a null schema and value must give a Kafka null")
	}
}
