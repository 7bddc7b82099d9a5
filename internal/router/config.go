package router

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/walrelay/walrelay/internal/connect"
	"github.com/walrelay/walrelay/internal/connect/avro"
)

// Debezium option names, used as YAML keys and in error messages.
const (
	optFieldEventID        = "table.field.event.id"
	optFieldEventKey       = "table.field.event.key"
	optFieldEventPayload   = "table.field.event.payload"
	optFieldEventTimestamp = "table.field.event.timestamp"
	optRouteByField        = "route.by.field"
	optRouteTopicRegex     = "route.topic.regex"
	optRouteTopicReplace   = "route.topic.replacement"
	optAdditionalPlacement = "table.fields.additional.placement"
	optInvalidOpBehavior   = "table.op.invalid.behavior"
	optFieldEventType      = "table.field.event.type"
	optSchemaVersion       = "table.field.event.schema.version"
	optAdditionalMissing   = "table.field.additional.missing"
	optExpandJSONPayload   = "table.expand.json.payload"
	optJSONNullBehavior    = "table.json.payload.null.behavior"
	optJSONEmptyArray      = "table.json.payload.empty.array.behavior"
	optTracingField        = "tracing.span.context.field"
	optTracingOperation    = "tracing.operation.name"
	optTracingFieldOnly    = "tracing.with.context.field.only"
	optType                = "type"
)

// EventRouterClass is the class name Kafka Connect's transforms.<name>.type
// gives Debezium's Outbox Event Router.
const EventRouterClass = "io.debezium.transforms.outbox.EventRouter"

