// Writes what Kafka Connect's own converters return for the cases
// converters_test.go checks (same names), one line each:
//   <name>\t=<bytes as UTF-8 text>   printable results
//   <name>\tx<hex>                   other bytes
//   <name>\tnull                     a Kafka null (Java null byte[])
//   <name>\t!<exception class>: <message>
// Compiled against Kafka's and Debezium's own sources by gen.sh.
import org.apache.kafka.connect.data.*;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.storage.*;
import org.apache.kafka.connect.converters.ByteArrayConverter;
import io.debezium.converters.BinaryDataConverter;
import java.nio.charset.StandardCharsets;
import java.util.*;

public class Golden {
    interface Conv { byte[] apply(Schema s, Object v) throws Exception; }

    static final Map<String, Conv> CONVERTERS = new LinkedHashMap<>();
    static void run(String name, Schema s, Object v) {
        for (Map.Entry<String, Conv> c : CONVERTERS.entrySet()) {
            String out;
            try {
                out = render(c.getValue().apply(s, v));
            } catch (Exception e) {
                out = "!" + e.getClass().getSimpleName() + ": " + e.getMessage();
            }
            System.out.println(c.getKey() + "/" + name + "\t" + out.replace("\n", "\\n"));
        }
    }

    static String render(byte[] b) {
        if (b == null) return "null";
        String s = new String(b, StandardCharsets.UTF_8);
        boolean text = Arrays.equals(s.getBytes(StandardCharsets.UTF_8), b);
        for (char ch : s.toCharArray()) if (ch < 0x20 || ch == 0x7f) text = false;
        if (text) return "=" + s;
        return "x" + HexFormat.of().formatHex(b);
    }

    static JsonConverter json(boolean schemas, boolean replaceNull) {
        JsonConverter c = new JsonConverter(false);
        c.configure(Map.of("schemas.enable", schemas, "replace.null.with.default", replaceNull), false);
        return c;
    }

    public static void main(String[] args) throws Exception {
        TimeZone.setDefault(TimeZone.getTimeZone("UTC"));
        JsonConverter js = json(true, true), jn = json(false, true), jk = json(true, false);
        StringConverter sc = new StringConverter();
        sc.configure(Map.of(), false);
        SimpleHeaderConverter hc = new SimpleHeaderConverter();
        ByteArrayConverter bc = new ByteArrayConverter();
        BinaryDataConverter bd = new BinaryDataConverter();
        bd.configure(Map.of(), false);
        BinaryDataConverter bdj = new BinaryDataConverter();
        bdj.configure(Map.of("delegate.converter.type", "org.apache.kafka.connect.json.JsonConverter"), false);
        CONVERTERS.put("json", (s, v) -> js.fromConnectData("t", s, v));
        CONVERTERS.put("jsonNoSchemas", (s, v) -> jn.fromConnectData("t", s, v));
        CONVERTERS.put("jsonKeepNulls", (s, v) -> jk.fromConnectData("t", s, v));
        CONVERTERS.put("string", (s, v) -> sc.fromConnectData("t", s, v));
        CONVERTERS.put("header", (s, v) -> hc.fromConnectHeader("t", "h", s, v));
        CONVERTERS.put("bytearray", (s, v) -> bc.fromConnectData("t", s, v));
        CONVERTERS.put("binary", (s, v) -> bd.fromConnectData("record", s, v));
        CONVERTERS.put("binaryJson", (s, v) -> bdj.fromConnectData("t", s, v));

        run("bool", Schema.BOOLEAN_SCHEMA, true);
        run("int8", Schema.INT8_SCHEMA, (byte) 12);
        run("int16", Schema.INT16_SCHEMA, (short) -12);
        run("int32", Schema.INT32_SCHEMA, 12);
        run("int64", Schema.INT64_SCHEMA, 4398046511104L);
        run("float32", Schema.FLOAT32_SCHEMA, 12.34f);
        run("float64", Schema.FLOAT64_SCHEMA, 12.34);
        run("float64Big", Schema.FLOAT64_SCHEMA, 1e7);
        run("float64NaN", Schema.FLOAT64_SCHEMA, Double.NaN);
        run("float32NegInf", Schema.FLOAT32_SCHEMA, Float.NEGATIVE_INFINITY);
        run("bytes", Schema.BYTES_SCHEMA, "test-string".getBytes(StandardCharsets.UTF_8));
        run("bytesEmpty", Schema.BYTES_SCHEMA, new byte[0]);
        run("bytesNoSchema", null, new byte[] {0, -1, 10});
        run("string", Schema.STRING_SCHEMA, "Zoë \"q\" \\ / <&> \n\t\u0001 ☕ \uD83D\uDE80");
        run("stringEmpty", Schema.STRING_SCHEMA, "");
        run("arrayInt32", SchemaBuilder.array(Schema.INT32_SCHEMA).build(), Arrays.asList(1, 2, 3));
        Map<String, Integer> m1 = new LinkedHashMap<>();
        m1.put("key1", 12);
        m1.put("key2", 15);
        run("mapStringKeys", SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT32_SCHEMA).build(), m1);
        Map<Integer, Integer> m2 = new LinkedHashMap<>();
        m2.put(1, 12);
        m2.put(2, 15);
        run("mapIntKeys", SchemaBuilder.map(Schema.INT32_SCHEMA, Schema.INT32_SCHEMA).build(), m2);
        Schema four = SchemaBuilder.struct().field("field1", Schema.BOOLEAN_SCHEMA).field("field2", Schema.STRING_SCHEMA)
            .field("field3", Schema.STRING_SCHEMA).field("field4", Schema.BOOLEAN_SCHEMA).build();
        run("struct", four, new Struct(four).put("field1", true).put("field2", "string2").put("field3", "string3").put("field4", false));
        run("structOtherSchema", four, new Struct(SchemaBuilder.struct().field("field1", Schema.BOOLEAN_SCHEMA).build()).put("field1", true));

