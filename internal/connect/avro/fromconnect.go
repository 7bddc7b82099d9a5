package avro

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/walrelay/walrelay/internal/connect"
)

// This file is AvroData.fromConnectSchema (confluentinc/schema-registry
// avro-data/src/main/java/io/confluent/connect/avro/AvroData.java at
// 794611bd86d, "AD" with line numbers below) for the Connect schemas the
// outbox router builds: primitives, Debezium's named strings and numbers,
// defaults, optional schemas, arrays and structs. docs/design/avro.md
// section 1 walks through each rule.

// Errors returned by this package, besides connect.ErrData for values that
// do not fit their schema.
var (
	// ErrInvalidName is returned when a record or field name is not an
	// Avro name and Options.ScrubInvalidNames is off: Avro's Schema.Name
	// and Schema.Field constructors throw SchemaParseException there
	// (apache/avro Schema.java validateName), which AvroConverter lets
	// through as a failed record.
	ErrInvalidName = errors.New("not a valid avro name")

	// ErrUnsupported is returned for Connect schemas the outbox router
	// never builds and this package does not convert (maps, Connect's
	// logical types, Confluent's union structs), so that they fail loudly
	// instead of being written differently.
	ErrUnsupported = errors.New("not implemented by walrelay's avro package")
)

// Options are the AvroConverter options (AvroDataConfig) that change the
// schema of what the outbox router produces.
type Options struct {
	// ConnectMetaData is connect.meta.data (Confluent's default: true):
	// write connect.version, connect.default, connect.name, connect.type
	// and connect.parameters into the schema.
	ConnectMetaData bool
	// ScrubInvalidNames is scrub.invalid.names (default false): turn names
	// that are not Avro names into ones that are (AD doScrubName 1173-1217)
	// instead of failing with ErrInvalidName.
	ScrubInvalidNames bool
}

// Names AvroData gives what Connect leaves unnamed (AD 86-91).
const (
	defaultNamespace  = "io.confluent.connect.avro"
	defaultSchemaName = "ConnectDefault"
	// fieldDefaultFlag is AVRO_FIELD_DEFAULT_FLAG_PROP (AD 109): a
	// parameter AvroData leaves out of connect.parameters and which stops
	// connect.default.
	fieldDefaultFlag = defaultNamespace + ".field.default"
	unionName        = defaultNamespace + ".Union"
	connectDataPkg   = "org.apache.kafka.connect.data."
)

// node is one Avro schema: what org.apache.avro.Schema holds of it.
type node struct {
	typ   string // null, boolean, int, long, float, double, bytes, string, record, array, union
	props []prop // in insertion order; the first value of a key wins (JsonProperties)
	// A record's name, namespace ("" for none) and fields.
	name, space string
	fields      []avroField
	items       *node   // an array's
	branches    []*node // a union's
}

// prop is one schema property, its value as JSON text.
type prop struct {
	key string
	val []byte
}

// avroField is an Avro record field; def is its default as JSON text, nil
// for none.
type avroField struct {
	name string
	typ  *node
	def  []byte
}

func (n *node) addProp(key string, val []byte) {
	for _, p := range n.props {
		if p.key == key {
			return
		}
	}
	n.props = append(n.props, prop{key, val})
}

func (n *node) fullName() string {
	if n.space == "" {
		return n.name
	}
	return n.space + "." + n.name
}

// FromConnectSchema returns the Avro schema AvroData.fromConnectSchema
// derives from the Connect schema s, as AvroConverter registers it. A nil
// s (a tombstone's) has no Avro schema: AvroConverter writes a Kafka null
// without asking the registry.
//
// Errors: ErrInvalidName, naming the field, for a name Avro refuses;
// ErrUnsupported for schemas the outbox router does not build;
// connect.ErrData for a default value that does not fit its schema.
func FromConnectSchema(s *connect.Schema, o Options) (*Schema, error) {
	if s == nil {
		return nil, errors.New("a null connect schema has no avro schema")
	}
	b := builder{o: o}
	n, err := b.fromConnect(s, false, "")
	if err != nil {
		return nil, err
	}
	w := writer{names: map[string]*node{}}
	if err := w.write(n); err != nil {
		return nil, err
	}
	as := &Schema{text: string(w.buf), rawBytes: n.typ == "bytes"}
	h := fnv.New64a()
	h.Write(w.buf)
	as.fp = h.Sum64()
	if n.typ == "record" {
		as.fullName = n.fullName()
	}
	return as, nil
}

