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
	// ConvAvro is io.confluent.connect.avro.AvroConverter: the Avro schema
	// AvroData derives from the Connect schema, registered with a schema
	// registry, and Confluent's wire format (internal/connect/avro; the
	// relay patches in the registry's id).
	ConvAvro
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
	// HeaderJSON is org.apache.kafka.connect.json.JsonConverter used as a
	// header converter: its fromConnectHeader is fromConnectData, with the
	// header converter's own schemas.enable (true).
	HeaderJSON
	// HeaderJSONNoSchemas is HeaderJSON with header.schemas.enable false.
	HeaderJSONNoSchemas
)

// converterNames maps the names users give, short or as Connect's class
// names, to converters.
var converterNames = map[string]Converter{
	"raw":    ConvRaw,
	"string": ConvString,
	"json":   ConvJSON,
	"bytes":  ConvBytes,
	"binary": ConvBinary,
	"avro":   ConvAvro,
	"org.apache.kafka.connect.storage.StringConverter":       ConvString,
	"org.apache.kafka.connect.json.JsonConverter":            ConvJSON,
	"org.apache.kafka.connect.converters.ByteArrayConverter": ConvBytes,
	"io.debezium.converters.BinaryDataConverter":             ConvBinary,
	"io.confluent.connect.avro.AvroConverter":                ConvAvro,
}

var headerConverterNames = map[string]HeaderConverter{
	"raw":    HeaderRaw,
	"simple": HeaderSimple,
	"string": HeaderString,
	"json":   HeaderJSON,
	"org.apache.kafka.connect.storage.SimpleHeaderConverter": HeaderSimple,
	"org.apache.kafka.connect.storage.StringConverter":       HeaderString,
	"org.apache.kafka.connect.json.JsonConverter":            HeaderJSON,
}