// Config holds the Debezium Outbox Event Router options, with Debezium's
// names as YAML keys so users can copy settings. Start from DefaultConfig;
// New validates.
type Config struct {
	// FieldEventID is the column holding the event id, sent as header "id".
	// Required. Default "id".
	FieldEventID string `yaml:"table.field.event.id" help:"column holding the event id, sent as Kafka header id (consumers dedupe on it)"`
	// FieldEventKey is the column whose value is the record key. Empty means
	// records carry no key. Default "aggregateid".
	FieldEventKey string `yaml:"table.field.event.key" help:"column whose value is the record key (empty: no key)"`
	// FieldEventPayload is the column holding the event payload. Required.
	// Default "payload".
	FieldEventPayload string `yaml:"table.field.event.payload" help:"column holding the payload, sent as the record value (jsonb as its JSON text, bytea as raw bytes)"`
	// FieldEventTimestamp is a timestamptz, timestamp or date column giving
	// the record timestamp. Empty (the default) means the commit time.
	FieldEventTimestamp string `yaml:"table.field.event.timestamp" help:"timestamptz/timestamp/date column giving the record timestamp (empty: the transaction commit time)"`
	// RouteByField is the column whose value routes the event to a topic.
	// Required. Default "aggregatetype".
	RouteByField string `yaml:"route.by.field" help:"column whose value routes the event to a topic"`
	// RouteTopicRegex must match the whole route.by.field value for the
	// replacement to apply. Default "(?<routedByValue>.*)".
	RouteTopicRegex string `yaml:"route.topic.regex" help:"regex that must match the whole route.by.field value for the replacement to apply"`
	// RouteTopicReplacement is the topic in Java replacement syntax ($1,
	// ${name}, \ escapes). Required. Default "outbox.event.${routedByValue}".
	RouteTopicReplacement string `yaml:"route.topic.replacement" help:"topic name, Java replacement syntax ($1, ${name})"`
	// AdditionalPlacement lists extra columns as
	// "column:header|envelope|partition[:alias]", comma separated. Default "".
	AdditionalPlacement string `yaml:"table.fields.additional.placement" help:"extra columns as column:header|envelope|partition[:alias], comma-separated"`
	// TombstoneOnEmptyPayload sends a null value when the payload is NULL or
	// empty. Default false.
	TombstoneOnEmptyPayload bool `yaml:"route.tombstone.on.empty.payload" help:"send a null value (tombstone) when the payload is NULL or empty"`
	// InvalidOpBehavior is what to do with an UPDATE of the outbox table:
	// "warn" (skip, log a warning), "error" (skip, log an error) or "fatal"
	// (stop). Case-insensitive. Default "warn".
	InvalidOpBehavior string `yaml:"table.op.invalid.behavior" help:"an UPDATE of the outbox: warn or error (skip and log) or fatal (stop); DELETEs are ignored"`
	// FieldEventType is accepted because Debezium defines it (default
	// "type"), but Debezium's router does not read it, and neither does
	// walrelay: a type header is the placement type:header:eventType.
	FieldEventType string `yaml:"table.field.event.type" help:"accepted for Debezium compatibility and unused, as in Debezium (put the type in a header with table.fields.additional.placement type:header:eventType)"`
	// FieldEventSchemaVersion is an integer column whose value becomes the
	// version of the envelope's Connect schema (JsonConverter with schemas,
	// envelope placements only, as in Debezium). Default "".
	FieldEventSchemaVersion string `yaml:"table.field.event.schema.version" help:"int column giving the version of the envelope's Connect schema (json converter with schemas and envelope placements only, as in Debezium)"`
	// AdditionalMissing is what to do when a table.fields.additional.placement
	// column is not in the table: "error" (the default: the relay does not
	// start) or "ignore" (the placement is skipped). Case-insensitive.
	AdditionalMissing string `yaml:"table.field.additional.missing" help:"a table.fields.additional.placement column the table lacks: error (refuse to start) or ignore (skip that placement)"`
	// ExpandJSONPayload turns a payload whose text starts with { or [ into
	// Connect data with a schema inferred from it, as Debezium's
	// table.expand.json.payload does; it changes what the json converter
	// writes. Default false.
	ExpandJSONPayload bool `yaml:"table.expand.json.payload" help:"with the json converter, send a JSON payload as a JSON structure with an inferred schema instead of a JSON string (Debezium's JsonSchemaData)"`
	// JSONPayloadNullBehavior is how table.expand.json.payload treats JSON
	// nulls: "ignore" (drop the field) or "optional_bytes". Default "ignore".
	JSONPayloadNullBehavior string `yaml:"table.json.payload.null.behavior" help:"table.expand.json.payload and JSON nulls: ignore (drop the field) or optional_bytes (keep it as optional bytes)"`
	// JSONPayloadEmptyArrayBehavior is how table.expand.json.payload treats
	// empty arrays: "ignore" (drop the field) or "optional_string". Default
	// "ignore".
	JSONPayloadEmptyArrayBehavior string `yaml:"table.json.payload.empty.array.behavior" help:"table.expand.json.payload and empty arrays: ignore (drop the field) or optional_string (keep it as an array of optional strings)"`
	// TracingSpanContextField is the column holding a serialized span
	// context (java.util.Properties text, e.g. traceparent=00-...). Its
	// W3C entries are sent as headers. Default "tracingspancontext".
	TracingSpanContextField string `yaml:"tracing.span.context.field" help:"column holding the writer's span context as java.util.Properties text; its traceparent and tracestate are sent as headers"`
	// TracingOperationName is accepted for Debezium compatibility: Debezium
	// names the span it creates with it, and walrelay creates no spans.
	TracingOperationName string `yaml:"tracing.operation.name" help:"accepted for Debezium compatibility; walrelay creates no spans of its own, so nothing is named with it"`
	// TracingWithContextFieldOnly is accepted for Debezium compatibility:
	// walrelay only ever forwards a span context the row carries.
	TracingWithContextFieldOnly bool `yaml:"tracing.with.context.field.only" help:"accepted for Debezium compatibility; walrelay only ever forwards a span context the row carries"`
	// Type is the transform's class, as Kafka Connect's
	// transforms.<name>.type gives it; empty or Debezium's EventRouter.
	Type string `yaml:"type" help:"transform class as pasted from transforms.<name>.type; empty or io.debezium.transforms.outbox.EventRouter"`
}