// builder holds AvroData's FromConnectContext (AD 2817-2835) for one
// conversion.
type builder struct {
	o Options
	// memo is FromConnectContext.schemaMap: the Avro schema made of each
	// required Connect schema, reused for an equal one (ConnectSchema.equals),
	// so that an equal record is written again as a name reference.
	memo []memoEntry
	// nameIndex counts the unnamed records (incrementAndGetNameIndex).
	nameIndex int
}

type memoEntry struct {
	s *connect.Schema
	n *node
}

// fromConnect is AD fromConnectSchema (818-1121); path names the field
// being converted, for errors.
func (b *builder) fromConnect(s *connect.Schema, ignoreOptional bool, path string) (*node, error) {
	if s.Name == unionName || strings.HasPrefix(s.Name, connectDataPkg) {
		return nil, fmt.Errorf("%w: connect schema %s", ErrUnsupported, s)
	}
	if !s.Optional {
		// AD 823-828.
		for _, m := range b.memo {
			if m.s.Equal(s) {
				return m.n, nil
			}
		}
	}
	var (
		base        *node
		connectType string
	)
	switch s.Type {
	case connect.TypeInt8:
		base, connectType = &node{typ: "int"}, "int8" // AD 835-838
	case connect.TypeInt16:
		base, connectType = &node{typ: "int"}, "int16" // AD 839-842
	case connect.TypeInt32:
		base = &node{typ: "int"}
	case connect.TypeInt64:
		base = &node{typ: "long"}
	case connect.TypeFloat32:
		base = &node{typ: "float"}
	case connect.TypeFloat64:
		base = &node{typ: "double"}
	case connect.TypeBoolean:
		base = &node{typ: "boolean"}
	case connect.TypeString:
		base = &node{typ: "string"}
	case connect.TypeBytes:
		base = &node{typ: "bytes"}
	case connect.TypeArray:
		items, err := b.fromConnect(s.Items, false, path)
		if err != nil {
			return nil, err
		}
		base = &node{typ: "array", items: items}
	case connect.TypeStruct:
		if s.Optional {
			// AD 972-977: an optional struct is ["null", <the record of
			// its required copy>] (AvroData.nonOptional keeps the
			// default), with no properties on the union.
			req := *s
			req.Optional = false
			rec, err := b.fromConnect(&req, false, path)
			if err != nil {
				return nil, err
			}
			return &node{typ: "union", branches: []*node{{typ: "null"}, rec}}, nil
		}
		rec, err := b.record(s, path)
		if err != nil {
			return nil, err
		}
		base = rec
	default:
		return nil, fmt.Errorf("%w: connect schema %s", ErrUnsupported, s)
	}
	if b.o.ConnectMetaData {
		// AD 1008-1037, in this order.
		if s.Doc != "" {
			base.addProp("connect.doc", jsonString(s.Doc))
		}
		if s.HasVersion {
			base.addProp("connect.version", strconv.AppendInt(nil, int64(s.Version), 10))
		}
		if params := parametersJSON(s.Params); params != nil {
			base.addProp("connect.parameters", params)
		}
		if s.Default != nil && !hasParam(s.Params, fieldDefaultFlag) {
			d, err := defaultJSON(s, s.Default, false)
			if err != nil {
				return nil, err
			}
			base.addProp("connect.default", d)
		}
		if s.Name != "" {
			base.addProp("connect.name", jsonString(s.Name))
		}
		if connectType != "" {
			base.addProp("connect.type", jsonString(connectType))
		}
	}
	// AD 1102-1108: parameters named avro* are copied as properties.
	for _, p := range s.Params {
		if strings.HasPrefix(p.Key, "avro") {
			base.addProp(p.Key, jsonString(p.Value))
		}
	}
	final := base
	if !ignoreOptional && s.Optional {
		// maybeMakeOptional, AD 1134-1148.
		if s.Default != nil {
			final = &node{typ: "union", branches: []*node{base, {typ: "null"}}}
		} else {
			final = &node{typ: "union", branches: []*node{{typ: "null"}, base}}
		}
	}
	if !s.Optional {
		b.memo = append(b.memo, memoEntry{s, final})
	}
	return final, nil
}

