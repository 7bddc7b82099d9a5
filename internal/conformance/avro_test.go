package conformance

// A small model of Confluent's AvroConverter for the Connect schemas and
// values the EventRouter hands it, written from the sources
// docs/design/avro.md cites (confluentinc/schema-registry at
// 794611bd86d1ce0422581269e2b13a2ab010c7fb, apache/avro release-1.8.2),
// independently of walrelay's internal/connect/avro:
//
//   - AvroData.fromConnectSchema (avro-data/src/main/java/io/confluent/
//     connect/avro/AvroData.java): Connect type → Avro type, optional →
//     union, the connect.* properties in their insertion order, record
//     names split at the last dot, ConnectDefault for unnamed structs,
//     addAvroRecordField's defaults, and the per-conversion cache that
//     makes a repeated equal struct a name reference;
//   - Apache Avro's Schema.toString() (lang/java/avro/src/main/java/org/
//     apache/avro/Schema.java: toJson of primitives, records, fields,
//     arrays and unions, Name.writeName, NamedSchema.writeNameRef): the
//     text the serializer registers (AvroSchema.canonicalString);
//   - AvroData.fromConnectData + GenericDatumWriter over a direct
//     BinaryEncoder (zigzag varints, length-prefixed strings and bytes,
//     union branch index, array blocks), with the serializer's raw
//     top-level bytes (AbstractKafkaAvroSerializer.serializeImpl) and
//     Connect's Struct.get, which gives a null field its schema default;
//   - Confluent's wire format: magic byte 0, the big-endian schema id, the
//     body (schema-serializer .../schema/id/SchemaId.java, idToBytes).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// avroNode is an Avro schema as Apache Avro's Schema object holds it:
// only the kinds AvroData makes of the router's Connect schemas.
type avroNode struct {
	// kind is the Avro type: null boolean int long float double bytes
	// string record array union.
	kind     string
	name     string // record: simple name
	space    string // record: namespace ("" is Avro's null namespace)
	fields   []avroField
	items    *avroNode
	branches []*avroNode
	props    []avroProp // in insertion order (JsonProperties)
}

// avroField is a record field (Schema.Field).
type avroField struct {
	name string
	node *avroNode
	def  []byte // the "default" JSON; nil: none
}

// avroProp is one schema property and its JSON value.
type avroProp struct {
	key  string
	json []byte
}

func (n *avroNode) fullName() string {
	if n.space == "" {
		return n.name
	}
	return n.space + "." + n.name
}

// addProp is JsonProperties.addProp: the first value of a key wins.
func (n *avroNode) addProp(key string, json []byte) {
	for _, p := range n.props {
		if p.key == key {
			return
		}
	}
	n.props = append(n.props, avroProp{key, json})
}

// avroModel is AvroConverter's AvroData for one conversion, with the
// converter's connect.meta.data and scrub.invalid.names options.
type avroModel struct {
	meta, scrub bool
	err         error // the first name Avro refuses

	nameIndex int                  // FromConnectContext.incrementAndGetNameIndex
	schemaMap map[string]*avroNode // FromConnectContext.schemaMap: required Connect schema → Avro
	cycles    map[string]*avroNode // FromConnectContext.cycleReferences: struct name → record
}

// avroSchemaOf is AvroData.fromConnectSchema(s): the Avro schema the
// converter registers for a Connect schema, with connect.meta.data meta
// and scrub.invalid.names false (the router's schemas hold valid names).
func avroSchemaOf(s *Schema, meta bool) *avroNode {
	n, err := avroSchemaOpts(s, meta, false)
	if err != nil {
		panic(err)
	}
	return n
}

// avroSchemaOpts is avroSchemaOf with scrub.invalid.names; the error is
// the SchemaParseException Avro's Name or Field constructor throws for a
// name it refuses.
func avroSchemaOpts(s *Schema, meta, scrub bool) (*avroNode, error) {
	m := &avroModel{meta: meta, scrub: scrub, schemaMap: map[string]*avroNode{}, cycles: map[string]*avroNode{}}
	n := m.fromConnect(s, false)
	return n, m.err
}