// DefaultConfig returns Debezium's defaults.
func DefaultConfig() Config {
	return Config{
		FieldEventID:          "id",
		FieldEventKey:         "aggregateid",
		FieldEventPayload:     "payload",
		RouteByField:          "aggregatetype",
		RouteTopicRegex:       "(?<routedByValue>.*)",
		RouteTopicReplacement: "outbox.event.${routedByValue}",
		InvalidOpBehavior:     "warn",

		FieldEventType:                "type",
		AdditionalMissing:             "error",
		JSONPayloadNullBehavior:       "ignore",
		JSONPayloadEmptyArrayBehavior: "ignore",
		TracingSpanContextField:       "tracingspancontext",
		TracingOperationName:          "debezium-read",
	}
}

// OpBehavior is the parsed table.op.invalid.behavior: what the relay does when
// the outbox table sees an UPDATE. (Debezium ignores DELETEs silently, since
// deleting the row right after inserting it is the usual outbox practice.)
type OpBehavior uint8

// OpBehavior values.
const (
	// OpWarn skips the change and logs a warning.
	OpWarn OpBehavior = iota + 1
	// OpError skips the change and logs an error.
	OpError
	// OpFatal stops the relay.
	OpFatal
)

// opBehaviorNames is indexed by OpBehavior; immutable.
var opBehaviorNames = [...]string{OpWarn: "warn", OpError: "error", OpFatal: "fatal"}

// String returns the option value: "warn", "error" or "fatal".
func (b OpBehavior) String() string {
	if b > 0 && int(b) < len(opBehaviorNames) {
		return opBehaviorNames[b]
	}
	return fmt.Sprintf("OpBehavior(%d)", uint8(b))
}

// placement is where an additional column goes.
type placement uint8

const (
	placeHeader placement = iota + 1
	placeEnvelope
	placePartition
)

// additional is one parsed table.fields.additional.placement entry.
type additional struct {
	column string
	alias  string
	place  placement
}

// replPart is one piece of a compiled replacement: literal text, or the text
// of capture group `group` when group >= 0.
type replPart struct {
	lit   string
	group int
}

// Router is a compiled Config. It is immutable and safe for concurrent use.
type Router struct {
	cfg        Config
	conv       Converters
	keyConv    convSpec
	valueConv  convSpec
	whole      *regexp.Regexp // route.topic.regex anchored at both ends (Matcher.matches)
	find       *regexp.Regexp // route.topic.regex as written (Matcher.replaceFirst)
	repl       []replPart
	additional []additional
	opBehavior OpBehavior
	envelope   bool // some placement is "envelope"

	// The converters other than raw; nil for raw.
	keyConverter, valueConverter connect.Converter
	// interner hands out the avro converter's schemas, one pointer per
	// schema text across the router's plans.
	interner *avro.Interner
	// avroRegistry: a side's avro converter has avro.schema registry.
	avroRegistry    bool
	headerConverter headerConverter

	ignoreMissing bool // table.field.additional.missing=ignore
	jsonNulls     bool // table.json.payload.null.behavior=optional_bytes
	emptyArrays   bool // table.json.payload.empty.array.behavior=optional_string
}

