package router

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestDefaultConfigMatchesDebezium(t *testing.T) {
	// Values from Debezium's EventRouterConfigDefinition.
	want := Config{
		FieldEventID:            "id",
		FieldEventKey:           "aggregateid",
		FieldEventPayload:       "payload",
		FieldEventTimestamp:     "",
		RouteByField:            "aggregatetype",
		RouteTopicRegex:         "(?<routedByValue>.*)",
		RouteTopicReplacement:   "outbox.event.${routedByValue}",
		AdditionalPlacement:     "",
		TombstoneOnEmptyPayload: false,
		InvalidOpBehavior:       "warn",
		// EventRouterConfigDefinition.FIELD_EVENT_TYPE, FIELDS_ADDITIONAL_MISSING,
		// TABLE_JSON_PAYLOAD_*; ActivateTracingSpan's DEFAULT_TRACING_*.
		FieldEventType:                "type",
		FieldEventSchemaVersion:       "",
		AdditionalMissing:             "error",
		ExpandJSONPayload:             false,
		JSONPayloadNullBehavior:       "ignore",
		JSONPayloadEmptyArrayBehavior: "ignore",
		TracingSpanContextField:       "tracingspancontext",
		TracingOperationName:          "debezium-read",
		TracingWithContextFieldOnly:   false,
	}
	if got := DefaultConfig(); got != want {
		t.Errorf("DefaultConfig() = %+v, want %+v", got, want)
	}
	r, err := New(DefaultConfig(), DefaultConverters())
	if err != nil {
		t.Fatalf("New(DefaultConfig(), DefaultConverters()): %v", err)
	}
	if r.InvalidOpBehavior() != OpWarn || r.Config() != want {
		t.Errorf("router from defaults: behavior %v, config %+v", r.InvalidOpBehavior(), r.Config())
	}
}