// record is the STRUCT branch of AD fromConnectSchema for a required
// struct (AD 978-1000): a record named by getNameOrDefault (AD 1124-1132)
// with a field per Connect field (addAvroRecordField, AD 1234-1276).
func (b *builder) record(s *connect.Schema, path string) (*node, error) {
	rec := &node{typ: "record"}
	if s.Name == "" {
		b.nameIndex++
		rec.space, rec.name = defaultNamespace, defaultSchemaName
		if b.nameIndex > 1 {
			rec.name += strconv.Itoa(b.nameIndex)
		}
	} else {
		rec.space, rec.name = splitName(s.Name, b.o.ScrubInvalidNames)
		if rec.name == "" && rec.space == "" {
			return nil, fmt.Errorf("%w: record name %q at %s: Empty name", ErrInvalidName, s.Name, pathOr(path))
		}
		if !b.o.ScrubInvalidNames {
			if err := validateName(rec.name); err != nil {
				return nil, fmt.Errorf("%w: record %q at %s: %s", ErrInvalidName, s.Name, pathOr(path), err)
			}
		}
	}
	for _, f := range s.Fields {
		name := f.Name
		fpath := joinPath(path, f.Name)
		if b.o.ScrubInvalidNames {
			name = scrubName(name)
		} else if err := validateName(name); err != nil {
			return nil, fmt.Errorf("%w: field %q: %s", ErrInvalidName, fpath, err)
		}
		for _, g := range rec.fields {
			if g.name == name {
				// Schema.setFields: "Duplicate field x in record y".
				return nil, fmt.Errorf("%w: field %q: Duplicate field %s in record %s", ErrInvalidName, fpath, name, rec.fullName())
			}
		}
		var def []byte
		if f.Schema.Default != nil {
			var err error
			if def, err = defaultJSON(f.Schema, f.Schema.Default, true); err != nil {
				return nil, fmt.Errorf("field %q: %w", fpath, err)
			}
		} else if f.Schema.Optional {
			def = []byte("null") // JsonProperties.NULL_VALUE
		}
		t, err := b.fromConnect(f.Schema, false, fpath)
		if err != nil {
			return nil, err
		}
		rec.fields = append(rec.fields, avroField{name: name, typ: t, def: def})
	}
	return rec, nil
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func pathOr(path string) string {
	if path == "" {
		return "the top level"
	}
	return "field " + strconv.Quote(path)
}

func hasParam(params []connect.Param, key string) bool {
	for _, p := range params {
		if p.Key == key {
			return true
		}
	}
	return false
}

// parametersJSON is parametersFromConnect (AD 1461-1469): the parameters
// as a JSON object of strings, less fieldDefaultFlag; nil when empty.
func parametersJSON(params []connect.Param) []byte {
	var b []byte
	for _, p := range params {
		if p.Key == fieldDefaultFlag {
			continue
		}
		if b == nil {
			b = append(b, '{')
		} else {
			b = append(b, ',')
		}
		b = appendJSONString(b, p.Key)
		b = append(b, ':')
		b = appendJSONString(b, p.Value)
	}
	if b == nil {
		return nil
	}
	return append(b, '}')
}

func jsonString(s string) []byte { return appendJSONString(nil, s) }

// defaultJSON is defaultValueFromConnect (AD 1372-1455) as Jackson writes
// the node. forField is the field's "default": AvroData turns the node
// into a Java object (JacksonUtils.toObject) and Schema.Field back into a
// node (JacksonUtils.toJsonNode), which widens a FLOAT32 to a double
// (toObject reads a FloatNode with asDouble), so 1.1f is written 1.1 in
// connect.default and 1.100000023841858 in the field's default.
func defaultJSON(s *connect.Schema, v any, forField bool) ([]byte, error) {
	bad := func() error {
		return fmt.Errorf("%w: Invalid type used for default value of %s field: %T", connect.ErrData, s.Type, v)
	}
	switch s.Type {
	case connect.TypeInt8:
		x, ok := v.(int8)
		if !ok {
			return nil, bad()
		}
		return strconv.AppendInt(nil, int64(x), 10), nil
	case connect.TypeInt16:
		x, ok := v.(int16)
		if !ok {
			return nil, bad()
		}
		return strconv.AppendInt(nil, int64(x), 10), nil
	case connect.TypeInt32:
		x, ok := v.(int32)
		if !ok {
			return nil, bad()
		}
		return strconv.AppendInt(nil, int64(x), 10), nil
	case connect.TypeInt64:
		x, ok := v.(int64)
		if !ok {
			return nil, bad()
		}
		return strconv.AppendInt(nil, x, 10), nil
	case connect.TypeFloat32:
		x, ok := v.(float32)
		if !ok {
			return nil, bad()
		}
		if forField {
			return jacksonDouble(float64(x)), nil
		}
		return jacksonNumber(connect.FormatFloat(x)), nil
	case connect.TypeFloat64:
		x, ok := v.(float64)
		if !ok {
			return nil, bad()
		}
		return jacksonDouble(x), nil
	case connect.TypeBoolean:
		x, ok := v.(bool)
		if !ok {
			return nil, bad()
		}
		return strconv.AppendBool(nil, x), nil
	case connect.TypeString:
		x, ok := v.(string)
		if !ok {
			return nil, bad()
		}
		return jsonString(x), nil
	case connect.TypeBytes:
		x, ok := v.([]byte)
		if !ok {
			return nil, bad()
		}
		// new String(bytes, ISO_8859_1): one character per byte.
		r := make([]rune, len(x))
		for i, c := range x {
			r[i] = rune(c)
		}
		return jsonString(string(r)), nil
	case connect.TypeArray:
		x, ok := v.([]any)
		if !ok {
			return nil, bad()
		}
		b := []byte{'['}
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			d, err := defaultElement(s.Items, e, forField)
			if err != nil {
				return nil, err
			}
			b = append(b, d...)
		}
		return append(b, ']'), nil
	case connect.TypeStruct:
		x, ok := v.(*connect.Struct)
		if !ok {
			return nil, bad()
		}
		b := []byte{'{'}
		for i, f := range s.Fields {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, f.Name)
			b = append(b, ':')
			d, err := defaultElement(f.Schema, x.At(i), forField)
			if err != nil {
				return nil, err
			}
			b = append(b, d...)
		}
		return append(b, '}'), nil
	}
	return nil, fmt.Errorf("%w: default value of a %s schema", ErrUnsupported, s.Type)
}

