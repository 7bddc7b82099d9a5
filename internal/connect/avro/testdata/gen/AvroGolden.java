// AvroGolden writes the golden files of internal/connect/avro with Apache
// Avro's own Java code (Debian's libavro-java 1.8.2): Schema.create*,
// addProp, Schema.Field and Schema.toString() for the schema text, and
// GenericDatumWriter over EncoderFactory.directBinaryEncoder for the body.
//
// Confluent's AvroData cannot run here (it needs Avro >= 1.9, Kafka's
// connect-api and Confluent's modules, none packaged; see
// docs/design/avro.md section 4), so this file is walrelay's own port of
// AvroData.fromConnectSchema and fromConnectData, restricted to the Connect
// schemas the outbox router builds. Each rule cites AvroData.java
// (confluentinc/schema-registry avro-data/src/main/java/io/confluent/
// connect/avro/AvroData.java at 794611bd86d, "AD") by line. What makes the
// bytes (JSON layout, property order, name references, namespace rules,
// union branches, binary encoding) is Avro's, not this port's.
//
// Usage: java -cp <avro and jackson 1 jars>:. AvroGolden cases.json outdir
// (make avro-goldens). cases.json lists Connect schemas and values in the
// JSON form described in ../README.md.
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.net.URLEncoder;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

import org.apache.avro.JsonProperties;
import org.apache.avro.Schema;
import org.apache.avro.SchemaParseException;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.EncoderFactory;
import org.codehaus.jackson.JsonGenerator;
import org.codehaus.jackson.JsonNode;
import org.codehaus.jackson.JsonToken;
import org.codehaus.jackson.map.ObjectMapper;
import org.codehaus.jackson.map.SerializerProvider;
import org.codehaus.jackson.node.JsonNodeFactory;
import org.codehaus.jackson.node.ObjectNode;
import org.codehaus.jackson.node.ValueNode;

public class AvroGolden {
  static final String NAMESPACE = "io.confluent.connect.avro"; // AD 86
  static final String DEFAULT_SCHEMA_NAME = "ConnectDefault"; // AD 90

  // A FLOAT32 default as AvroData's Jackson 2 FloatNode writes it
  // (Float.toString); Jackson 1.9, which Avro 1.8.2 uses, has no FloatNode
  // and would widen it to a double.
  static final class FloatNode extends ValueNode {
    final float v;

    FloatNode(float v) {
      this.v = v;
    }

    @Override
    public JsonToken asToken() {
      return JsonToken.VALUE_NUMBER_FLOAT;
    }

    @Override
    public String asText() {
      return Float.toString(v);
    }

    @Override
    public void serialize(JsonGenerator g, SerializerProvider p) throws java.io.IOException {
      g.writeNumber(v);
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof FloatNode && ((FloatNode) o).v == v;
    }

    @Override
    public int hashCode() {
      return Float.hashCode(v);
    }
  }

  // One conversion's FromConnectContext (AD 2817-2835).
  final boolean connectMetaData;
  final boolean scrub;
  final List<JsonNode> memoKeys = new ArrayList<>(); // schemaMap (AD 823-828, 1118-1120)
  final List<Schema> memoValues = new ArrayList<>();
  int nameIndex; // incrementAndGetNameIndex

  AvroGolden(boolean connectMetaData, boolean scrub) {
    this.connectMetaData = connectMetaData;
    this.scrub = scrub;
  }

  static String type(JsonNode s) {
    return s.get("type").getTextValue();
  }

  static boolean optional(JsonNode s) {
    return s.has("optional") && s.get("optional").getBooleanValue();
  }

  static String name(JsonNode s) {
    return s.has("name") ? s.get("name").getTextValue() : null;
  }

  static JsonNode dflt(JsonNode s) {
    JsonNode d = s.get("default");
    return d == null || d.isNull() ? null : d;
  }

  // AvroData.nonOptional (AD 2543-2550): the same schema, required.
  static JsonNode nonOptional(JsonNode s) {
    ObjectNode c = JsonNodeFactory.instance.objectNode();
    c.putAll((ObjectNode) s);
    c.remove("optional");
    return c;
  }