// New validates cfg and conv and compiles them. Errors name the option and
// its value.
func New(cfg Config, conv Converters) (*Router, error) {
	r := &Router{cfg: cfg, conv: conv}
	var err error
	var headerConv HeaderConverter
	if r.keyConv, r.valueConv, headerConv, err = parseConverters(conv); err != nil {
		return nil, err
	}
	r.interner = avro.NewInterner(0)
	r.keyConverter, r.valueConverter = r.keyConv.converter(r.interner), r.valueConv.converter(r.interner)
	r.headerConverter = headerConv.headerFunc()
	for _, req := range [...]struct{ opt, val string }{
		{optFieldEventID, cfg.FieldEventID},
		{optFieldEventPayload, cfg.FieldEventPayload},
		{optRouteByField, cfg.RouteByField},
	} {
		if req.val == "" {
			return nil, fmt.Errorf("%s %q: must name a column", req.opt, req.val)
		}
	}

	find, err := regexp.Compile(cfg.RouteTopicRegex)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", optRouteTopicRegex, cfg.RouteTopicRegex, err)
	}
	r.find = find
	// \A and \z keep their meaning whatever flags the user's pattern sets.
	if r.whole, err = regexp.Compile(`\A(?:` + cfg.RouteTopicRegex + `)\z`); err != nil {
		return nil, fmt.Errorf("%s %q: %w", optRouteTopicRegex, cfg.RouteTopicRegex, err)
	}

	if cfg.RouteTopicReplacement == "" {
		return nil, fmt.Errorf("%s %q: must not be empty", optRouteTopicReplace, cfg.RouteTopicReplacement)
	}
	if r.repl, err = compileReplacement(cfg.RouteTopicReplacement, find); err != nil {
		return nil, fmt.Errorf("%s %q: %w", optRouteTopicReplace, cfg.RouteTopicReplacement, err)
	}

	if r.additional, err = parsePlacements(cfg.AdditionalPlacement); err != nil {
		return nil, fmt.Errorf("%s %q: %w", optAdditionalPlacement, cfg.AdditionalPlacement, err)
	}
	for _, a := range r.additional {
		if a.place == placeEnvelope {
			r.envelope = true
		}
	}
	if err := r.checkAvro(); err != nil {
		return nil, err
	}
	r.avroRegistry = r.keyConv.avro != nil && r.keyConv.avro.Registry || r.valueConv.avro != nil && r.valueConv.avro.Registry

	switch strings.ToLower(strings.TrimSpace(cfg.InvalidOpBehavior)) {
	case "warn":
		r.opBehavior = OpWarn
	case "error":
		r.opBehavior = OpError
	case "fatal":
		r.opBehavior = OpFatal
	default:
		return nil, fmt.Errorf("%s %q: want warn, error or fatal", optInvalidOpBehavior, cfg.InvalidOpBehavior)
	}

	for _, e := range [...]struct {
		opt, val, no, yes string
		dst               *bool
	}{
		{optAdditionalMissing, cfg.AdditionalMissing, "error", "ignore", &r.ignoreMissing},
		{optJSONNullBehavior, cfg.JSONPayloadNullBehavior, "ignore", "optional_bytes", &r.jsonNulls},
		{optJSONEmptyArray, cfg.JSONPayloadEmptyArrayBehavior, "ignore", "optional_string", &r.emptyArrays},
	} {
		// Debezium's enums trim and ignore case; an empty value takes the default.
		switch v := strings.ToLower(strings.TrimSpace(e.val)); v {
		case e.no, "":
		case e.yes:
			*e.dst = true
		default:
			return nil, fmt.Errorf("%s %q: want %s or %s", e.opt, e.val, e.no, e.yes)
		}
	}
	if t := strings.TrimSpace(cfg.Type); t != "" && t != EventRouterClass {
		return nil, fmt.Errorf("%s %q: walrelay implements %s only", optType, cfg.Type, EventRouterClass)
	}
	return r, nil
}

// InvalidOpBehavior returns the parsed table.op.invalid.behavior.
func (r *Router) InvalidOpBehavior() OpBehavior { return r.opBehavior }

// Config returns the configuration r was built from.
func (r *Router) Config() Config { return r.cfg }

// NeedsCatalog reports whether Bind uses what only the catalog knows of a
// column (NOT NULL, DEFAULT): true when a converter other than raw writes
// Connect schemas.
func (r *Router) NeedsCatalog() bool {
	return r.keyConverter != nil || r.valueConverter != nil || r.headerConverter != nil
}