func TestConfigYAMLKeysAreDebeziumNames(t *testing.T) {
	want := map[string]string{
		"FieldEventID":            "table.field.event.id",
		"FieldEventKey":           "table.field.event.key",
		"FieldEventPayload":       "table.field.event.payload",
		"FieldEventTimestamp":     "table.field.event.timestamp",
		"RouteByField":            "route.by.field",
		"RouteTopicRegex":         "route.topic.regex",
		"RouteTopicReplacement":   "route.topic.replacement",
		"AdditionalPlacement":     "table.fields.additional.placement",
		"TombstoneOnEmptyPayload": "route.tombstone.on.empty.payload",
		"InvalidOpBehavior":       "table.op.invalid.behavior",

		"FieldEventType":                "table.field.event.type",
		"FieldEventSchemaVersion":       "table.field.event.schema.version",
		"AdditionalMissing":             "table.field.additional.missing",
		"ExpandJSONPayload":             "table.expand.json.payload",
		"JSONPayloadNullBehavior":       "table.json.payload.null.behavior",
		"JSONPayloadEmptyArrayBehavior": "table.json.payload.empty.array.behavior",
		"TracingSpanContextField":       "tracing.span.context.field",
		"TracingOperationName":          "tracing.operation.name",
		"TracingWithContextFieldOnly":   "tracing.with.context.field.only",
		"Type":                          "type",
	}
	typ := reflect.TypeFor[Config]()
	if typ.NumField() != len(want) {
		t.Fatalf("Config has %d fields, test knows %d", typ.NumField(), len(want))
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		if got := f.Tag.Get("yaml"); got != want[f.Name] {
			t.Errorf("field %s: yaml key %q, want %q", f.Name, got, want[f.Name])
		}
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name    string
		cfg     func(*Config)
		wantErr string
	}{
		{name: "bad regex", cfg: func(c *Config) { c.RouteTopicRegex = "(" },
			wantErr: "route.topic.regex \"(\": error parsing regexp: missing closing ): `(`"},
		{name: "java lookahead unsupported", cfg: func(c *Config) { c.RouteTopicRegex = "(?=a)a" },
			wantErr: "route.topic.regex \"(?=a)a\": error parsing regexp: invalid or unsupported Perl syntax: `(?=`"},
		{name: "empty replacement", cfg: func(c *Config) { c.RouteTopicReplacement = "" },
			wantErr: `route.topic.replacement "": must not be empty`},
		{name: "replacement unknown name", cfg: func(c *Config) { c.RouteTopicReplacement = "t.${nope}" },
			wantErr: `route.topic.replacement "t.${nope}": no group with name {nope} in route.topic.regex`},
		{name: "replacement unknown number", cfg: func(c *Config) { c.RouteTopicReplacement = "t.$2" },
			wantErr: `route.topic.replacement "t.$2": no group 2 in route.topic.regex (it has 1)`},
		{name: "replacement trailing dollar", cfg: func(c *Config) { c.RouteTopicReplacement = "t$" },
			wantErr: `route.topic.replacement "t$": illegal group reference: group index is missing after '$'`},
		{name: "replacement trailing backslash", cfg: func(c *Config) { c.RouteTopicReplacement = `t\` },
			wantErr: `route.topic.replacement "t\\": character to be escaped is missing after '\'`},
		{name: "replacement dollar letter", cfg: func(c *Config) { c.RouteTopicReplacement = "$x" },
			wantErr: `route.topic.replacement "$x": illegal group reference '$x'`},
		{name: "replacement empty name", cfg: func(c *Config) { c.RouteTopicReplacement = "${}" },
			wantErr: `route.topic.replacement "${}": named capturing group has 0 length name`},
		{name: "replacement unclosed name", cfg: func(c *Config) { c.RouteTopicReplacement = "${routedByValue" },
			wantErr: `route.topic.replacement "${routedByValue": named capturing group ${routedByValue is missing trailing '}'`},
		{name: "replacement underscore name", cfg: func(c *Config) {
			c.RouteTopicRegex = "(?<a_b>.*)"
			c.RouteTopicReplacement = "${a_b}"
		}, wantErr: `route.topic.replacement "${a_b}": named capturing group ${a is missing trailing '}'`},
		{name: "replacement digit name", cfg: func(c *Config) { c.RouteTopicReplacement = "${1a}" },
			wantErr: `route.topic.replacement "${1a}": capturing group name {1a} starts with digit character`},
		{name: "empty id column", cfg: func(c *Config) { c.FieldEventID = "" },
			wantErr: `table.field.event.id "": must name a column`},
		{name: "empty payload column", cfg: func(c *Config) { c.FieldEventPayload = "" },
			wantErr: `table.field.event.payload "": must name a column`},
		{name: "empty route column", cfg: func(c *Config) { c.RouteByField = "" },
			wantErr: `route.by.field "": must name a column`},
		{name: "placement missing kind", cfg: func(c *Config) { c.AdditionalPlacement = "type" },
			wantErr: `table.fields.additional.placement "type": entry "type": want column:placement or column:placement:alias`},
		{name: "placement too many parts", cfg: func(c *Config) { c.AdditionalPlacement = "a:header:b:c" },
			wantErr: `table.fields.additional.placement "a:header:b:c": entry "a:header:b:c": want column:placement or column:placement:alias`},
		{name: "placement unknown kind", cfg: func(c *Config) { c.AdditionalPlacement = "type:header,type:body" },
			wantErr: `table.fields.additional.placement "type:header,type:body": entry "type:body": unknown placement "body": want header, envelope or partition`},
		{name: "placement empty column", cfg: func(c *Config) { c.AdditionalPlacement = ":header" },
			wantErr: `table.fields.additional.placement ":header": entry ":header": empty column name`},
		{name: "placement two partitions", cfg: func(c *Config) { c.AdditionalPlacement = "a:partition,b:partition" },
			wantErr: `table.fields.additional.placement "a:partition,b:partition": entry "b:partition": column "a" is already placed in partition; only one may be`},
		{name: "placement envelope payload alias", cfg: func(c *Config) { c.AdditionalPlacement = "payload:envelope" },
			wantErr: `table.fields.additional.placement "payload:envelope": entry "payload:envelope": envelope field "payload" is the payload's; choose an alias`},
		{name: "placement envelope duplicate alias", cfg: func(c *Config) { c.AdditionalPlacement = "a:envelope:x,b:envelope:x" },
			wantErr: `table.fields.additional.placement "a:envelope:x,b:envelope:x": entry "b:envelope:x": envelope field "x" appears twice`},
		{name: "unknown op behavior", cfg: func(c *Config) { c.InvalidOpBehavior = "ignore" },
			wantErr: `table.op.invalid.behavior "ignore": want warn, error or fatal`},
		{name: "empty op behavior", cfg: func(c *Config) { c.InvalidOpBehavior = "" },
			wantErr: `table.op.invalid.behavior "": want warn, error or fatal`},
		{name: "unknown additional missing", cfg: func(c *Config) { c.AdditionalMissing = "warn" },
			wantErr: `table.field.additional.missing "warn": want error or ignore`},
		{name: "unknown json null behavior", cfg: func(c *Config) { c.JSONPayloadNullBehavior = "keep" },
			wantErr: `table.json.payload.null.behavior "keep": want ignore or optional_bytes`},
		{name: "unknown empty array behavior", cfg: func(c *Config) { c.JSONPayloadEmptyArrayBehavior = "optional_bytes" },
			wantErr: `table.json.payload.empty.array.behavior "optional_bytes": want ignore or optional_string`},
		{name: "another transform class", cfg: func(c *Config) { c.Type = "org.apache.kafka.connect.transforms.RegexRouter" },
			wantErr: `type "org.apache.kafka.connect.transforms.RegexRouter": walrelay implements io.debezium.transforms.outbox.EventRouter only`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.cfg(&cfg)
			r, err := New(cfg, DefaultConverters())
			if err == nil {
				t.Fatalf("New succeeded (%+v), want error %q", r, tc.wantErr)
			}
			if err.Error() != tc.wantErr {
				t.Errorf("New error\n got: %s\nwant: %s", err, tc.wantErr)
			}
		})
	}
}

func TestNewAccepts(t *testing.T) {
	tests := []struct {
		name       string
		cfg        func(*Config)
		behavior   OpBehavior
		placements []additional
	}{
		{name: "defaults", behavior: OpWarn},
		{name: "behavior error", cfg: func(c *Config) { c.InvalidOpBehavior = "error" }, behavior: OpError},
		{name: "behavior fatal mixed case and spaces", cfg: func(c *Config) { c.InvalidOpBehavior = " FATAL " }, behavior: OpFatal},
		{name: "placements with spaces, case and trailing comma", behavior: OpWarn,
			cfg: func(c *Config) {
				c.AdditionalPlacement = " type : Header : eventType , shard:PARTITION, meta:envelope:, "
			},
			placements: []additional{
				{column: "type", alias: "eventType", place: placeHeader},
				{column: "shard", alias: "shard", place: placePartition},
				{column: "meta", alias: "meta", place: placeEnvelope},
			}},
		{name: "same column in header and envelope", behavior: OpWarn,
			cfg: func(c *Config) { c.AdditionalPlacement = "type:header,type:envelope" },
			placements: []additional{
				{column: "type", alias: "type", place: placeHeader},
				{column: "type", alias: "type", place: placeEnvelope},
			}},
		{name: "empty regex", behavior: OpWarn, cfg: func(c *Config) { c.RouteTopicRegex = ""; c.RouteTopicReplacement = "x" }},
		{name: "no key, no timestamp", behavior: OpWarn, cfg: func(c *Config) { c.FieldEventKey = ""; c.FieldEventTimestamp = "" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			r, err := New(cfg, DefaultConverters())
			if err != nil {
				t.Fatal(err)
			}
			if r.InvalidOpBehavior() != tc.behavior {
				t.Errorf("behavior %v, want %v", r.InvalidOpBehavior(), tc.behavior)
			}
			if !reflect.DeepEqual(r.additional, tc.placements) {
				t.Errorf("placements %+v, want %+v", r.additional, tc.placements)
			}
		})
	}
}

func TestOpBehaviorString(t *testing.T) {
	for b, want := range map[OpBehavior]string{OpWarn: "warn", OpError: "error", OpFatal: "fatal", 0: "OpBehavior(0)", 9: "OpBehavior(9)"} {
		if got := b.String(); got != want {
			t.Errorf("OpBehavior(%d).String() = %q, want %q", uint8(b), got, want)
		}
	}
}

// TestTopicFor checks Java RegexRouter semantics: matches() on the whole
// value, then replaceFirst with Java replacement syntax.
func TestTopicFor(t *testing.T) {
	tests := []struct {
		name, regex, repl, value, want string
	}{
		{name: "default", regex: "(?<routedByValue>.*)", repl: "outbox.event.${routedByValue}", value: "order", want: "outbox.event.order"},
		{name: "python-style named group", regex: "(?P<x>.*)", repl: "t.${x}", value: "v", want: "t.v"},
		{name: "group zero", regex: "or.*", repl: "[$0]", value: "order", want: "[order]"},
		{name: "no whole match keeps value", regex: "ord", repl: "X", value: "order", want: "order"},
		{name: "escaped dollar and backslash", regex: "(.*)", repl: `\$1\\$1`, value: "v", want: `$1\v`},
		{name: "escaped letter is literal", regex: "(.*)", repl: `\n$1`, value: "v", want: "nv"},
		{name: "escaped multibyte rune", regex: "(.*)", repl: `\é$1`, value: "v", want: "év"},
		{name: "multi-digit ref stops at group count", regex: "(.*)", repl: "$10", value: "v", want: "v0"},
		{name: "multi-digit ref uses group 10", regex: "(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)", repl: "$10-$1", value: "abcdefghij", want: "j-a"},
		{name: "digits after named ref are literal", regex: "(?<g>.*)", repl: "${g}1", value: "v", want: "v1"},
		{name: "unmatched optional group is empty", regex: "(x)?(.*)", repl: "[$1]$2", value: "v", want: "[]v"},
		{name: "find keeps text after first match", regex: "a|ab", repl: "X", value: "ab", want: "Xb"},
		{name: "find keeps text before first match", regex: "x*y", repl: "Z", value: "xxy", want: "Z"},
		{name: "empty regex matches only empty", regex: "", repl: "X", value: "v", want: "v"},
		{name: "case flag in pattern", regex: "(?i)ORDER", repl: "orders", value: "Order", want: "orders"},
		{name: "newline not matched by dot", regex: "(.*)", repl: "t.$1", value: "a\nb", want: "a\nb"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.RouteTopicRegex, cfg.RouteTopicReplacement = tc.regex, tc.repl
			r, err := New(cfg, DefaultConverters())
			if err != nil {
				t.Fatal(err)
			}
			if got := r.topicFor(tc.value); got != tc.want {
				t.Errorf("topicFor(%q) = %q, want %q", tc.value, got, tc.want)
			}
		})
	}
}

