package router

import (
	"fmt"
	"strings"
)

// Converter names what turns a record's key or value into bytes: walrelay's
// own raw format, or one of Kafka Connect's converters, so that a switch
// from Debezium keeps every byte consumers see.
type Converter uint8

// Converters walrelay implements, with the names Kafka Connect's
// key.converter and value.converter take.
const (
	// ConvRaw is walrelay's own format, the default: a key is the column's
	// text, a value the payload as Postgres holds it (JSON text for json
	// and jsonb, raw bytes for bytea), an envelope a JSON object.
	ConvRaw Converter = iota + 1
	// ConvString is org.apache.kafka.connect.storage.StringConverter: the
	// Connect value's toString().
	ConvString
	// ConvJSON is org.apache.kafka.connect.json.JsonConverter, with or
	// without its {"schema":…,"payload":…} envelope.
	ConvJSON
	// ConvBytes is org.apache.kafka.connect.converters.ByteArrayConverter:
	// bytes only.
	ConvBytes
	// ConvBinary is io.debezium.converters.BinaryDataConverter: bytes as
	// they are, anything else through a delegate converter.
	ConvBinary
)

// HeaderConverter names what turns header values into bytes.
type HeaderConverter uint8

// Header converters walrelay implements.
const (
	// HeaderRaw is walrelay's own format, the default: the column's text,
	// raw bytes for bytea.
	HeaderRaw HeaderConverter = iota + 1
	// HeaderSimple is org.apache.kafka.connect.storage.SimpleHeaderConverter,
	// Kafka Connect's default header converter.
	HeaderSimple
	// HeaderString is StringConverter used as a header converter.
	HeaderString
)

// converterNames maps the names users give, short or as Connect's class
// names, to converters.
var converterNames = map[string]Converter{
	"raw":    ConvRaw,
	"string": ConvString,
	"json":   ConvJSON,
	"bytes":  ConvBytes,
	"binary": ConvBinary,
	"org.apache.kafka.connect.storage.StringConverter":       ConvString,
	"org.apache.kafka.connect.json.JsonConverter":            ConvJSON,
	"org.apache.kafka.connect.converters.ByteArrayConverter": ConvBytes,
	"io.debezium.converters.BinaryDataConverter":             ConvBinary,
}

var headerConverterNames = map[string]HeaderConverter{
	"raw":    HeaderRaw,
	"simple": HeaderSimple,
	"string": HeaderString,
	"org.apache.kafka.connect.storage.SimpleHeaderConverter": HeaderSimple,
	"org.apache.kafka.connect.storage.StringConverter":       HeaderString,
}

var convNames = [...]string{ConvRaw: "raw", ConvString: "string", ConvJSON: "json", ConvBytes: "bytes", ConvBinary: "binary"}

// String returns the converter's short name.
func (c Converter) String() string {
	if c > 0 && int(c) < len(convNames) {
		return convNames[c]
	}
	return fmt.Sprintf("Converter(%d)", uint8(c))
}

// Converters holds the converter options, in YAML flat dotted keys under
// converter: as Kafka Connect's key.converter, value.converter and
// header.converter options (with their schemas.enable and
// delegate.converter.type settings) name them.
type Converters struct {
	Key                string `yaml:"key" help:"how keys are written: raw (the column's text), string, json, bytes or binary, or the Kafka Connect class (StringConverter, JsonConverter, ByteArrayConverter, Debezium's BinaryDataConverter)"`
	KeySchemasEnable   bool   `yaml:"key.schemas.enable" help:"with the json key converter, wrap each key in JsonConverter's {\"schema\":…,\"payload\":…} envelope (Kafka Connect's default)"`
	KeyDelegate        string `yaml:"key.delegate.converter.type" help:"with the binary key converter, the converter for keys that are not bytes (string or json)"`
	Value              string `yaml:"value" help:"how values are written: raw (the payload as Postgres holds it), string, json, bytes or binary, or the Kafka Connect class"`
	ValueSchemasEnable bool   `yaml:"value.schemas.enable" help:"with the json value converter, wrap each value in JsonConverter's {\"schema\":…,\"payload\":…} envelope (Kafka Connect's default)"`
	ValueDelegate      string `yaml:"value.delegate.converter.type" help:"with the binary value converter, the converter for values that are not bytes (string or json)"`
	TopicPrefix        string `yaml:"topic.prefix" help:"the Debezium connector's topic.prefix: with the json value converter and envelope placements, the envelope's Connect schema is named <topic.prefix>.<schema>.<table>.<route.by.field value>.Value as Debezium names it (empty: the name starts at <schema>)"`
	Header             string `yaml:"header" help:"how header values are written: raw (the column's text), simple or string, or the Kafka Connect class (SimpleHeaderConverter, Kafka Connect's default)"`
}

// DefaultConverters returns walrelay's raw format for keys, values and
// headers, with schemas.enable true as Kafka Connect's JsonConverter
// defaults it.
func DefaultConverters() Converters {
	return Converters{Key: "raw", KeySchemasEnable: true, Value: "raw", ValueSchemasEnable: true, Header: "raw"}
}

// convSpec is a parsed key or value converter.
type convSpec struct {
	conv     Converter
	schemas  bool      // JsonConverter's schemas.enable
	delegate Converter // BinaryDataConverter's delegate; 0 when none
}

// parseConverters validates c.
func parseConverters(c Converters) (key, value convSpec, header HeaderConverter, err error) {
	parse := func(side, name, delegate string, schemas bool) (convSpec, error) {
		s := convSpec{schemas: schemas}
		var ok bool
		if s.conv, ok = converterNames[strings.TrimSpace(name)]; !ok {
			return s, fmt.Errorf("converter %s %q: want raw, string, json, bytes or binary, or a Kafka Connect converter class walrelay implements", side, name)
		}
		if d := strings.TrimSpace(delegate); d != "" {
			if s.conv != ConvBinary {
				return s, fmt.Errorf("converter %s.delegate.converter.type %q: only the binary converter takes a delegate", side, delegate)
			}
			if s.delegate, ok = converterNames[d]; !ok || s.delegate == ConvBinary || s.delegate == ConvRaw {
				return s, fmt.Errorf("converter %s.delegate.converter.type %q: want string, json or bytes, or their Kafka Connect class", side, delegate)
			}
		}
		return s, nil
	}
	if key, err = parse("key", c.Key, c.KeyDelegate, c.KeySchemasEnable); err != nil {
		return
	}
	if value, err = parse("value", c.Value, c.ValueDelegate, c.ValueSchemasEnable); err != nil {
		return
	}
	var ok bool
	if header, ok = headerConverterNames[strings.TrimSpace(c.Header)]; !ok {
		err = fmt.Errorf("converter header %q: want raw, simple or string, or org.apache.kafka.connect.storage.SimpleHeaderConverter", c.Header)
	}
	return
}