// parsePlacements parses table.fields.additional.placement.
func parsePlacements(s string) ([]additional, error) {
	var out []additional
	partition := ""
	envelopeAliases := map[string]bool{}
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		parts := strings.Split(entry, ":")
		if len(parts) != 2 && len(parts) != 3 {
			return nil, fmt.Errorf("entry %q: want column:placement or column:placement:alias", entry)
		}
		a := additional{column: strings.TrimSpace(parts[0])}
		if a.column == "" {
			return nil, fmt.Errorf("entry %q: empty column name", entry)
		}
		switch p := strings.ToLower(strings.TrimSpace(parts[1])); p {
		case "header":
			a.place = placeHeader
		case "envelope":
			a.place = placeEnvelope
		case "partition":
			a.place = placePartition
		default:
			return nil, fmt.Errorf("entry %q: unknown placement %q: want header, envelope or partition", entry, parts[1])
		}
		a.alias = a.column
		if len(parts) == 3 && strings.TrimSpace(parts[2]) != "" {
			a.alias = strings.TrimSpace(parts[2])
		}
		switch a.place {
		case placePartition:
			if partition != "" {
				return nil, fmt.Errorf("entry %q: column %q is already placed in partition; only one may be", entry, partition)
			}
			partition = a.column
		case placeEnvelope:
			if a.alias == envelopePayloadField {
				return nil, fmt.Errorf("entry %q: envelope field %q is the payload's; choose an alias", entry, a.alias)
			}
			if envelopeAliases[a.alias] {
				return nil, fmt.Errorf("entry %q: envelope field %q appears twice", entry, a.alias)
			}
			envelopeAliases[a.alias] = true
		}
		out = append(out, a)
	}
	return out, nil
}

// compileReplacement parses a java.util.regex.Matcher replacement string, as
// Kafka's RegexRouter passes it to replaceFirst, checking the group references
// against re up front (Java checks them on each call).
func compileReplacement(s string, re *regexp.Regexp) ([]replPart, error) {
	var parts []replPart
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, replPart{lit: lit.String(), group: -1})
			lit.Reset()
		}
	}
	groups := re.NumSubexp()
	for i := 0; i < len(s); {
		switch c := s[i]; c {
		case '\\':
			i++
			if i == len(s) {
				return nil, errors.New("character to be escaped is missing after '\\'")
			}
			_, n := utf8.DecodeRuneInString(s[i:])
			lit.WriteString(s[i : i+n])
			i += n
		case '$':
			i++
			if i == len(s) {
				return nil, errors.New("illegal group reference: group index is missing after '$'")
			}
			var ref int
			if s[i] == '{' {
				i++
				start := i
				for i < len(s) && isASCIIAlnum(s[i]) {
					i++
				}
				name := s[start:i]
				switch {
				case name == "":
					return nil, errors.New("named capturing group has 0 length name")
				case i == len(s) || s[i] != '}':
					return nil, fmt.Errorf("named capturing group ${%s is missing trailing '}'", name)
				case isDigit(name[0]):
					return nil, fmt.Errorf("capturing group name {%s} starts with digit character", name)
				}
				i++
				if ref = re.SubexpIndex(name); ref < 0 {
					return nil, fmt.Errorf("no group with name {%s} in %s", name, optRouteTopicRegex)
				}
			} else {
				if !isDigit(s[i]) {
					return nil, fmt.Errorf("illegal group reference '$%c'", s[i])
				}
				ref = int(s[i] - '0')
				i++
				// Java takes further digits while the number stays a valid group.
				for i < len(s) && isDigit(s[i]) {
					next := ref*10 + int(s[i]-'0')
					if next > groups {
						break
					}
					ref = next
					i++
				}
				if ref > groups {
					return nil, fmt.Errorf("no group %d in %s (it has %d)", ref, optRouteTopicRegex, groups)
				}
			}
			flush()
			parts = append(parts, replPart{group: ref})
		default:
			lit.WriteByte(c)
			i++
		}
	}
	flush()
	return parts, nil
}