var convNames = [...]string{ConvRaw: "raw", ConvString: "string", ConvJSON: "json", ConvBytes: "bytes", ConvBinary: "binary", ConvAvro: "avro"}

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
	Key                string `yaml:"key" help:"how keys are written: raw (the column's text), string, json, bytes, binary or avro, or the Kafka Connect class (StringConverter, JsonConverter, ByteArrayConverter, Debezium's BinaryDataConverter, Confluent's AvroConverter with key.schema.registry.url)"`
	KeySchemasEnable   bool   `yaml:"key.schemas.enable" help:"with the json key converter, wrap each key in JsonConverter's {\"schema\":…,\"payload\":…} envelope (Kafka Connect's default)"`
	KeyDelegate        string `yaml:"key.delegate.converter.type" help:"with the binary key converter, the converter for keys that are not bytes (string or json)"`
	Value              string `yaml:"value" help:"how values are written: raw (the payload as Postgres holds it), string, json, bytes, binary or avro (Confluent's AvroConverter, with value.schema.registry.url), or the Kafka Connect class"`
	ValueSchemasEnable bool   `yaml:"value.schemas.enable" help:"with the json value converter, wrap each value in JsonConverter's {\"schema\":…,\"payload\":…} envelope (Kafka Connect's default)"`
	ValueDelegate      string `yaml:"value.delegate.converter.type" help:"with the binary value converter, the converter for values that are not bytes (string or json)"`
	TopicPrefix        string `yaml:"topic.prefix" help:"the Debezium connector's topic.prefix: with the json value converter and envelope placements, the envelope's Connect schema is named <topic.prefix>.<schema>.<table>.<route.by.field value>.Value as Debezium names it (empty: the name starts at <schema>)"`
	Header             string `yaml:"header" help:"how header values are written: raw (the column's text), simple, string or json, or the Kafka Connect class (SimpleHeaderConverter, Kafka Connect's default; StringConverter; JsonConverter)"`
	// header.converter.schemas.enable, as Kafka Connect configures a
	// JsonConverter used as the header converter.
	HeaderSchemasEnable bool `yaml:"header.schemas.enable" help:"with the json header converter, wrap each header value in JsonConverter's {\"schema\":…,\"payload\":…} envelope (JsonConverter's default, also as a header converter)"`
	// The avro key converter (Confluent's AvroConverter), with the options
	// its Kafka Connect configuration takes, value.converter. stripped:
	// the registry it talks to, and how it names subjects and registers.
	KeyRegistryURL       string `yaml:"key.schema.registry.url" help:"avro key converter: the schema registry's URL, or several comma-separated (tried in order); credentials in the URL are used with key.basic.auth.credentials.source URL"`
	KeyBasicAuthSource   string `yaml:"key.basic.auth.credentials.source" help:"avro key converter: USER_INFO (key.basic.auth.user.info) or URL (the user info of the registry URL); empty: none"`
	KeyBasicAuthUserInfo string `yaml:"key.basic.auth.user.info" help:"avro key converter: user:password for the registry's basic auth (prefer WALRELAY_CONVERTER_KEY_BASIC_AUTH_USER_INFO or ..._FILE)" secret:"true"`
	KeyBearerAuthSource  string `yaml:"key.bearer.auth.credentials.source" help:"avro key converter: STATIC_TOKEN to send key.bearer.auth.token as a bearer token; empty: none"`
	KeyBearerAuthToken   string `yaml:"key.bearer.auth.token" help:"avro key converter: the registry's bearer token (prefer WALRELAY_CONVERTER_KEY_BEARER_AUTH_TOKEN or ..._FILE)" secret:"true"`
	KeyRegistryCAFile    string `yaml:"key.schema.registry.ssl.truststore.location" help:"avro key converter: PEM file of the CAs that verify the registry (empty: the system's); JKS and PKCS12 stores are refused"`
	KeyRegistryCAType    string `yaml:"key.schema.registry.ssl.truststore.type" help:"avro key converter: PEM, the only truststore type walrelay reads (empty: PEM)"`
	KeyRegistryCertFile  string `yaml:"key.schema.registry.ssl.keystore.location" help:"avro key converter: PEM file holding the client certificate and its unencrypted key, for a registry that requires one"`
	KeyRegistryCertType  string `yaml:"key.schema.registry.ssl.keystore.type" help:"avro key converter: PEM, the only keystore type walrelay reads (empty: PEM)"`
	KeySubjectStrategy   string `yaml:"key.subject.name.strategy" help:"avro key converter: TopicNameStrategy (<topic>-key), RecordNameStrategy or TopicRecordNameStrategy, short or as io.confluent.kafka.serializers.subject class names (empty: TopicNameStrategy)"`
	KeyAutoRegister      bool   `yaml:"key.auto.register.schemas" help:"avro key converter: register a schema the subject lacks; false: look it up, and a schema not registered is a schema_rejected error"`
	KeyUseLatestVersion  bool   `yaml:"key.use.latest.version" help:"avro key converter, with key.auto.register.schemas false: write with the subject's latest schema (its fields must be those walrelay derives, in order)"`
	KeyLatestStrict      bool   `yaml:"key.latest.compatibility.strict" help:"avro key converter, with key.use.latest.version: accepted as Connect takes it; walrelay always requires more, a latest schema that encodes records as the one it derives (same fields, order and types), else the row is schema_rejected"`
	KeyNormalizeSchemas  bool   `yaml:"key.normalize.schemas" help:"avro key converter: ask the registry to normalize schemas it registers and looks up"`
	KeyConnectMetaData   bool   `yaml:"key.connect.meta.data" help:"avro key converter: write Connect's connect.name, connect.version, connect.default and connect.parameters into the schema, as AvroConverter does by default"`
	KeyEnhancedAvro      bool   `yaml:"key.enhanced.avro.schema.support" help:"avro key converter: accepted for a pasted configuration; it changes nothing the outbox router produces"`
	KeyScrubInvalidNames bool   `yaml:"key.scrub.invalid.names" help:"avro key converter: replace characters Avro names cannot hold with _, as AvroData's scrub.invalid.names does; false: a JSON key that is not an Avro name is a payload_invalid error"`
	KeyAvroSchema        string `yaml:"key.avro.schema" help:"avro key converter: connect (the schema AvroData derives from the column, as Debezium does) or registry (the payload's JSON is encoded with the schema registered for the subject: typed Avro without serialising in the application)"`
	KeyAvroVersionColumn string `yaml:"key.avro.schema.version.column" help:"avro key converter with key.avro.schema registry: a column naming the registry version to encode with (empty or NULL: the latest)"`
	// The avro value converter (Confluent's AvroConverter), with the options
	// its Kafka Connect configuration takes, value.converter. stripped:
	// the registry it talks to, and how it names subjects and registers.
	ValueRegistryURL       string `yaml:"value.schema.registry.url" help:"avro value converter: the schema registry's URL, or several comma-separated (tried in order); credentials in the URL are used with value.basic.auth.credentials.source URL"`
	ValueBasicAuthSource   string `yaml:"value.basic.auth.credentials.source" help:"avro value converter: USER_INFO (value.basic.auth.user.info) or URL (the user info of the registry URL); empty: none"`
	ValueBasicAuthUserInfo string `yaml:"value.basic.auth.user.info" help:"avro value converter: user:password for the registry's basic auth (prefer WALRELAY_CONVERTER_VALUE_BASIC_AUTH_USER_INFO or ..._FILE)" secret:"true"`
	ValueBearerAuthSource  string `yaml:"value.bearer.auth.credentials.source" help:"avro value converter: STATIC_TOKEN to send value.bearer.auth.token as a bearer token; empty: none"`
	ValueBearerAuthToken   string `yaml:"value.bearer.auth.token" help:"avro value converter: the registry's bearer token (prefer WALRELAY_CONVERTER_VALUE_BEARER_AUTH_TOKEN or ..._FILE)" secret:"true"`
	ValueRegistryCAFile    string `yaml:"value.schema.registry.ssl.truststore.location" help:"avro value converter: PEM file of the CAs that verify the registry (empty: the system's); JKS and PKCS12 stores are refused"`
	ValueRegistryCAType    string `yaml:"value.schema.registry.ssl.truststore.type" help:"avro value converter: PEM, the only truststore type walrelay reads (empty: PEM)"`
	ValueRegistryCertFile  string `yaml:"value.schema.registry.ssl.keystore.location" help:"avro value converter: PEM file holding the client certificate and its unencrypted key, for a registry that requires one"`
	ValueRegistryCertType  string `yaml:"value.schema.registry.ssl.keystore.type" help:"avro value converter: PEM, the only keystore type walrelay reads (empty: PEM)"`
	ValueSubjectStrategy   string `yaml:"value.subject.name.strategy" help:"avro value converter: TopicNameStrategy (<topic>-value), RecordNameStrategy or TopicRecordNameStrategy, short or as io.confluent.kafka.serializers.subject class names (empty: TopicNameStrategy)"`
	ValueAutoRegister      bool   `yaml:"value.auto.register.schemas" help:"avro value converter: register a schema the subject lacks; false: look it up, and a schema not registered is a schema_rejected error"`
	ValueUseLatestVersion  bool   `yaml:"value.use.latest.version" help:"avro value converter, with value.auto.register.schemas false: write with the subject's latest schema (its fields must be those walrelay derives, in order)"`
	ValueLatestStrict      bool   `yaml:"value.latest.compatibility.strict" help:"avro value converter, with value.use.latest.version: accepted as Connect takes it; walrelay always requires more, a latest schema that encodes records as the one it derives (same fields, order and types), else the row is schema_rejected"`
	ValueNormalizeSchemas  bool   `yaml:"value.normalize.schemas" help:"avro value converter: ask the registry to normalize schemas it registers and looks up"`
	ValueConnectMetaData   bool   `yaml:"value.connect.meta.data" help:"avro value converter: write Connect's connect.name, connect.version, connect.default and connect.parameters into the schema, as AvroConverter does by default"`
	ValueEnhancedAvro      bool   `yaml:"value.enhanced.avro.schema.support" help:"avro value converter: accepted for a pasted configuration; it changes nothing the outbox router produces"`
	ValueScrubInvalidNames bool   `yaml:"value.scrub.invalid.names" help:"avro value converter: replace characters Avro names cannot hold with _, as AvroData's scrub.invalid.names does; false: a JSON key that is not an Avro name is a payload_invalid error"`
	ValueAvroSchema        string `yaml:"value.avro.schema" help:"avro value converter: connect (the schema AvroData derives from the column, as Debezium does) or registry (the payload's JSON is encoded with the schema registered for the subject: typed Avro without serialising in the application)"`
	ValueAvroVersionColumn string `yaml:"value.avro.schema.version.column" help:"avro value converter with value.avro.schema registry: a column naming the registry version to encode with (empty or NULL: the latest)"`
}