func TestCompileReplacementParts(t *testing.T) {
	re := regexp.MustCompile(`(?<a>x)(y)`)
	got, err := compileReplacement(`p-${a}.$2\$`, re)
	if err != nil {
		t.Fatal(err)
	}
	want := []replPart{{lit: "p-", group: -1}, {group: 1}, {lit: ".", group: -1}, {group: 2}, {lit: "$", group: -1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parts %+v, want %+v", got, want)
	}
}

func TestValidateTopic(t *testing.T) {
	long := make([]byte, 249)
	for i := range long {
		long[i] = 'a'
	}
	tests := []struct {
		name, topic string
		ok          bool
	}{
		{name: "all legal characters", topic: "Ab9._-", ok: true},
		{name: "max length", topic: string(long), ok: true},
		{name: "too long", topic: string(long) + "a"},
		{name: "empty"},
		{name: "dot", topic: "."},
		{name: "dotdot", topic: ".."},
		{name: "three dots", topic: "...", ok: true},
		{name: "slash", topic: "a/b"},
		{name: "colon", topic: "a:b"},
		{name: "plus", topic: "a+b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := validateTopic(tc.topic); (err == nil) != tc.ok {
				t.Errorf("validateTopic(%q) = %v, want ok=%v", tc.topic, err, tc.ok)
			}
		})
	}
}