// topicFor applies the RegexRouter to a route.by.field value: when the regex
// matches all of v, the first match is replaced by the replacement; otherwise
// v is the topic.
func (r *Router) topicFor(v string) string {
	if !r.whole.MatchString(v) {
		return v
	}
	m := r.find.FindStringSubmatchIndex(v)
	if m == nil { // unreachable: a whole match implies some match
		return v
	}
	var b strings.Builder
	b.WriteString(v[:m[0]])
	for _, p := range r.repl {
		if p.group < 0 {
			b.WriteString(p.lit)
			continue
		}
		if s, e := m[2*p.group], m[2*p.group+1]; s >= 0 {
			b.WriteString(v[s:e])
		}
	}
	b.WriteString(v[m[1]:])
	return b.String()
}

// validateTopic applies Kafka's topic name rules (Topic.validate).
func validateTopic(t string) error {
	const maxLen = 249
	switch {
	case t == "":
		return errors.New("topic name is empty")
	case t == "." || t == "..":
		return fmt.Errorf("topic name %q is not allowed by Kafka", t)
	case len(t) > maxLen:
		return fmt.Errorf("topic name is %d bytes, over Kafka's limit of %d", len(t), maxLen)
	}
	for i := 0; i < len(t); i++ {
		if c := t[i]; !isASCIIAlnum(c) && c != '.' && c != '_' && c != '-' {
			r, _ := utf8.DecodeRuneInString(t[i:])
			return fmt.Errorf("topic name %q has character %q outside [a-zA-Z0-9._-]", t, r)
		}
	}
	return nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isASCIIAlnum(c byte) bool {
	return isDigit(c) || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

// Inert is an option walrelay accepts, as Debezium does, but that changes
// nothing in what walrelay sends, with the reason.
type Inert struct {
	Option, Value, Reason string
}

// Inert lists the options set to something other than their default that
// have no effect, so the caller can say so once at startup rather than let
// a pasted Debezium setting pass unnoticed.
func (r *Router) Inert() []Inert {
	def := DefaultConfig()
	var out []Inert
	if c := r.cfg.FieldEventType; c != def.FieldEventType {
		out = append(out, Inert{optFieldEventType, c,
			"Debezium's router does not read it either; to send the type as a header, add type:header:eventType to " + optAdditionalPlacement})
	}
	if c := r.cfg.TracingOperationName; c != def.TracingOperationName {
		out = append(out, Inert{optTracingOperation, c,
			"it names the span Debezium starts; walrelay starts no spans and forwards the row's own trace context"})
	}
	if r.cfg.TracingWithContextFieldOnly != def.TracingWithContextFieldOnly {
		out = append(out, Inert{optTracingFieldOnly, "true",
			"walrelay only ever forwards a trace context the row carries, which is what this setting asks"})
	}
	if r.cfg.FieldEventSchemaVersion != "" && !(r.envelope && (r.valueConv.conv == ConvJSON && r.valueConv.schemas || r.valueConv.conv == ConvAvro)) {
		out = append(out, Inert{optSchemaVersion, r.cfg.FieldEventSchemaVersion,
			"it sets the version of the envelope's Connect schema, which only the json value converter with schemas and the avro value converter write, with envelope placements"})
	}
	for _, e := range [...]struct {
		side string
		on   bool
	}{{"key", r.conv.KeyEnhancedAvro && r.keyConv.avro != nil}, {"value", r.conv.ValueEnhancedAvro && r.valueConv.avro != nil}} {
		if e.on {
			out = append(out, Inert{"converter." + e.side + ".enhanced.avro.schema.support", "true",
				"AvroData reads it only for Connect schemas carrying Confluent's enum parameters, which the outbox router never builds"})
		}
	}
	if r.cfg.ExpandJSONPayload && r.valueConv.conv == ConvRaw {
		out = append(out, Inert{optExpandJSONPayload, "true",
			"the raw value converter already sends a JSON payload as JSON; the option changes what the json and string converters write"})
	}
	return out
}