// connectKey identifies a Connect schema by value, as ConnectSchema.equals
// compares them: type, optional, name, version, default, fields, items.
func connectKey(s *Schema) string {
	if s == nil {
		return "-"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "{%s %v %q %d %T:%#v [", s.Type, s.Optional, s.Name, s.Version, s.Default, s.Default)
	for _, f := range s.Fields {
		fmt.Fprintf(&b, "%q:%s ", f.Name, connectKey(f.Schema))
	}
	fmt.Fprintf(&b, "] %s}", connectKey(s.Items))
	return b.String()
}

// fromConnect is AvroData.fromConnectSchema(schema, ctx, ignoreOptional)
// (AD 816-1120) for the types the router produces.
func (m *avroModel) fromConnect(s *Schema, ignoreOptional bool) *avroNode {
	if !s.Optional {
		if cached := m.schemaMap[connectKey(s)]; cached != nil {
			return cached
		}
	}
	var base *avroNode
	connectType := ""
	switch s.Type {
	case "int8", "int16":
		connectType = s.Type // CONNECT_TYPE_INT8 / CONNECT_TYPE_INT16
		base = &avroNode{kind: "int"}
	case "int32":
		base = &avroNode{kind: "int"}
	case "int64":
		base = &avroNode{kind: "long"}
	case "float":
		base = &avroNode{kind: "float"}
	case "double":
		base = &avroNode{kind: "double"}
	case "boolean", "string", "bytes":
		base = &avroNode{kind: s.Type}
	case "array":
		base = &avroNode{kind: "array", items: m.fromConnectWithCycle(s.Items, false)}
	case "struct":
		if s.Optional {
			// An optional struct: ["null", <the required struct>]; the
			// record carries the metadata, the union none.
			req := *s
			req.Optional = false
			base = &avroNode{kind: "union", branches: []*avroNode{{kind: "null"}, m.fromConnectWithCycle(&req, false)}}
			break
		}
		space, name := m.nameOrDefault(s.Name)
		m.validateName(name)
		base = &avroNode{kind: "record", name: name, space: space}
		if s.Name != "" {
			m.cycles[s.Name] = base
		}
		for _, f := range s.Fields {
			name := f.Name
			if m.scrub {
				name = scrubName(name)
			}
			m.validateName(name) // Schema.Field's constructor
			base.fields = append(base.fields, m.recordField(name, f.Schema))
		}
	default:
		panic(fmt.Sprintf("avro model: Connect type %q", s.Type))
	}

	final := base
	if base.kind != "union" {
		if m.meta {
			// AD 1008-1037, in this order.
			if s.Version != 0 {
				base.addProp("connect.version", strconv.AppendInt(nil, int64(s.Version), 10))
			}
			if s.Default != nil {
				base.addProp("connect.default", avroDefaultJSON(nil, s, s.Default))
			}
			if s.Name != "" {
				base.addProp("connect.name", avroString(nil, s.Name))
			}
			if connectType != "" {
				base.addProp("connect.type", avroString(nil, connectType))
			}
		}
		if !ignoreOptional {
			final = maybeMakeOptional(s, base)
		}
	}
	if !s.Optional {
		m.schemaMap[connectKey(s)] = final
	}
	return final
}

// fromConnectWithCycle is AvroData.fromConnectSchemaWithCycle: a struct
// whose name is being converted already stands for that record.
func (m *avroModel) fromConnectWithCycle(s *Schema, ignoreOptional bool) *avroNode {
	if rec, ok := m.cycles[s.Name]; ok && s.Name != "" {
		if ignoreOptional {
			return rec
		}
		return maybeMakeOptional(s, rec)
	}
	return m.fromConnect(s, ignoreOptional)
}

// nameOrDefault is AvroData.getNameOrDefault: a name split at its last dot
// (splitName), or io.confluent.connect.avro.ConnectDefault, ConnectDefault2…
// for unnamed structs.
func (m *avroModel) nameOrDefault(name string) (space, simple string) {
	if name == "" {
		m.nameIndex++
		simple = "ConnectDefault"
		if m.nameIndex > 1 {
			simple += strconv.Itoa(m.nameIndex)
		}
		return "io.confluent.connect.avro", simple
	}
	parts := strings.Split(name, ".")
	if m.scrub {
		for i, p := range parts {
			parts[i] = scrubName(p)
		}
	}
	return strings.Join(parts[:len(parts)-1], "."), parts[len(parts)-1]
}