  // fromConnectSchema (AD 816-1121).
  Schema fromConnectSchema(JsonNode s, boolean ignoreOptional) {
    if (!optional(s)) { // AD 823-828
      int i = memoKeys.indexOf(s);
      if (i >= 0) {
        return memoValues.get(i);
      }
    }
    String connectType = null;
    Schema base;
    switch (type(s)) {
      case "int8":
        connectType = "int8"; // AD 835-838
        base = Schema.create(Schema.Type.INT);
        break;
      case "int16":
        connectType = "int16"; // AD 839-842
        base = Schema.create(Schema.Type.INT);
        break;
      case "int32":
        base = Schema.create(Schema.Type.INT);
        break;
      case "int64":
        base = Schema.create(Schema.Type.LONG);
        break;
      case "float":
        base = Schema.create(Schema.Type.FLOAT);
        break;
      case "double":
        base = Schema.create(Schema.Type.DOUBLE);
        break;
      case "boolean":
        base = Schema.create(Schema.Type.BOOLEAN);
        break;
      case "string":
        base = Schema.create(Schema.Type.STRING);
        break;
      case "bytes":
        base = Schema.create(Schema.Type.BYTES);
        break;
      case "array":
        base = Schema.createArray(fromConnectSchema(s.get("items"), false));
        break;
      case "struct":
        if (optional(s)) { // AD 972-977: ["null", <the required struct's record>]
          List<Schema> u = new ArrayList<>();
          u.add(Schema.create(Schema.Type.NULL));
          u.add(fromConnectSchema(nonOptional(s), false));
          Schema union = Schema.createUnion(u);
          return union; // no properties on a union, and not memoized (optional)
        }
        // AD 978-1000, getNameOrDefault AD 1124-1132.
        String namespace;
        String recordName;
        if (name(s) == null) {
          nameIndex++;
          namespace = NAMESPACE;
          recordName = DEFAULT_SCHEMA_NAME + (nameIndex > 1 ? nameIndex : "");
        } else {
          String[] split = splitName(name(s));
          namespace = split[0];
          recordName = split[1];
        }
        base = Schema.createRecord(recordName, null, namespace, false);
        List<Schema.Field> fields = new ArrayList<>();
        for (JsonNode f : s.get("fields")) {
          String fieldName = scrub ? doScrubName(f.get("name").getTextValue()) : f.get("name").getTextValue();
          addAvroRecordField(fields, fieldName, f.get("schema"));
        }
        base.setFields(fields);
        break;
      default:
        throw new IllegalArgumentException("unsupported connect type " + type(s));
    }
    if (connectMetaData) { // AD 1008-1037, in this order
      if (s.has("doc")) {
        base.addProp("connect.doc", s.get("doc").getTextValue());
      }
      if (s.has("version")) {
        base.addProp("connect.version", JsonNodeFactory.instance.numberNode(s.get("version").getIntValue()));
      }
      if (s.has("parameters") && s.get("parameters").size() > 0) {
        base.addProp("connect.parameters", s.get("parameters")); // parametersFromConnect, AD 1461-1469
      }
      if (dflt(s) != null) {
        base.addProp("connect.default", defaultValueFromConnect(s, dflt(s)));
      }
      if (name(s) != null) {
        base.addProp("connect.name", name(s));
      }
      if (connectType != null) {
        base.addProp("connect.type", connectType);
      }
    }
    Schema fin = base;
    if (!ignoreOptional && optional(s)) { // maybeMakeOptional, AD 1134-1148
      List<Schema> u = new ArrayList<>();
      if (dflt(s) != null) {
        u.add(base);
        u.add(Schema.create(Schema.Type.NULL));
      } else {
        u.add(Schema.create(Schema.Type.NULL));
        u.add(base);
      }
      fin = Schema.createUnion(u);
    }
    if (!optional(s)) { // AD 1118-1120
      memoKeys.add(s);
      memoValues.add(fin);
    }
    return fin;
  }

  // addAvroRecordField (AD 1234-1276): the field's default is the schema's
  // default, turned into a Java object by JacksonUtils.toObject (a float
  // becomes a Double there), or null for an optional schema.
  void addAvroRecordField(List<Schema.Field> fields, String fieldName, JsonNode fs) {
    Object defaultVal = null;
    if (dflt(fs) != null) {
      defaultVal = toObject(defaultValueFromConnect(fs, dflt(fs)));
    } else if (optional(fs)) {
      defaultVal = JsonProperties.NULL_VALUE;
    }
    Schema schema = fromConnectSchema(fs, false);
    fields.add(new Schema.Field(fieldName, schema, null, defaultVal));
  }

