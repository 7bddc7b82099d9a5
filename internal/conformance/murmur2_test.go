package conformance

import (
	"testing"
)

// murmur2 is Kafka's Utils.murmur2 (apache/kafka
// clients/src/main/java/org/apache/kafka/common/utils/Utils.java, lines
// 492-530 at 1eb7644349cb07139d6a3c1ad1986979647cac99), in Java's int32
// arithmetic: seed 0x9747b28c, m 0x5bd1e995, r 24, the tail switch falling
// through.
func murmur2(data []byte) int32 {
	length := int32(len(data))
	const seed = int32(-0x68b84d74) // 0x9747b28c as a Java int
	const m = int32(0x5bd1e995)
	const r = 24
	h := seed ^ length
	length4 := length / 4
	for i := int32(0); i < length4; i++ {
		i4 := i * 4
		k := int32(data[i4]) + int32(data[i4+1])<<8 + int32(data[i4+2])<<16 + int32(data[i4+3])<<24
		k *= m
		k ^= int32(uint32(k) >> r)
		k *= m
		h *= m
		h ^= k
	}
	tail := length &^ 3
	switch length % 4 {
	case 3:
		h ^= int32(data[tail+2]) << 16
		fallthrough
	case 2:
		h ^= int32(data[tail+1]) << 8
		fallthrough
	case 1:
		h ^= int32(data[tail])
		h *= m
	}
	h ^= int32(uint32(h) >> 13)
	h *= m
	h ^= int32(uint32(h) >> 15)
	return h
}

// partitionForKey is BuiltInPartitioner.partitionForKey (apache/kafka
// clients/.../producer/internals/BuiltInPartitioner.java line 329):
// Utils.toPositive(murmur2(key)) % numPartitions, toPositive being
// number & 0x7fffffff (Utils.java line 1187).
func partitionForKey(key []byte, partitions int32) int32 {
	return (murmur2(key) & 0x7fffffff) % partitions
}

// Kafka's own murmur2 test vectors (clients/src/test/java/org/apache/kafka/
// common/utils/UtilsTest.java, testMurmur2), and issue 21's partitions for
// agg-1 on 6 partitions, computed from the exact key bytes of each setting.
func TestMurmur2(t *testing.T) {
	for in, want := range map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	} {
		if got := murmur2([]byte(in)); got != want {
			t.Errorf("murmur2(%q) = %d, want %d", in, got, want)
		}
	}

	for _, c := range []struct {
		setting string
		key     string
		want    int32
	}{
		{"raw and string", `agg-1`, 3},
		{"json without schemas", `"agg-1"`, 0},
		{"json with schemas", `{"schema":{"type":"string","optional":false},"payload":"agg-1"}`, 4},
	} {
		if got := partitionForKey([]byte(c.key), 6); got != c.want {
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