// validateName is Avro 1.8.2's Schema.validateName, which the Name (a
// record's simple name, not its namespace) and Field constructors call:
// a letter or _, then letters, digits or _, as Java's Character.isLetter
// and isLetterOrDigit read them (Unicode).
func (m *avroModel) validateName(name string) {
	if m.err != nil {
		return
	}
	switch {
	case name == "":
		m.err = errors.New("Empty name")
	case !isJavaLetter(rune16(name)) && name[0] != '_':
		m.err = errors.New("Illegal initial character: " + name)
	default:
		for _, r := range name {
			if !(isJavaLetter(r) || unicode.IsDigit(r) || r == '_') {
				m.err = errors.New("Illegal character in: " + name)
				return
			}
		}
	}
}

func rune16(s string) rune { r, _ := utf8.DecodeRuneInString(s); return r }

func isJavaLetter(r rune) bool { return unicode.IsLetter(r) }

// scrubName is AvroData.doScrubName (AD 1173-1217): a name that is not
// [A-Za-z_][A-Za-z0-9_]* is URL-encoded (java.net.URLEncoder, UTF-8),
// prefixed with x when that starts with a digit, and every character but
// [A-Za-z0-9_] becomes _.
func scrubName(name string) string {
	ok := name != "" && !(name[0] >= '0' && name[0] <= '9')
	for i := 0; i < len(name); i++ {
		if !asciiNameChar(name[i]) {
			ok = false
		}
	}
	if ok || name == "" {
		return name
	}
	var enc []byte
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case asciiNameChar(c) || c == '.' || c == '-' || c == '*':
			enc = append(enc, c)
		case c == ' ':
			enc = append(enc, '+')
		default:
			enc = append(enc, '%', "0123456789ABCDEF"[c>>4], "0123456789ABCDEF"[c&15])
		}
	}
	if enc[0] >= '0' && enc[0] <= '9' {
		enc = append([]byte{'x'}, enc...)
	}
	for i, c := range enc {
		if !asciiNameChar(c) {
			enc[i] = '_'
		}
	}
	return string(enc)
}

func asciiNameChar(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
}

// maybeMakeOptional (AD 1134-1148): an optional schema is a union, null
// first, or null second when the schema has a default (so that the default
// is valid for the first branch).
func maybeMakeOptional(s *Schema, base *avroNode) *avroNode {
	if !s.Optional {
		return base
	}
	if s.Default != nil {
		return &avroNode{kind: "union", branches: []*avroNode{base, {kind: "null"}}}
	}
	return &avroNode{kind: "union", branches: []*avroNode{{kind: "null"}, base}}
}

// recordField is AvroData.addAvroRecordField (AD 1234-1276): the field's
// default is the schema's default, or null for an optional schema.
func (m *avroModel) recordField(name string, s *Schema) avroField {
	f := avroField{name: name}
	switch {
	case s.Default != nil:
		// JacksonUtils.toObject turns a float default into a Double before
		// Schema.Field writes it back as JSON.
		d := s.Default
		if fl, ok := d.(float32); ok {
			d = float64(fl)
		}
		f.def = avroDefaultJSON(nil, s, d)
	case s.Optional:
		f.def = []byte("null")
	}
	f.node = m.fromConnect(s, false)
	return f
}

// avroDefaultJSON is AvroData.defaultValueFromConnect written by Jackson:
// numbers as numbers, bytes as an ISO-8859-1 string, strings as text,
// structs as objects.
func avroDefaultJSON(b []byte, s *Schema, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case string:
		return avroString(b, v)
	case float32:
		return append(b, javaFloating(float64(v), 32)...) // FloatNode: Float.toString
	case float64:
		return append(b, javaFloating(v, 64)...) // DoubleNode: Double.toString
	case int8:
		return strconv.AppendInt(b, int64(v), 10)
	case int16:
		return strconv.AppendInt(b, int64(v), 10)
	case []byte:
		r := make([]rune, len(v))
		for i, c := range v {
			r[i] = rune(c)
		}
		return avroString(b, string(r))
	case Struct:
		b = append(b, '{')
		for i, f := range v.Schema.Fields {
			if i > 0 {
				b = append(b, ',')
			}
			b = avroString(b, f.Name)
			b = append(b, ':')
			b = avroDefaultJSON(b, f.Schema, structGet(v, f))
		}
		return append(b, '}')
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = avroDefaultJSON(b, s.Items, e)
		}
		return append(b, ']')
	}
	return jsonValue(b, s, v)
}