        Schema inner = SchemaBuilder.struct().name("inner").optional().field("x", Schema.OPTIONAL_FLOAT64_SCHEMA).field("y", Schema.OPTIONAL_INT16_SCHEMA).build();
        Schema rich = SchemaBuilder.struct().name("test.Rich").version(3).doc("the \"doc\"")
            .parameter("b", "2").parameter("a", "1")
            .field("id", Schema.STRING_SCHEMA)
            .field("count", SchemaBuilder.int32().optional().defaultValue(7).build())
            .field("note", Schema.OPTIONAL_STRING_SCHEMA)
            .field("inner", inner)
            .field("tags", SchemaBuilder.array(Schema.OPTIONAL_STRING_SCHEMA).optional().build())
            .field("at", Timestamp.builder().optional().build())
            .field("flag", SchemaBuilder.bool().defaultValue(false).doc("d").build())
            .field("f", Schema.OPTIONAL_FLOAT32_SCHEMA)
            .build();
        Struct richValue = new Struct(rich).put("id", "agg-1").put("inner", new Struct(inner).put("x", 0.001).put("y", (short) 5))
            .put("tags", Arrays.asList("a", null, "c\"d")).put("at", new java.util.Date(1700000000123L)).put("f", 1.0E10f);
        run("structRich", rich, richValue);
        run("structRichNested", SchemaBuilder.array(rich).build(), Arrays.asList(richValue));
        Schema withBytes = SchemaBuilder.struct().field("b", Schema.BYTES_SCHEMA).build();
        run("structBytes", withBytes, new Struct(withBytes).put("b", new byte[] {1, 2}));
        Schema withMap = SchemaBuilder.struct().field("m", SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.OPTIONAL_INT64_SCHEMA).build()).build();
        Map<String, Long> m3 = new LinkedHashMap<>();
        m3.put("z", 1L);
        m3.put("a", null);
        run("structMap", withMap, new Struct(withMap).put("m", m3));

        run("optionalNull", Schema.OPTIONAL_STRING_SCHEMA, null);
        run("requiredNull", Schema.STRING_SCHEMA, null);
        run("nullNull", null, null);
        Schema withDefault = SchemaBuilder.string().optional().defaultValue("default").build();
        run("nullToDefault", withDefault, null);
        Schema fieldDefault = SchemaBuilder.struct().field("field1", withDefault).build();
        run("fieldNullToDefault", fieldDefault, new Struct(fieldDefault));
        run("noSchemaBool", null, true);
        run("noSchemaArray", null, new ArrayList<>(Arrays.asList(1, "string", true, null)));
        Map<String, Object> m4 = new LinkedHashMap<>();
        m4.put("key1", 12);
        m4.put("key2", "string");
        m4.put("key3", true);
        run("noSchemaMap", null, m4);
        Map<Object, Object> m5 = new LinkedHashMap<>();
        m5.put("string", 12);
        m5.put(52, "string");
        m5.put(false, true);
        run("noSchemaMapMixedKeys", null, m5);
        run("noSchemaStruct", null, new Struct(four).put("field1", true).put("field2", "a").put("field3", "b").put("field4", false));
        run("mismatch", Schema.FLOAT64_SCHEMA, true);
        run("wrongInt", Schema.INT32_SCHEMA, 12L);
        run("timestamp", Timestamp.SCHEMA, new java.util.Date(4000000000L));
        run("timestampDayOnly", Timestamp.SCHEMA, new java.util.Date(86400000L * 19000));
        run("timestampTimeOnly", Timestamp.SCHEMA, new java.util.Date(3723004L));
        run("timestampAsLong", Timestamp.SCHEMA, 4000000000L);
        run("debeziumKey", Schema.STRING_SCHEMA, "agg-1");
        Schema djson = SchemaBuilder.string().optional().name("io.debezium.data.Json").version(1).build();
        run("debeziumJsonPayload", djson, "{\"a\": 1}");
        run("debeziumJsonNull", djson, null);
        Schema uuid = SchemaBuilder.string().name("io.debezium.data.Uuid").version(1).build();
        run("debeziumUuid", uuid, "3f8f8e3c-4b9e-4a57-9d3c-0c0f6f1f2b57");
        Schema micro = SchemaBuilder.int64().optional().name("io.debezium.time.MicroTimestamp").version(1).build();
        run("debeziumMicroTimestamp", micro, 1700000000123456L);
    }
}