// DefaultConverters returns walrelay's raw format for keys, values and
// headers, with schemas.enable true as Kafka Connect's JsonConverter
// defaults it.
func DefaultConverters() Converters {
	return Converters{Key: "raw", KeySchemasEnable: true, Value: "raw", ValueSchemasEnable: true, Header: "raw", HeaderSchemasEnable: true,
		KeyAutoRegister: true, KeyLatestStrict: true, KeyConnectMetaData: true, KeyAvroSchema: "connect",
		ValueAutoRegister: true, ValueLatestStrict: true, ValueConnectMetaData: true, ValueAvroSchema: "connect"}
}

// convSpec is a parsed key or value converter.
type convSpec struct {
	conv     Converter
	schemas  bool          // JsonConverter's schemas.enable
	delegate Converter     // BinaryDataConverter's delegate; 0 when none
	avro     *AvroSettings // the avro converter's options; nil for the others
}

// parseConverters validates c.
func parseConverters(c Converters) (key, value convSpec, header HeaderConverter, err error) {
	parse := func(side, name, delegate string, schemas bool) (convSpec, error) {
		s := convSpec{schemas: schemas}
		var ok bool
		if s.conv, ok = converterNames[strings.TrimSpace(name)]; !ok {
			return s, fmt.Errorf("converter %s %q: want raw, string, json, bytes, binary or avro, or a Kafka Connect converter class walrelay implements", side, name)
		}
		ao := c.avroOptions(side == "key")
		if s.conv == ConvAvro {
			var err error
			if s.avro, err = parseAvro(ao); err != nil {
				return s, err
			}
		} else if opt := ao.set(); opt != "" {
			return s, fmt.Errorf("converter %s.%s: an avro converter option, but converter %s is %q", side, opt, side, name)
		}
		if d := strings.TrimSpace(delegate); d != "" {
			if s.conv != ConvBinary {
				return s, fmt.Errorf("converter %s.delegate.converter.type %q: only the binary converter takes a delegate", side, delegate)
			}
			if s.delegate, ok = converterNames[d]; !ok || s.delegate == ConvBinary || s.delegate == ConvRaw || s.delegate == ConvAvro {
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
		err = fmt.Errorf("converter header %q: want raw, simple, string or json, or their Kafka Connect class", c.Header)
	}
	if header == HeaderJSON && !c.HeaderSchemasEnable {
		header = HeaderJSONNoSchemas
	}
	return
}