// defaultElement is defaultValueFromConnect of a nested value, which may
// be null (Jackson's NullNode, "null").
func defaultElement(s *connect.Schema, v any, forField bool) ([]byte, error) {
	if v == nil {
		return []byte("null"), nil
	}
	return defaultJSON(s, v, forField)
}

// jacksonDouble writes a double as Jackson's DoubleNode does:
// Double.toString, and NaN and the infinities quoted.
func jacksonDouble(v float64) []byte { return jacksonNumber(connect.FormatDouble(v)) }

func jacksonNumber(s string) []byte {
	switch s {
	case "NaN", "Infinity", "-Infinity":
		return []byte(`"` + s + `"`)
	}
	return []byte(s)
}

// splitName is AD splitName (2517-2536): a Connect name split at its last
// dot into namespace and name, each dot-separated part scrubbed when
// scrubbing; Java's String.split drops trailing empty parts.
func splitName(full string, scrub bool) (space, name string) {
	parts := strings.Split(full, ".")
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	if len(parts) == 0 {
		return "", ""
	}
	if scrub {
		for i := range parts {
			parts[i] = scrubName(parts[i])
		}
	}
	if len(parts) == 1 {
		return "", parts[0]
	}
	return strings.Join(parts[:len(parts)-1], "."), parts[len(parts)-1]
}

// validateName is Avro's name check for simple names (apache/avro
// Schema.validateName, NameValidator.UTF_VALIDATOR): a letter or '_',
// then letters, digits or '_', with Java's Character.isLetter and
// isLetterOrDigit, which see a character beyond U+FFFF as two surrogates,
// neither a letter.
func validateName(name string) error {
	if name == "" {
		return errors.New("Empty name")
	}
	for i, r := range name {
		ok := r == '_' || r <= 0xFFFF && unicode.IsLetter(r)
		if i > 0 {
			ok = ok || r <= 0xFFFF && unicode.IsDigit(r)
		}
		if !ok {
			if i == 0 {
				return fmt.Errorf("Illegal initial character: %s", name)
			}
			return fmt.Errorf("Illegal character in: %s", name)
		}
		if r == utf8.RuneError {
			return fmt.Errorf("Illegal character in: %s", name)
		}
	}
	return nil
}

// scrubName is AD doScrubName (1173-1217): a name that is not
// [A-Za-z_][A-Za-z0-9_]* is URL-encoded (URLEncoder, UTF-8), prefixed
// with "x" when that starts with a digit, and every character other than
// [A-Za-z0-9_] becomes '_'.
func scrubName(name string) string {
	if name == "" {
		return name
	}
	ok := name[0] < '0' || name[0] > '9'
	for i := 0; ok && i < len(name); i++ {
		ok = isNameChar(name[i])
	}
	if ok {
		return name
	}
	enc := urlEncode(name)
	if enc[0] >= '0' && enc[0] <= '9' {
		enc = "x" + enc
	}
	b := []byte(enc)
	for i, c := range b {
		if !isNameChar(c) {
			b[i] = '_'
		}
	}
	return string(b)
}

func isNameChar(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
}

// urlEncode is java.net.URLEncoder.encode(s, "UTF-8"): [A-Za-z0-9.*_-]
// kept, ' ' as '+', every other byte as %XX.
func urlEncode(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isNameChar(c) || c == '.' || c == '*' || c == '-':
			b.WriteByte(c)
		case c == ' ':
			b.WriteByte('+')
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}