  // Avro's JacksonUtils.toObject (apache/avro HEAD
  // lang/java/avro/src/main/java/org/apache/avro/util/internal/JacksonUtils.java),
  // for the nodes defaultValueFromConnect makes.
  static Object toObject(JsonNode n) {
    if (n instanceof FloatNode) {
      return (double) ((FloatNode) n).v; // isFloat -> asDouble()
    }
    if (n.isNull()) {
      return JsonProperties.NULL_VALUE;
    }
    if (n.isBoolean()) {
      return n.getBooleanValue();
    }
    if (n.isInt()) {
      return n.getIntValue();
    }
    if (n.isLong()) {
      return n.getLongValue();
    }
    if (n.isDouble()) {
      return n.getDoubleValue();
    }
    if (n.isTextual()) {
      return n.getTextValue();
    }
    if (n.isArray()) {
      List<Object> l = new ArrayList<>();
      for (JsonNode e : n) {
        l.add(toObject(e));
      }
      return l;
    }
    Map<String, Object> m = new java.util.LinkedHashMap<>();
    for (Iterator<Map.Entry<String, JsonNode>> it = n.getFields(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> e = it.next();
      m.put(e.getKey(), toObject(e.getValue()));
    }
    return m;
  }

  // defaultValueFromConnect (AD 1372-1455) as Jackson nodes.
  static JsonNode defaultValueFromConnect(JsonNode s, JsonNode v) {
    JsonNodeFactory f = JsonNodeFactory.instance;
    if (v == null || v.isNull()) {
      return f.nullNode();
    }
    switch (type(s)) {
      case "int8":
      case "int16":
      case "int32":
        return f.numberNode(v.getIntValue());
      case "int64":
        return f.numberNode(v.getLongValue());
      case "float":
        return new FloatNode((float) v.getDoubleValue());
      case "double":
        return f.numberNode(v.getDoubleValue());
      case "boolean":
        return f.booleanNode(v.getBooleanValue());
      case "string":
        return f.textNode(v.getTextValue());
      case "bytes":
        return f.textNode(new String(hex(v.getTextValue()), StandardCharsets.ISO_8859_1));
      case "array":
        org.codehaus.jackson.node.ArrayNode a = f.arrayNode();
        for (JsonNode e : v) {
          a.add(defaultValueFromConnect(s.get("items"), e));
        }
        return a;
      case "struct":
        ObjectNode o = f.objectNode();
        for (JsonNode fl : s.get("fields")) {
          String n = fl.get("name").getTextValue();
          JsonNode fv = v.get(n);
          if (fv == null || fv.isNull()) {
            fv = dflt(fl.get("schema")); // Struct.get
          }
          o.put(n, defaultValueFromConnect(fl.get("schema"), fv));
        }
        return o;
      default:
        throw new IllegalArgumentException("default of " + type(s));
    }
  }

  // splitName (AD 2517-2536).
  String[] splitName(String fullName) {
    String[] result = new String[2];
    String[] parts = fullName.split("\\.");
    for (int i = 0; i < parts.length; i++) {
      parts[i] = scrub ? doScrubName(parts[i]) : parts[i];
    }
    if (parts.length <= 1) {
      result[0] = null;
      result[1] = parts[0];
    } else {
      result[0] = String.join(".", java.util.Arrays.copyOfRange(parts, 0, parts.length - 1));
      result[1] = parts[parts.length - 1];
    }
    return result;
  }

  // doScrubName (AD 1173-1217).
  static String doScrubName(String name) {
    try {
      if (name == null || name.isEmpty()) {
        return name;
      }
      boolean ok = true;
      for (int i = 0; i < name.length(); i++) {
        char ch = name.charAt(i);
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_')) {
          ok = false;
        }
      }
      ok = ok && (name.charAt(0) < '0' || name.charAt(0) > '9');
      if (ok) {
        return name;
      }
      String encoded = URLEncoder.encode(name, "UTF-8");
      if (encoded.charAt(0) >= '0' && encoded.charAt(0) <= '9') {
        encoded = "x" + encoded;
      }
      StringBuilder sb = new StringBuilder(encoded);
      for (int i = 0; i < sb.length(); i++) {
        char ch = sb.charAt(i);
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_')) {
          sb.setCharAt(i, '_');
        }
      }
      return sb.toString();
    } catch (java.io.UnsupportedEncodingException e) {
      return name;
    }
  }

  // fromConnectData (AD 397-660): the Avro datum of a Connect value; a
  // struct field that is unset reads as its schema's default (Connect's
  // Struct.get, AD 641-644).
  static Object fromConnectData(JsonNode s, Schema avro, JsonNode v) {
    if (v == null || v.isNull()) {
      return null;
    }
    if (avro.getType() == Schema.Type.UNION) { // the non-null branch
      for (Schema b : avro.getTypes()) {
        if (b.getType() != Schema.Type.NULL) {
          avro = b;
        }
      }
    }
    switch (type(s)) {
      case "int8":
      case "int16":
      case "int32":
        return v.getIntValue();
      case "int64":
        return v.getLongValue();
      case "float":
        return (float) v.getDoubleValue();
      case "double":
        return v.getDoubleValue();
      case "boolean":
        return v.getBooleanValue();
      case "string":
        return v.getTextValue();
      case "bytes":
        return ByteBuffer.wrap(hex(v.getTextValue()));
      case "array":
        List<Object> l = new ArrayList<>();
        for (JsonNode e : v) {
          l.add(fromConnectData(s.get("items"), avro.getElementType(), e));
        }
        return l;
      case "struct":
        GenericData.Record r = new GenericData.Record(avro);
        int i = 0;
        for (JsonNode fl : s.get("fields")) {
          JsonNode fv = v.get(fl.get("name").getTextValue());
          if (fv == null || fv.isNull()) {
            fv = dflt(fl.get("schema"));
          }
          r.put(i, fromConnectData(fl.get("schema"), avro.getFields().get(i).schema(), fv));
          i++;
        }
        return r;
      default:
        throw new IllegalArgumentException("value of " + type(s));
    }
  }

  static byte[] hex(String s) {
    byte[] b = new byte[s.length() / 2];
    for (int i = 0; i < b.length; i++) {
      b[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
    }
    return b;
  }

  static String toHex(byte[] b) {
    StringBuilder sb = new StringBuilder();
    for (byte x : b) {
      sb.append(String.format("%02x", x));
    }
    return sb.toString();
  }

  public static void main(String[] args) throws Exception {
    ObjectMapper mapper = new ObjectMapper();
    JsonNode cases = mapper.readTree(new File(args[0]));
    File out = new File(args[1]);
    for (JsonNode c : cases) {
      String caseName = c.get("name").getTextValue();
      JsonNode opts = c.get("options");
      boolean meta = opts == null || !opts.has("connect.meta.data") || opts.get("connect.meta.data").getBooleanValue();
      boolean scrub = opts != null && opts.has("scrub.invalid.names") && opts.get("scrub.invalid.names").getBooleanValue();
      StringBuilder g = new StringBuilder();
      g.append("# ").append(caseName).append(": written by internal/connect/avro/testdata/gen/AvroGolden.java (make avro-goldens)\n");
      g.append("# with Apache Avro ").append(Schema.class.getPackage().getImplementationVersion())
          .append(": Schema.toString() and GenericDatumWriter over a direct BinaryEncoder\n");
      JsonNode cs = c.get("schema");
      try {
        Schema avro = new AvroGolden(meta, scrub).fromConnectSchema(cs, false);
        g.append("schema: ").append(avro.toString()).append('\n');
        JsonNode v = c.get("value");
        if ((v == null || v.isNull()) && dflt(cs) != null) {
          v = dflt(cs); // EventRouterDelegate reads the payload with Struct.get
        }
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        if (avro.getType() == Schema.Type.BYTES) {
          // AbstractKafkaAvroSerializer 214-217: a top-level bytes value
          // is written as is, without Avro's length prefix.
          body.write(hex(v.getTextValue()));
        } else {
          BinaryEncoder enc = EncoderFactory.get().directBinaryEncoder(body, null);
          new GenericDatumWriter<Object>(avro).write(fromConnectData(cs, avro, v), enc);
          enc.flush();
        }
        g.append("body: ").append(toHex(body.toByteArray())).append('\n');
      } catch (SchemaParseException e) {
        g.append("error: ").append(e.getMessage()).append('\n');
      }
      Files.write(new File(out, caseName + ".golden").toPath(), g.toString().getBytes(StandardCharsets.UTF_8));
    }
  }
}
