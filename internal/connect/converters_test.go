package connect

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// kafkaGolden reads testdata/kafka/golden.txt: what Kafka Connect's own
// JsonConverter, StringConverter, SimpleHeaderConverter and
// ByteArrayConverter and Debezium's BinaryDataConverter returned for the
// cases of Golden.java (compiled from their sources by gen.sh), keyed
// "<converter>/<case>".
func kafkaGolden(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open("testdata/kafka/golden.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	golden := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, result, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("golden line %q has no tab", line)
		}
		golden[name] = result
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return golden
}

// goldenCase is one (schema, value) of Golden.java, built the same way.
type goldenCase struct {
	name   string
	schema *Schema
	value  any
}

func mustStruct(t *testing.T, s *Schema, kv ...any) *Struct {
	t.Helper()
	st, err := NewStruct(s)
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

func goldenCases(t *testing.T) []goldenCase {
	prim := func(ty Type) *Schema { return &Schema{Type: ty} }
	opt := func(ty Type) *Schema { return &Schema{Type: ty, Optional: true} }
	four := &Schema{Type: TypeStruct, Fields: []Field{
		{"field1", prim(TypeBoolean)}, {"field2", prim(TypeString)}, {"field3", prim(TypeString)}, {"field4", prim(TypeBoolean)}}}
	inner := &Schema{Type: TypeStruct, Name: "inner", Optional: true, Fields: []Field{{"x", opt(TypeFloat64)}, {"y", opt(TypeInt16)}}}
	rich := &Schema{Type: TypeStruct, Name: "test.Rich", Version: 3, HasVersion: true, Doc: `the "doc"`,
		Params: []Param{{"b", "2"}, {"a", "1"}},
		Fields: []Field{
			{"id", prim(TypeString)},
			{"count", &Schema{Type: TypeInt32, Optional: true, Default: int32(7)}},
			{"note", opt(TypeString)},
			{"inner", inner},
			{"tags", &Schema{Type: TypeArray, Items: opt(TypeString), Optional: true}},
			{"at", Timestamp(true)},
			{"flag", &Schema{Type: TypeBoolean, Default: false, Doc: "d"}},
			{"f", opt(TypeFloat32)},
		}}
	richValue := mustStruct(t, rich, "id", "agg-1", "inner", mustStruct(t, inner, "x", 0.001, "y", int16(5)),
		"tags", []any{"a", nil, `c"d`}, "at", time.UnixMilli(1700000000123), "f", float32(1e10))
	withBytes := &Schema{Type: TypeStruct, Fields: []Field{{"b", prim(TypeBytes)}}}
	withMap := &Schema{Type: TypeStruct, Fields: []Field{{"m", &Schema{Type: TypeMap, Keys: prim(TypeString), Values: opt(TypeInt64)}}}}
	withDefault := &Schema{Type: TypeString, Optional: true, Default: "default"}
	fieldDefault := &Schema{Type: TypeStruct, Fields: []Field{{"field1", withDefault}}}
	djson := &Schema{Type: TypeString, Optional: true, Name: "io.debezium.data.Json", Version: 1, HasVersion: true}
	return []goldenCase{
		{"bool", prim(TypeBoolean), true},
		{"int8", prim(TypeInt8), int8(12)},
		{"int16", prim(TypeInt16), int16(-12)},
		{"int32", prim(TypeInt32), int32(12)},
		{"int64", prim(TypeInt64), int64(4398046511104)},
		{"float32", prim(TypeFloat32), float32(12.34)},
		{"float64", prim(TypeFloat64), 12.34},
		{"float64Big", prim(TypeFloat64), 1e7},
		{"float64NaN", prim(TypeFloat64), math.NaN()},
		{"float32NegInf", prim(TypeFloat32), float32(math.Inf(-1))},
		{"bytes", prim(TypeBytes), []byte("test-string")},
		{"bytesEmpty", prim(TypeBytes), []byte{}},
		{"bytesNoSchema", nil, []byte{0, 0xff, 10}},
		{"string", prim(TypeString), "Zoë \"q\" \\ / <&> \n\t\u0001 ☕ 🚀"},
		{"stringEmpty", prim(TypeString), ""},
		{"arrayInt32", &Schema{Type: TypeArray, Items: prim(TypeInt32)}, []any{int32(1), int32(2), int32(3)}},
		{"mapStringKeys", &Schema{Type: TypeMap, Keys: prim(TypeString), Values: prim(TypeInt32)},
			Map{{"key1", int32(12)}, {"key2", int32(15)}}},
		{"mapIntKeys", &Schema{Type: TypeMap, Keys: prim(TypeInt32), Values: prim(TypeInt32)},
			Map{{int32(1), int32(12)}, {int32(2), int32(15)}}},
		{"struct", four, mustStruct(t, four, "field1", true, "field2", "string2", "field3", "string3", "field4", false)},
		{"structOtherSchema", four, mustStruct(t, &Schema{Type: TypeStruct, Fields: []Field{{"field1", prim(TypeBoolean)}}}, "field1", true)},
		{"structRich", rich, richValue},
		{"structRichNested", &Schema{Type: TypeArray, Items: rich}, []any{richValue}},
		{"structBytes", withBytes, mustStruct(t, withBytes, "b", []byte{1, 2})},
		{"structMap", withMap, mustStruct(t, withMap, "m", Map{{"z", int64(1)}, {"a", nil}})},
		{"optionalNull", opt(TypeString), nil},
		{"requiredNull", prim(TypeString), nil},
		{"nullNull", nil, nil},
		{"nullToDefault", withDefault, nil},
		{"fieldNullToDefault", fieldDefault, mustStruct(t, fieldDefault)},
		{"noSchemaBool", nil, true},
		{"noSchemaArray", nil, []any{int32(1), "string", true, nil}},
		{"noSchemaMap", nil, Map{{"key1", int32(12)}, {"key2", "string"}, {"key3", true}}},
		{"noSchemaMapMixedKeys", nil, Map{{"string", int32(12)}, {int32(52), "string"}, {false, true}}},
		{"noSchemaStruct", nil, mustStruct(t, four, "field1", true, "field2", "a", "field3", "b", "field4", false)},
		{"mismatch", prim(TypeFloat64), true},
		{"wrongInt", prim(TypeInt32), int64(12)},
		{"timestamp", Timestamp(false), time.UnixMilli(4000000000)},
		{"timestampDayOnly", Timestamp(false), time.UnixMilli(86400000 * 19000)},
		{"timestampTimeOnly", Timestamp(false), time.UnixMilli(3723004)},
		{"timestampAsLong", Timestamp(false), int64(4000000000)},
		{"debeziumKey", prim(TypeString), "agg-1"},
		{"debeziumJsonPayload", djson, `{"a": 1}`},
		{"debeziumJsonNull", djson, nil},
		{"debeziumUuid", &Schema{Type: TypeString, Name: "io.debezium.data.Uuid", Version: 1, HasVersion: true}, "3f8f8e3c-4b9e-4a57-9d3c-0c0f6f1f2b57"},
		{"debeziumMicroTimestamp", &Schema{Type: TypeInt64, Optional: true, Name: "io.debezium.time.MicroTimestamp", Version: 1, HasVersion: true}, int64(1700000000123456)},
	}
}

// headerFunc adapts SimpleHeaderConverter to Converter for the table.
type headerFunc struct{}

func (headerFunc) FromConnectData(s *Schema, v any) ([]byte, error) {
	return SimpleHeaderConverter{}.FromConnectHeader(s, v)
}

// Every converter returns, for every case, the bytes Kafka Connect's (and
// Debezium's) own classes returned, or fails where they threw, with their
// message; where Java printed a byte[]'s identity hash, the converter says
// it cannot reproduce that.
func TestConvertersMatchKafkaConnect(t *testing.T) {
	golden := kafkaGolden(t)
	converters := []struct {
		name string
		c    Converter
	}{
		{"json", JSONConverter{}},
		{"jsonNoSchemas", JSONConverter{DisableSchemas: true}},
		{"jsonKeepNulls", JSONConverter{KeepNulls: true}},
		{"string", StringConverter{}},
		{"header", headerFunc{}},
		{"bytearray", ByteArrayConverter{}},
		{"binary", BinaryDataConverter{}},
		{"binaryJson", BinaryDataConverter{Delegate: JSONConverter{}}},
	}
	seen := 0
	for _, gc := range goldenCases(t) {
		for _, conv := range converters {
			name := conv.name + "/" + gc.name
			want, ok := golden[name]
			if !ok {
				t.Errorf("%s: not in golden.txt (add it to Golden.java and run gen.sh)", name)
				continue
			}
			seen++
			got, err := conv.c.FromConnectData(gc.schema, gc.value)
			checkGolden(t, name, want, got, err)
		}
	}
	if seen != len(golden) {
		t.Errorf("golden.txt has %d results, the test checked %d", len(golden), seen)
	}
}

// checkGolden compares a converter's result with a golden.txt result.
func checkGolden(t *testing.T, name, want string, got []byte, err error) {
	t.Helper()
	switch {
	case strings.HasPrefix(want, "!") && strings.Contains(want, "[B@"):
		// The message quotes a byte[]'s toString; only the refusal counts.
		if !errors.Is(err, ErrData) {
			t.Errorf("%s: got %q, %v; Connect threw %s", name, got, err, want[1:])
		}
	case strings.HasPrefix(want, "=") && strings.Contains(want, "[B@"):
		if !errors.Is(err, ErrUnreproducible) {
			t.Errorf("%s: got %q, %v; Java printed an identity hash (%s), which should be ErrUnreproducible", name, got, err, want[1:])
		}
	case strings.HasPrefix(want, "!"):
		msg := strings.ReplaceAll(want[1:], `\n`, "\n")
		_, javaMsg, _ := strings.Cut(msg, ": ")
		if err == nil {
			t.Errorf("%s: got %q; Connect threw %s", name, got, msg)
		} else if !errors.Is(err, ErrData) || !strings.HasSuffix(err.Error(), ErrData.Error()+": "+javaMsg) {
			t.Errorf("%s: error %q; Connect threw %s", name, err, msg)
		}
	case err != nil:
		t.Errorf("%s: error %v; Connect wrote %s", name, err, want)
	case want == "null":
		if got != nil {
			t.Errorf("%s: got %q; Connect returned null", name, got)
		}
	case strings.HasPrefix(want, "="):
		if got == nil || string(got) != want[1:] {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want[1:])
		}
	case strings.HasPrefix(want, "x"):
		w, _ := hex.DecodeString(want[1:])
		if got == nil || !bytes.Equal(got, w) {
			t.Errorf("%s: got %x, want %x", name, got, w)
		}
	default:
		t.Fatalf("%s: unreadable golden result %q", name, want)
	}
}