func TestBindMissingColumn(t *testing.T) {
	tests := []struct {
		name    string
		cfg     func(*Config)
		row     []col
		want    MissingColumnError
		wantMsg string
	}{
		{name: "id", row: without(baseRow(), "id"),
			want: MissingColumnError{Column: "id", Option: "table.field.event.id", Table: "public.outbox"}},
		{name: "key", row: without(baseRow(), "aggregateid"),
			want: MissingColumnError{Column: "aggregateid", Option: "table.field.event.key", Table: "public.outbox"}},
		{name: "payload", row: without(baseRow(), "payload"),
			want: MissingColumnError{Column: "payload", Option: "table.field.event.payload", Table: "public.outbox"}},
		{name: "route", row: without(baseRow(), "aggregatetype"),
			want: MissingColumnError{Column: "aggregatetype", Option: "route.by.field", Table: "public.outbox"}},
		{name: "timestamp", cfg: tsCol, row: baseRow(),
			want: MissingColumnError{Column: "created_at", Option: "table.field.event.timestamp", Table: "public.outbox"}},
		{name: "placement", cfg: func(c *Config) { c.AdditionalPlacement = "type:header,tenant:envelope" }, row: baseRow(),
			want: MissingColumnError{Column: "tenant", Option: "table.fields.additional.placement", Table: "public.outbox"}},
		{name: "case differs", cfg: func(c *Config) { c.FieldEventKey = "aggregateId" }, row: baseRow(),
			want:    MissingColumnError{Column: "aggregateId", Option: "table.field.event.key", Table: "public.outbox", Suggestion: "aggregateid"},
			wantMsg: `binding table "public.outbox": column "aggregateId" named by table.field.event.key does not exist (did you mean "aggregateid"?)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			r, err := New(cfg, DefaultConverters())
			if err != nil {
				t.Fatal(err)
			}
			p, err := r.Bind(relation(tc.row))
			var me *MissingColumnError
			if !errors.As(err, &me) {
				t.Fatalf("Bind = %v, %v; want *MissingColumnError", p, err)
			}
			if *me != tc.want {
				t.Errorf("error %+v, want %+v", *me, tc.want)
			}
			if c, ok := ClassOf(fmt.Errorf("starting: %w", err)); !ok || c != ClassColumnMissing {
				t.Errorf("ClassOf = %v, %v; want column_missing", c, ok)
			}
			if tc.wantMsg != "" && err.Error() != tc.wantMsg {
				t.Errorf("message\n got: %s\nwant: %s", err, tc.wantMsg)
			}
		})
	}
}

func TestErrorClass(t *testing.T) {
	want := map[ErrorClass]string{
		ClassRoutingValueMissing: "routing_value_missing",
		ClassTopicInvalid:        "topic_invalid",
		ClassPayloadInvalid:      "payload_invalid",
		ClassColumnMissing:       "column_missing",
		ClassRecordTooLarge:      "record_too_large",
		ClassTopicRejected:       "topic_rejected",
		ClassSchemaRejected:      "schema_rejected",
	}
	for c, name := range want {
		if c.String() != name {
			t.Errorf("%d.String() = %q, want %q", uint8(c), c.String(), name)
		}
		got, err := ParseErrorClass(name)
		if err != nil || got != c {
			t.Errorf("ParseErrorClass(%q) = %v, %v", name, got, err)
		}
	}
	// relay.on_error's classes: every one but column_missing, in the
	// order of its options (config keys, metric series).
	var onError []string
	for _, c := range OnErrorClasses() {
		onError = append(onError, c.String())
	}
	if got, want := strings.Join(onError, ","), "routing_value_missing,topic_invalid,payload_invalid,record_too_large,topic_rejected,schema_rejected"; got != want {
		t.Errorf("OnErrorClasses = %s, want %s", got, want)
	}
	if s := ErrorClass(0).String(); s != "unknown(0)" {
		t.Errorf("zero class string %q", s)
	}
	for _, bad := range []string{"", "unknown(0)", "Topic_Invalid"} {
		if _, err := ParseErrorClass(bad); err == nil {
			t.Errorf("ParseErrorClass(%q) succeeded", bad)
		}
	}
	if _, ok := ClassOf(errors.New("plain")); ok {
		t.Error("ClassOf found a class in a plain error")
	}
	inner := errors.New("inner")
	re := &RowError{Class: ClassTopicInvalid, Err: inner}
	if !errors.Is(fmt.Errorf("wrapped: %w", re), inner) {
		t.Error("RowError does not unwrap to its Err")
	}
}

func TestErrValueTruncates(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{name: "short", in: "abc", want: "abc"},
		{name: "exactly max", in: string(make([]byte, maxErrValue)), want: string(make([]byte, maxErrValue))},
		{name: "ascii over", in: "a" + string(make([]byte, maxErrValue)), want: "a" + string(make([]byte, maxErrValue-1)) + "…"},
		// 'é' is two bytes; the cut must not split it.
		{name: "rune boundary", in: string(make([]byte, maxErrValue-1)) + "éx", want: string(make([]byte, maxErrValue-1)) + "…"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := errValue([]byte(tc.in)); got != tc.want {
				t.Errorf("errValue = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestConverterNames(t *testing.T) {
	tests := []struct {
		name    string
		conv    func(*Converters)
		key     convSpec
		value   convSpec
		header  HeaderConverter
		wantErr string
	}{
		{name: "defaults", key: convSpec{conv: ConvRaw, schemas: true}, value: convSpec{conv: ConvRaw, schemas: true}, header: HeaderRaw},
		{name: "connect class names", conv: func(c *Converters) {
			c.Key = "org.apache.kafka.connect.storage.StringConverter"
			c.Value = " org.apache.kafka.connect.json.JsonConverter "
			c.ValueSchemasEnable = false
			c.Header = "org.apache.kafka.connect.storage.SimpleHeaderConverter"
		}, key: convSpec{conv: ConvString, schemas: true}, value: convSpec{conv: ConvJSON}, header: HeaderSimple},
		{name: "byte array and binary with delegate", conv: func(c *Converters) {
			c.Key = "org.apache.kafka.connect.converters.ByteArrayConverter"
			c.Value = "io.debezium.converters.BinaryDataConverter"
			c.ValueDelegate = "org.apache.kafka.connect.json.JsonConverter"
			c.Header = "string"
		}, key: convSpec{conv: ConvBytes, schemas: true}, value: convSpec{conv: ConvBinary, schemas: true, delegate: ConvJSON}, header: HeaderString},
		{name: "unknown key converter", conv: func(c *Converters) { c.Key = "io.confluent.connect.protobuf.ProtobufConverter" },
			wantErr: `converter key "io.confluent.connect.protobuf.ProtobufConverter": want raw, string, json, bytes, binary or avro, or a Kafka Connect converter class walrelay implements`},
		{name: "delegate without binary", conv: func(c *Converters) { c.Value = "json"; c.ValueDelegate = "string" },
			wantErr: `converter value.delegate.converter.type "string": only the binary converter takes a delegate`},
		{name: "binary delegating to binary", conv: func(c *Converters) { c.Key = "binary"; c.KeyDelegate = "binary" },
			wantErr: `converter key.delegate.converter.type "binary": want string, json or bytes, or their Kafka Connect class`},
		{name: "json header converter", conv: func(c *Converters) { c.Header = "json" },
			wantErr: `converter header "json": want raw, simple or string, or org.apache.kafka.connect.storage.SimpleHeaderConverter`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conv := DefaultConverters()
			if tc.conv != nil {
				tc.conv(&conv)
			}
			_, err := New(DefaultConfig(), conv)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("New error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			key, value, header, _ := parseConverters(conv)
			if key != tc.key || value != tc.value || header != tc.header {
				t.Errorf("converters %+v %+v %v, want %+v %+v %v", key, value, header, tc.key, tc.value, tc.header)
			}
		})
	}
}

func TestInertOptions(t *testing.T) {
	tests := []struct {
		name string
		cfg  func(*Config)
		conv func(*Converters)
		want []string // options reported
	}{
		{name: "defaults", want: nil},
		{name: "event type and tracing", cfg: func(c *Config) {
			c.FieldEventType = "kind"
			c.TracingOperationName = "outbox-read"
			c.TracingWithContextFieldOnly = true
		}, want: []string{optFieldEventType, optTracingOperation, optTracingFieldOnly}},
		{name: "schema version without envelope", cfg: func(c *Config) { c.FieldEventSchemaVersion = "v" },
			conv: func(c *Converters) { c.Value = "json" }, want: []string{optSchemaVersion}},
		{name: "schema version with json envelope", cfg: func(c *Config) {
			c.FieldEventSchemaVersion = "v"
			c.AdditionalPlacement = "type:envelope"
		}, conv: func(c *Converters) { c.Value = "json" }, want: nil},
		{name: "schema version, envelope, no schemas", cfg: func(c *Config) {
			c.FieldEventSchemaVersion = "v"
			c.AdditionalPlacement = "type:envelope"
		}, conv: func(c *Converters) { c.Value = "json"; c.ValueSchemasEnable = false }, want: []string{optSchemaVersion}},
		{name: "schema version with avro envelope", cfg: func(c *Config) {
			c.FieldEventSchemaVersion = "v"
			c.AdditionalPlacement = "type:envelope"
		}, conv: func(c *Converters) { *c = avroConv(false) }, want: nil},
		{name: "schema version with avro, no envelope", cfg: func(c *Config) { c.FieldEventSchemaVersion = "v" },
			conv: func(c *Converters) { *c = avroConv(false) }, want: []string{optSchemaVersion}},
		{name: "enhanced avro schema support", conv: func(c *Converters) {
			*c = avroConv(true)
			c.KeyEnhancedAvro, c.ValueEnhancedAvro = true, true
		}, want: []string{"converter.key.enhanced.avro.schema.support", "converter.value.enhanced.avro.schema.support"}},
		{name: "expand with raw", cfg: func(c *Config) { c.ExpandJSONPayload = true }, want: []string{optExpandJSONPayload}},
		{name: "expand with json", cfg: func(c *Config) { c.ExpandJSONPayload = true },
			conv: func(c *Converters) { c.Value = "json" }, want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, conv := DefaultConfig(), DefaultConverters()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			if tc.conv != nil {
				tc.conv(&conv)
			}
			r, err := New(cfg, conv)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, in := range r.Inert() {
				got = append(got, in.Option)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Inert() options %q, want %q", got, tc.want)
			}
		})
	}
}