// structGet is Connect's Struct.get(field): a null value gives the field
// schema's default.
func structGet(st Struct, f Field) any {
	if v := st.Values[f.Name]; v != nil {
		return v
	}
	return f.Schema.Default
}

// avroText is Schema.toString(): compact JSON as Avro 1.8.2 (and current
// Avro, for these kinds) writes it.
func avroText(n *avroNode) string {
	w := avroWriter{seen: map[string]*avroNode{}}
	return string(w.write(nil, n))
}

// avroWriter holds Avro's Names while writing: the enclosing namespace
// and the named types already written.
type avroWriter struct {
	space string
	seen  map[string]*avroNode
}

func (w *avroWriter) write(b []byte, n *avroNode) []byte {
	switch n.kind {
	case "union":
		b = append(b, '[')
		for i, br := range n.branches {
			if i > 0 {
				b = append(b, ',')
			}
			b = w.write(b, br)
		}
		return append(b, ']')
	case "array":
		b = append(b, `{"type":"array","items":`...)
		b = w.write(b, n.items)
		return append(w.props(b, n), '}')
	case "record":
		// NamedSchema.writeNameRef: a record written before is its name,
		// qualified unless it is in the enclosing namespace.
		if prev := w.seen[n.fullName()]; prev != nil && avroEqual(prev, n) {
			if n.space == "" || n.space == w.space {
				return avroString(b, n.name)
			}
			return avroString(b, n.fullName())
		}
		w.seen[n.fullName()] = n
		saved := w.space
		b = append(b, `{"type":"record","name":`...)
		b = avroString(b, n.name)
		// Name.writeName: the namespace when it differs from the
		// enclosing one, "" for a null namespace inside a non-null one.
		switch {
		case n.space != "" && n.space != w.space:
			b = append(b, `,"namespace":`...)
			b = avroString(b, n.space)
		case n.space == "" && w.space != "":
			b = append(b, `,"namespace":""`...)
		}
		w.space = n.space
		b = append(b, `,"fields":[`...)
		for i, f := range n.fields {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"name":`...)
			b = avroString(b, f.name)
			b = append(b, `,"type":`...)
			b = w.write(b, f.node)
			if f.def != nil {
				b = append(b, `,"default":`...)
				b = append(b, f.def...)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
		b = w.props(b, n)
		w.space = saved
		return append(b, '}')
	}
	// A primitive: its name, or an object when it has properties.
	if len(n.props) == 0 {
		return avroString(b, n.kind)
	}
	b = append(b, `{"type":`...)
	b = avroString(b, n.kind)
	return append(w.props(b, n), '}')
}

func (w *avroWriter) props(b []byte, n *avroNode) []byte {
	for _, p := range n.props {
		b = append(b, ',')
		b = avroString(b, p.key)
		b = append(b, ':')
		b = append(b, p.json...)
	}
	return b
}

// avroString writes s as a JSON string the way Avro's Schema.toString
// does: Jackson's generator over a java.io.StringWriter, which escapes '"',
// '\\' and the characters below 0x20 (\b \t \n \f \r short, the others
// \u00XX) and writes everything else as it is, characters beyond U+FFFF
// included (unlike JsonConverter's UTF-8 generator, jacksonString).
func avroString(b []byte, s string) []byte { return javaJSONString(b, s, false) }

// javaFloating is Java's Double.toString (bitSize 64) or Float.toString
// (32), as Jackson writes a DoubleNode or FloatNode: a plain decimal with
// at least one fractional digit from 10^-3 to 10^7, else d.dddE±n; the
// shortest digits that read back (JDK 19 and later; earlier JDKs agree
// on the values the cases use).
func javaFloating(f float64, bitSize int) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	if a := math.Abs(f); a >= 1e-3 && a < 1e7 {
		s := strconv.FormatFloat(f, 'f', -1, bitSize)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	mant, exp, _ := strings.Cut(strconv.FormatFloat(f, 'E', -1, bitSize), "E")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	e, _ := strconv.Atoi(exp)
	return mant + "E" + strconv.Itoa(e)
}

// avroEqual is Schema.equals for the model's kinds: same kind, names,
// fields (name, schema, default), items, branches and properties.
func avroEqual(a, b *avroNode) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil || a.kind != b.kind || a.name != b.name || a.space != b.space ||
		len(a.fields) != len(b.fields) || len(a.branches) != len(b.branches) || len(a.props) != len(b.props) {
		return false
	}
	for i := range a.fields {
		fa, fb := a.fields[i], b.fields[i]
		if fa.name != fb.name || string(fa.def) != string(fb.def) || !avroEqual(fa.node, fb.node) {
			return false
		}
	}
	for i := range a.branches {
		if !avroEqual(a.branches[i], b.branches[i]) {
			return false
		}
	}
	for _, p := range a.props {
		if !slices.ContainsFunc(b.props, func(q avroProp) bool { return q.key == p.key && string(q.json) == string(p.json) }) {
			return false
		}
	}
	return (a.items == nil) == (b.items == nil) && (a.items == nil || avroEqual(a.items, b.items))
}

// avroBody is what the serializer writes after the 5-byte header for
// Connect value v of schema s whose Avro schema is n; ok is false for a
// Kafka null (a null value: AvroConverter's Serializer returns null before
// any registry call).
func avroBody(n *avroNode, s *Schema, v any) (body []byte, ok bool) {
	if v == nil {
		return nil, false
	}
	if n.kind == "bytes" {
		// AbstractKafkaAvroSerializer.serializeImpl: a top-level bytes
		// schema writes the bytes as they are, without a length.
		return slices.Clone(v.([]byte)), true
	}
	return appendAvro(nil, n, s, v), true
}

// appendAvro is GenericDatumWriter.write over a direct BinaryEncoder.
func appendAvro(b []byte, n *avroNode, s *Schema, v any) []byte {
	switch n.kind {
	case "union":
		// GenericData.resolveUnion: null is the null branch, anything else
		// the other one.
		for i, br := range n.branches {
			if (v == nil) == (br.kind == "null") {
				b = binary.AppendVarint(b, int64(i))
				if v == nil {
					return b
				}
				return appendAvro(b, br, s, v)
			}
		}
		panic(fmt.Sprintf("avro model: no union branch for %T", v))
	case "record":
		st := v.(Struct)
		for i, f := range s.Fields {
			b = appendAvro(b, n.fields[i].node, f.Schema, structGet(st, f))
		}
		return b
	case "array":
		items := v.([]any)
		if len(items) > 0 { // BinaryEncoder.setItemCount writes no 0 count
			b = binary.AppendVarint(b, int64(len(items)))
		}
		for _, e := range items {
			b = appendAvro(b, n.items, s.Items, e)
		}
		return append(b, 0) // writeArrayEnd
	case "boolean":
		if v.(bool) {
			return append(b, 1)
		}
		return append(b, 0)
	case "int", "long":
		return binary.AppendVarint(b, avroInt(v)) // Go's varint is Avro's zigzag varint
	case "float":
		return binary.LittleEndian.AppendUint32(b, math.Float32bits(v.(float32)))
	case "double":
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(v.(float64)))
	case "string":
		str := v.(string)
		b = binary.AppendVarint(b, int64(len(str)))
		return append(b, str...)
	case "bytes":
		bs := v.([]byte)
		b = binary.AppendVarint(b, int64(len(bs)))
		return append(b, bs...)
	}
	panic(fmt.Sprintf("avro model: Avro kind %q", n.kind))
}

// avroInt widens the model's integers (AvroData widens int8 and int16 to
// int).
func avroInt(v any) int64 {
	switch v := v.(type) {
	case int8:
		return int64(v)
	case int16:
		return int64(v)
	case int32:
		return int64(v)
	case int64:
		return v
	}
	panic(fmt.Sprintf("avro model: integer %T", v))
}

// confluentWire is the serializer's output: magic byte 0, the schema id
// big-endian, the body.
func confluentWire(id int32, body []byte) []byte {
	b := make([]byte, 0, 5+len(body))
	b = append(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(id))
	return append(b, body...)
}
