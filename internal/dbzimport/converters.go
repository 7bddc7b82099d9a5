package dbzimport

import (
	"fmt"
	"strings"
)

// converterClasses maps Kafka Connect's converter classes onto walrelay's
// short names.
var converterClasses = map[string]string{
	"org.apache.kafka.connect.storage.StringConverter":       "string",
	"org.apache.kafka.connect.json.JsonConverter":            "json",
	"org.apache.kafka.connect.converters.ByteArrayConverter": "bytes",
	"io.debezium.converters.BinaryDataConverter":             "binary",
}

var headerConverterClasses = map[string]string{
	"org.apache.kafka.connect.storage.SimpleHeaderConverter": "simple",
	"org.apache.kafka.connect.storage.StringConverter":       "string",
	"org.apache.kafka.connect.json.JsonConverter":            "json",
}

// workerDefaults says where the worker defaults the import assumes come
// from: config/connect-distributed.properties in apache/kafka
// (key.converter and value.converter JsonConverter, their schemas.enable
// true), connect-base/3.7/docker-entrypoint.sh in debezium/container-images
// (commit 07fabf0, lines 36-37: KEY_CONVERTER and VALUE_CONVERTER default to
// JsonConverter; schemas.enable is left at JsonConverter's default, true),
// and Kafka Connect's WorkerConfig (header.converter defaults to
// SimpleHeaderConverter).
const workerDefaults = "Kafka's config/connect-distributed.properties sets key.converter and value.converter to JsonConverter with schemas.enable=true, " +
	"Debezium's container image (connect-base docker-entrypoint.sh) sets both to JsonConverter, whose schemas.enable defaults to true, " +
	"and Kafka Connect's header.converter defaults to SimpleHeaderConverter"

// converters maps key.converter, value.converter and header.converter
// (and their schemas.enable and delegate.converter.type) onto converter.*.
// A converter the connector does not set is the worker's, which the
// connector config does not show: the import assumes the usual worker
// defaults and says so.
func (im *importer) converters() {
	var assumed []string
	for _, side := range []string{"key", "value"} {
		opt := side + ".converter"
		class, ok := im.get(opt)
		class = strings.TrimSpace(class)
		conv := "json"
		switch {
		case !ok:
			assumed = append(assumed, opt)
			im.check(opt, fmt.Sprintf("not in the connector config: the Kafka Connect worker's %s applies, which the import cannot see; converter.%s assumes JsonConverter with schemas.enable=true (what Kafka's connect-distributed.properties and Debezium's container image set): CHECK %s and %s.schemas.enable in the worker's properties (CONNECT_%s_CONVERTER and CONNECT_%s_CONVERTER_SCHEMAS_ENABLE in a container's environment)",
				opt, side, opt, opt, strings.ToUpper(side), strings.ToUpper(side)))
		case converterClasses[class] != "":
			conv = converterClasses[class]
		case class == AvroConverterClass:
			conv = "avro"
		default:
			im.drop(opt, "walrelay implements StringConverter, JsonConverter, ByteArrayConverter, Debezium's BinaryDataConverter and Confluent's AvroConverter; converter."+side+" keeps walrelay's raw format")
			conv = ""
		}
		schemas := true
		if v, set := im.get(opt + ".schemas.enable"); set {
			b, err := parseBool(v)
			switch {
			case err != nil:
				im.drop(opt+".schemas.enable", "not true or false")
			case conv == "json":
				schemas = b
			default:
				im.ignore(opt+".schemas.enable", "only JsonConverter reads it")
			}
		}
		delegate := ""
		if v, set := im.get(opt + ".delegate.converter.type"); set {
			d := converterClasses[strings.TrimSpace(v)]
			switch {
			case conv != "binary":
				im.ignore(opt+".delegate.converter.type", "only BinaryDataConverter reads it")
			case d == "" || d == "binary":
				im.drop(opt+".delegate.converter.type", "walrelay's binary converter delegates to StringConverter, JsonConverter or ByteArrayConverter only")
			default:
				delegate = d
			}
		}
		if v, set := im.get(opt + ".delegate.converter.type.schemas.enable"); set {
			b, err := parseBool(v)
			switch {
			case err != nil:
				im.drop(opt+".delegate.converter.type.schemas.enable", "not true or false")
			case conv == "binary" && delegate == "json":
				schemas = b
			default:
				im.ignore(opt+".delegate.converter.type.schemas.enable", "only a JsonConverter delegate of BinaryDataConverter reads it")
			}
		}
		if conv == "avro" {
			at := len(im.settings)
			im.set("converter."+side, conv, "")
			im.settings[at].comment = im.avro(side, im.hasEnvelope())
		}
		for _, k := range im.keys(opt + ".") {
			if !im.used[k] {
				im.drop(k, "a setting of the "+side+" converter walrelay does not take")
			}
		}
		if conv == "" || conv == "avro" {
			continue
		}
		comment := fmt.Sprintf("%s %s.", opt, class)
		if !ok {
			comment = ""
		}
		im.set("converter."+side, conv, comment)
		if conv == "json" || delegate == "json" {
			im.set("converter."+side+".schemas.enable", schemas, "")
		}
		if delegate != "" {
			im.set("converter."+side+".delegate.converter.type", delegate, "")
		}
	}
	class, ok := im.get("header.converter")
	class = strings.TrimSpace(class)
	h := headerConverterClasses[class]
	switch {
	case !ok:
		assumed = append(assumed, "header.converter")
		im.check("header.converter", "not in the connector config, so the Kafka Connect worker's header.converter applies, which the import cannot see; converter.header assumes SimpleHeaderConverter, Kafka Connect's default: CHECK header.converter in the worker's properties")
		im.set("converter.header", "simple", "")
	case h == "":
		im.drop("header.converter", "walrelay implements SimpleHeaderConverter, StringConverter and JsonConverter for headers; converter.header keeps walrelay's raw format")
	default:
		im.set("converter.header", h, "header.converter "+class+".")
	}
	if v, set := im.get("header.converter.schemas.enable"); set {
		// JsonConverter as a header converter reads its own schemas.enable
		// (apache/kafka JsonConverter.configure; fromConnectHeader is
		// fromConnectData).
		b, err := parseBool(v)
		switch {
		case err != nil:
			im.drop("header.converter.schemas.enable", "not true or false")
		case h == "json":
			im.set("converter.header.schemas.enable", b, "")
		default:
			im.ignore("header.converter.schemas.enable", "only JsonConverter reads it")
		}
	}
	for _, k := range im.keys("header.converter.") {
		if !im.used[k] {
			im.drop(k, "a setting of the header converter walrelay does not take")
		}
	}
	if im.prefix != "" {
		im.set("converter.topic.prefix", im.prefix, "topic.prefix: Debezium names an envelope's Connect schema after it.")
	}
	if len(assumed) > 0 {
		// The comment goes on the first converter setting.
		for i := range im.settings {
			if strings.HasPrefix(im.settings[i].path, "converter.") {
				im.settings[i].comment = strings.TrimSpace(fmt.Sprintf("CHECK THE CONVERTERS: %s %s not in the connector config, so the Kafka Connect worker's settings apply, which the connector config does not show. "+
					"This assumes what Kafka and Debezium's container image ship (%s). If your worker sets others (debezium-examples/outbox sets key.converter.schemas.enable=false and value.converter.schemas.enable=false), "+
					"correct the settings below: the bytes and partitions your consumers see depend on them.\n\n%s",
					joinAnd(assumed), isAre(len(assumed)), workerDefaults, im.settings[i].comment))
				break
			}
		}
	}
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// joinAnd joins words as "a, b and c".
func joinAnd(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}
