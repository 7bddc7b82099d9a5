package dbzimport

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
)

// nameAdjuster is one of Debezium's SchemaNameAdjusters
// (debezium-connector-common io/debezium/schema/SchemaNameAdjuster.java,
// validFullname, with debezium-api ReplacementFunction and
// io/debezium/schema/{UnicodeReplacementFunction,
// FieldNameUnderscoreReplacementFunction}.java): it replaces each UTF-16
// unit a name may not hold.
type nameAdjuster struct {
	unicode bool // _uXXXX instead of _; '_' itself is replaced
	field   bool // a field name: no '.'
}

func (a nameAdjuster) validFirst(c uint16) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || (!a.unicode && c == '_')
}

func (a nameAdjuster) validNonFirst(c uint16) bool {
	return a.validFirst(c) || c >= '0' && c <= '9' || (!a.field && c == '.')
}

func (a nameAdjuster) replace(c uint16) string {
	if !a.unicode {
		return "_"
	}
	hex := strconv.FormatUint(uint64(c), 16) // Integer.toHexString
	if len(hex) <= 2 {
		hex = "00" + hex
	}
	return "_u" + hex
}

// adjust is validFullname: a leading digit keeps itself after its
// replacement with the underscore adjusters ("1a" → "_1a").
func (a nameAdjuster) adjust(name string) string {
	units := utf16.Encode([]rune(name))
	var b strings.Builder
	for i, c := range units {
		switch {
		case i == 0 && a.validFirst(c), i > 0 && a.validNonFirst(c):
			b.WriteRune(rune(c))
		default:
			b.WriteString(a.replace(c))
			if i == 0 && !a.unicode && c >= '0' && c <= '9' {
				b.WriteRune(rune(c))
			}
		}
	}
	return b.String()
}

// adjusterModes are the values of schema.name.adjustment.mode and
// field.name.adjustment.mode that adjust (CommonConnectorConfig's
// SchemaNameAdjustmentMode and FieldNameAdjustmentMode).
var adjusterModes = map[string]nameAdjuster{"avro": {}, "avro_unicode": {unicode: true}}

// nameAdjustment maps schema.name.adjustment.mode and
// field.name.adjustment.mode: walrelay adjusts no name, so each is told
// by whether it changes what the router sends (design note
// docs/design/avro.md §6.3).
func (im *importer) nameAdjustment() {
	if v, ok := im.get("schema.name.adjustment.mode"); ok {
		mode := strings.ToLower(strings.TrimSpace(v))
		a, adjusts := adjusterModes[mode]
		switch {
		case mode == "none":
			im.ignore("schema.name.adjustment.mode", "Debezium's default")
		case !adjusts:
			im.drop("schema.name.adjustment.mode", "not none, avro or avro_unicode")
		case !im.hasEnvelope():
			im.ignore("schema.name.adjustment.mode", "it adjusts the name of the row's Connect schema, which only an envelope's schema name shows, and the router has no envelope placement")
		case len(im.tables) == 0:
			im.drop("schema.name.adjustment.mode", "walrelay adjusts no schema name: with "+mode+" Debezium may name the envelope's schema otherwise than walrelay does, and without postgres.table the import cannot tell")
		default:
			im.schemaNameAdjustment(a, mode)
		}
	}

	// With an Avro converter set on the connector, Debezium adjusts field
	// names when field.name.adjustment.mode is none
	// (CommonConnectorConfig.fieldNameAdjuster, isUsingAvroConverter):
	// the router options then name columns as adjusted.
	avroConv := false
	for _, k := range []string{"key.converter", "value.converter"} {
		avroConv = avroConv || strings.TrimSpace(im.conf[k]) == AvroConverterClass
	}
	v, set := im.get("field.name.adjustment.mode")
	mode := strings.ToLower(strings.TrimSpace(v))
	auto := !set || mode == "none"
	if auto {
		if !avroConv {
			if set {
				im.ignore("field.name.adjustment.mode", "Debezium's default")
			}
			return
		}
		mode = "avro"
	}
	if _, adjusts := adjusterModes[mode]; !adjusts {
		im.drop("field.name.adjustment.mode", "not none, avro or avro_unicode")
		return
	}
	why := "set to " + mode
	if auto {
		why = "none, and the connector sets Confluent's AvroConverter, with which Debezium adjusts field names as avro does (CommonConnectorConfig.fieldNameAdjuster)"
	}
	im.check("field.name.adjustment.mode", why+": Debezium renames columns whose names are not Avro names (letters, digits and _, not starting with a digit), and the router options name them as renamed; "+
		"walrelay reads each column by its Postgres name: if a column the router options name is spelt otherwise in Postgres (order-id for order_id), name it as Postgres does in router.*, with Debezium's name as the alias of a header or envelope placement")
}

// schemaNameAdjustment maps schema.name.adjustment.mode=mode (adjuster a)
// with an envelope placement: TableSchemaBuilder names each table's row
// schema adjust(<topic.prefix>.<schema>.<table>.Value), and the EventRouter
// puts the routing value before Value. walrelay adjusts no name, so the
// option is dropped as soon as one table's name changes.
func (im *importer) schemaNameAdjustment(a nameAdjuster, mode string) {
	var names []string
	for _, t := range im.tables {
		name := t
		if im.prefix != "" {
			name = im.prefix + "." + name
		}
		if adj := a.adjust(name + ".Value"); adj != name+".Value" {
			im.drop("schema.name.adjustment.mode", fmt.Sprintf("walrelay adjusts no schema name: Debezium names the envelope's schema %s<routing value>.Value, walrelay %s.<routing value>.Value, a different Connect schema name (and, with Avro, a different record name: a new schema in the registry)",
				strings.TrimSuffix(adj, "Value"), name))
			return
		}
		names = append(names, name)
	}
	if len(names) == 1 {
		im.ignore("schema.name.adjustment.mode", fmt.Sprintf("%s is a valid Avro name, which %s leaves as it is: walrelay, which adjusts no name, gives the envelope's schema the same name", names[0], mode))
		return
	}
	im.ignore("schema.name.adjustment.mode", fmt.Sprintf("%s are valid Avro names, which %s leaves as they are: walrelay, which adjusts no name, gives each table's envelope schema the same name", strings.Join(names, ", "), mode))
}
