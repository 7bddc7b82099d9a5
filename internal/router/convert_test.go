package router

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/connect"
)

// convRow is an outbox row as Debezium's own ITs declare it: NOT NULL
// keys and ids, a nullable jsonb payload.
func convRow() []col {
	return []col{
		nn(text("id", oidUUID, "5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11")),
		nn(text("aggregatetype", oidVarchar, "order")),
		nn(text("aggregateid", oidVarchar, "agg-1")),
		nn(text("type", oidVarchar, "OrderCreated")),
		text("payload", oidJSONB, `{"a": 1}`),
	}
}

// The expected bytes below are derived by hand from Kafka Connect's
// JsonConverter (convertToJsonWithEnvelope, asJsonSchema), StringConverter
// and SimpleHeaderConverter and Debezium's PostgresValueConverter schemas,
// as docs/debezium-reference.md records them; the table gives the
// first three.
func TestConverters(t *testing.T) {
	jsonValue := `{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":`
	tests := []struct {
		name    string
		cfg     func(*Config)
		conv    func(*Converters)
		row     []col
		key     string // "<nil>" for a Kafka null
		value   string
		headers []string // key=value, "<nil>" for a null value
		wantErr string
	}{
		{name: "json with schemas",
			conv:    func(c *Converters) { c.Key, c.Value = "json", "json" },
			key:     `{"schema":{"type":"string","optional":false},"payload":"agg-1"}`,
			value:   jsonValue + `"{\"a\": 1}"}`,
			headers: []string{"id=5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"}},
		{name: "json without schemas",
			conv: func(c *Converters) {
				c.Key, c.Value = "org.apache.kafka.connect.json.JsonConverter", "json"
				c.KeySchemasEnable, c.ValueSchemasEnable = false, false
			},
			key: `"agg-1"`, value: `"{\"a\": 1}"`, headers: []string{"id=5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"}},
		{name: "string",
			conv: func(c *Converters) { c.Key, c.Value = "string", "org.apache.kafka.connect.storage.StringConverter" },
			key:  `agg-1`, value: `{"a": 1}`, headers: []string{"id=5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"}},
		{name: "nullable key column",
			conv: func(c *Converters) { c.Key = "json" },
			row:  with(convRow(), text("aggregateid", oidText, "agg-1")),
			key:  `{"schema":{"type":"string","optional":true},"payload":"agg-1"}`, value: `{"a": 1}`,
			headers: []string{"id=5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"}},
		{name: "null key with json is bytes",
			conv: func(c *Converters) { c.Key = "json" },
			row:  with(convRow(), null("aggregateid", oidText)),
			key:  `{"schema":{"type":"string","optional":true},"payload":null}`, value: `{"a": 1}`,
			headers: []string{"id=5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"}},
		{name: "int key",
			conv: func(c *Converters) { c.Key = "json"; c.KeySchemasEnable = false },
			row:  with(convRow(), nn(text("aggregateid", oidInt8, "-42"))),
			key:  `-42`, value: `{"a": 1}`, headers: []string{"id=5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"}},
		{name: "null payload with json is not a tombstone",
			conv: func(c *Converters) { c.Value = "json" },
			row:  with(convRow(), null("payload", oidJSONB)),
			key:  `agg-1`, value: jsonValue + `null}`, headers: []string{"id=5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"}},
		{name: "null payload with json without schemas",
			conv: func(c *Converters) { c.Value = "json"; c.ValueSchemasEnable = false },
			row:  with(convRow(), null("payload", oidJSONB)),
			key:  `agg-1`, value: `null`, headers: []string{"id=5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"}},
		{name: "tombstone asked for",
			cfg:  func(c *Config) { c.TombstoneOnEmptyPayload = true },
			conv: func(c *Converters) { c.Value = "json" },
			row:  with(convRow(), text("payload", oidText, "  ")),
			key:  `agg-1`, value: "<nil>", headers: []string{"id=5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"}},
		{name: "bytea payload",
			conv:  func(c *Converters) { c.Value = "json" },
			row:   with(convRow(), text("payload", oidBytea, `\x00ff10416263`)),
			key:   `agg-1`,
			value: `{"schema":{"type":"bytes","optional":true},"payload":"AP8QQWJj"}`, headers: []string{"id=5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"}},
		{name: "bytea payload with byte array converter",
			conv: func(c *Converters) { c.Value = "bytes" },
			row:  with(convRow(), text("payload", oidBytea, `\x00ff10416263`)),
			key:  `agg-1`, value: "\x00\xff\x10Abc", headers: []string{"id=5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"}},
		{name: "jsonb payload with byte array converter",
			conv:    func(c *Converters) { c.Value = "bytes" },
			wantErr: "ByteArrayConverter"},
		{name: "binary data converter delegating",
			conv: func(c *Converters) { c.Value = "binary"; c.ValueDelegate = "json"; c.ValueSchemasEnable = false },
			key:  `agg-1`, value: `"{\"a\": 1}"`, headers: []string{"id=5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"}},
		{name: "envelope with version and prefix",
			cfg: func(c *Config) {
				c.AdditionalPlacement = "type:envelope:eventType"
				c.FieldEventSchemaVersion = "v"
			},
			conv: func(c *Converters) { c.Value = "json"; c.TopicPrefix = "dbserver1" },
			row:  append(convRow(), text("v", oidInt4, "3")),
			key:  `agg-1`,
			value: `{"schema":{"type":"struct","fields":[` +
				`{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"payload"},` +
				`{"type":"string","optional":false,"field":"eventType"}],` +
				`"optional":false,"name":"dbserver1.public.outbox.order.Value","version":3},` +
				`"payload":{"payload":"{\"a\": 1}","eventType":"OrderCreated"}}`,
			headers: []string{"id=5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"}},
		{name: "envelope with string converter",
			cfg:  func(c *Config) { c.AdditionalPlacement = "type:envelope:eventType" },
			conv: func(c *Converters) { c.Value = "string" },
			key:  `agg-1`, value: `Struct{payload={"a": 1},eventType=OrderCreated}`,
			headers: []string{"id=5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"}},
		{name: "schema version must be int4",
			cfg: func(c *Config) {
				c.AdditionalPlacement = "type:envelope"
				c.FieldEventSchemaVersion = "v"
			},
			conv:    func(c *Converters) { c.Value = "json" },
			row:     append(convRow(), text("v", oidInt8, "3")),
			wantErr: `table.field.event.schema.version column "v": must be of type integer (int4)`},
		{name: "simple headers",
			cfg: func(c *Config) {
				c.AdditionalPlacement = "type:header:eventType,ok:header,at:header,ts:header,raw:header,n:header"
			},
			conv: func(c *Converters) { c.Header = "org.apache.kafka.connect.storage.SimpleHeaderConverter" },
			row: append(convRow(), text("ok", oidBool, "t"), text("at", oidTimestamptz, "2026-01-02 03:04:05.678+00"),
				text("ts", oidTimestamp, "2026-01-02 03:04:05.678"), text("raw", oidBytea, `\x00ff10416263`), null("n", oidText)),
			key: `agg-1`, value: `{"a": 1}`,
			headers: []string{"id=5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11", "eventType=OrderCreated", "ok=true",
				"at=2026-01-02T03:04:05.678000Z", "ts=1767323045678000", "raw=AP8QQWJj", "n=<nil>"}},
		// JsonConverter as the header converter (header.converter
		// org.apache.kafka.connect.json.JsonConverter): fromConnectHeader is
		// fromConnectData with the column's schema, so the uuid id header
		// carries io.debezium.data.Uuid, and a NULL header is an envelope
		// with a null payload (or the 4 bytes null without schemas).
		{name: "json headers with schemas",
			cfg:  func(c *Config) { c.AdditionalPlacement = "type:header:eventType,ok:header,n:header" },
			conv: func(c *Converters) { c.Header = "org.apache.kafka.connect.json.JsonConverter" },
			row:  append(convRow(), text("ok", oidBool, "t"), null("n", oidText)),
			key:  `agg-1`, value: `{"a": 1}`,
			headers: []string{
				`id={"schema":{"type":"string","optional":false,"name":"io.debezium.data.Uuid","version":1},"payload":"5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"}`,
				`eventType={"schema":{"type":"string","optional":false},"payload":"OrderCreated"}`,
				`ok={"schema":{"type":"boolean","optional":true},"payload":true}`,
				`n={"schema":{"type":"string","optional":true},"payload":null}`}},
		{name: "json headers without schemas",
			cfg:  func(c *Config) { c.AdditionalPlacement = "type:header:eventType,ok:header,n:header" },
			conv: func(c *Converters) { c.Header = "json"; c.HeaderSchemasEnable = false },
			row:  append(convRow(), text("ok", oidBool, "t"), null("n", oidText)),
			key:  `agg-1`, value: `{"a": 1}`,
			headers: []string{`id="5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"`, `eventType="OrderCreated"`, `ok=true`, `n=null`}},
		{name: "raw headers unchanged",
			cfg: func(c *Config) { c.AdditionalPlacement = "ok:header,at:header" },
			row: append(convRow(), text("ok", oidBool, "t"), text("at", oidTimestamptz, "2026-01-02 03:04:05.678+00")),
			key: `agg-1`, value: `{"a": 1}`,
			headers: []string{"id=5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11", "ok=t", "at=2026-01-02 03:04:05.678+00"}},
		// table.expand.json.payload: JsonSchemaData.toConnectSchema (objects
		// optional structs named after the field, ints INT32, JSON nulls and
		// empty arrays left out unless the behaviours keep them).
		{name: "expanded payload",
			cfg:  func(c *Config) { c.ExpandJSONPayload = true },
			conv: func(c *Converters) { c.Value = "json" },
			row:  with(convRow(), text("payload", oidJSONB, `{"a": 1, "b": "x", "n": null, "e": [], "o": {"f": 2.5}}`)),
			key:  `agg-1`,
			value: `{"schema":{"type":"struct","fields":[{"type":"int32","optional":true,"field":"a"},{"type":"string","optional":true,"field":"b"},` +
				`{"type":"struct","fields":[{"type":"double","optional":true,"field":"f"}],"optional":true,"name":"payload.o","field":"o"}],"optional":true,"name":"payload"},` +
				`"payload":{"a":1,"b":"x","o":{"f":2.5}}}`,
			headers: []string{"id=5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"}},
		{name: "expanded payload keeping nulls and empty arrays",
			cfg: func(c *Config) {
				c.ExpandJSONPayload = true
				c.JSONPayloadNullBehavior, c.JSONPayloadEmptyArrayBehavior = "optional_bytes", "optional_string"
			},
			conv: func(c *Converters) { c.Value = "json"; c.ValueSchemasEnable = false },
			row:  with(convRow(), text("payload", oidJSONB, `{"n": null, "e": []}`)),
			key:  `agg-1`, value: `{"n":null,"e":[]}`, headers: []string{"id=5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"}},
		{name: "expanded payload that is no JSON object stays a string",
			cfg:  func(c *Config) { c.ExpandJSONPayload = true },
			conv: func(c *Converters) { c.Value = "json"; c.ValueSchemasEnable = false },
			row:  with(convRow(), text("payload", oidText, `"just a string"`)),
			key:  `agg-1`, value: `"\"just a string\""`, headers: []string{"id=5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"}},
		// Column defaults (PostgresDefaultValueConverter): in the schema,
		// and JsonConverter writes a NULL as the default.
		{name: "envelope column default",
			cfg:  func(c *Config) { c.AdditionalPlacement = "deleted:envelope" },
			conv: func(c *Converters) { c.Value = "json"; c.TopicPrefix = "p" },
			row:  append(convRow(), def(null("deleted", oidBool), "false")),
			key:  `agg-1`,
			value: `{"schema":{"type":"struct","fields":[` +
				`{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"payload"},` +
				`{"type":"boolean","optional":true,"default":false,"field":"deleted"}],` +
				`"optional":false,"name":"p.public.outbox.order.Value"},` +
				`"payload":{"payload":"{\"a\": 1}","deleted":false}}`,
			headers: []string{"id=5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"}},
		{name: "key with a function default",
			conv:    func(c *Converters) { c.Key = "json" },
			row:     with(convRow(), def(nn(text("aggregateid", oidUUID, "0d9e3b3c-4d2a-4f55-8f0c-1e2d3c4b5a69")), "gen_random_uuid()")),
			key:     `{"schema":{"type":"string","optional":false,"name":"io.debezium.data.Uuid","version":1,"default":"00000000-0000-0000-0000-000000000000"},"payload":"0d9e3b3c-4d2a-4f55-8f0c-1e2d3c4b5a69"}`,
			value:   `{"a": 1}`,
			headers: []string{"id=5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"}},
		// A NULL is the default wherever Debezium's router reads it with
		// Struct.get: keys, headers, the payload and its tombstone test.
		{name: "null key with a default, string converter",
			conv: func(c *Converters) { c.Key = "string" },
			row:  with(convRow(), def(null("aggregateid", oidText), "'none'::text")),
			key:  `none`, value: `{"a": 1}`,
			headers: []string{"id=5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"}},
		{name: "null header with a default",
			cfg:  func(c *Config) { c.AdditionalPlacement = "type:header:eventType" },
			conv: func(c *Converters) { c.Header = "simple" },
			row:  with(convRow(), def(null("type", oidVarchar), "'Unknown'::character varying")),
			key:  `agg-1`, value: `{"a": 1}`,
			headers: []string{"id=5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11", "eventType=Unknown"}},
		{name: "null payload with a default is no tombstone",
			cfg:  func(c *Config) { c.TombstoneOnEmptyPayload = true },
			conv: func(c *Converters) { c.Value = "json"; c.ValueSchemasEnable = false },
			row:  with(convRow(), def(null("payload", oidJSONB), "'{}'::jsonb")),
			key:  `agg-1`, value: `"{}"`,
			headers: []string{"id=5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"}},
		{name: "null payload with an empty default is a tombstone",
			cfg:  func(c *Config) { c.TombstoneOnEmptyPayload = true },
			conv: func(c *Converters) { c.Value = "string" },
			row:  with(convRow(), def(null("payload", oidText), "' '::text")),
			key:  `agg-1`, value: "<nil>",
			headers: []string{"id=5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"}},
		{name: "null payload with a default and no tombstone option, string converter",
			conv: func(c *Converters) { c.Value = "string" },
			row:  with(convRow(), def(null("payload", oidText), "'none'::text")),
			key:  `agg-1`, value: "none",
			headers: []string{"id=5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"}},
		{name: "unsupported column type",
			conv:    func(c *Converters) { c.Key = "json" },
			row:     with(convRow(), nn(text("aggregateid", oidNumeric, "1.5"))),
			wantErr: `table.field.event.key column "aggregateid": column type OID 1700: walrelay does not reproduce`},
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
			row := tc.row
			if row == nil {
				row = convRow()
			}
			r, err := New(cfg, conv)
			if err != nil {
				t.Fatal(err)
			}
			var m Message
			p, err := r.Bind(relation(row))
			if err == nil {
				m, err = p.Route(tuple(row), commitTime)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			show := func(b []byte) string {
				if b == nil {
					return "<nil>"
				}
				return string(b)
			}
			if got := show(m.Key); got != tc.key {
				t.Errorf("key\n got: %s\nwant: %s", got, tc.key)
			}
			if got := show(m.Value); got != tc.value {
				t.Errorf("value\n got: %s\nwant: %s", got, tc.value)
			}
			var hs []string
			for _, h := range m.Headers {
				hs = append(hs, h.Key+"="+show(h.Value))
			}
			if strings.Join(hs, "\n") != strings.Join(tc.headers, "\n") {
				t.Errorf("headers\n got: %q\nwant: %q", hs, tc.headers)
			}
		})
	}
}

// TestDebeziumDefault reads DEFAULT expressions as pg_get_expr prints them
// the way PostgresDefaultValueConverter does.
func TestDebeziumDefault(t *testing.T) {
	tests := []struct {
		oid  uint32
		expr string
		want any // nil: no default
	}{
		{oidBool, "false", false},
		{oidBool, " true ", true},
		{oidBool, "NULL::boolean", nil},
		{oidInt4, "nextval('outbox_id_seq'::regclass)", int32(0)},
		{oidInt4, "'-1'::integer", int32(-1)},
		{oidInt4, "'x'::integer", nil}, // Integer.parseInt fails: no default
		{oidInt8, "42", int64(42)},
		{oidInt2, "'7'::smallint", int16(7)},
		{oidFloat8, "1.5", 1.5},
		{oidTextT, "'it''s'::text", "it's"},
		{oidVarcharT, "'DRAFT'::character varying", "DRAFT"},
		{oidVarcharT, "NULL::character varying", nil},
		{oidJSONB, "'{}'::jsonb", "{}"},
		{oidJSONB, "jsonb_build_object('a', 1)", "{}"},
		{oidUUIDT, "gen_random_uuid()", "00000000-0000-0000-0000-000000000000"},
		{oidUUIDT, "'0D9E3B3C-4D2A-4F55-8F0C-1E2D3C4B5A69'::uuid", "0d9e3b3c-4d2a-4f55-8f0c-1e2d3c4b5a69"},
		{oidTimestamptzT, "now()", "1970-01-01T00:00:00.000000Z"},
		{oidTimestamptzT, "CURRENT_TIMESTAMP", "1970-01-01T00:00:00.000000Z"},
		{oidTimestamptzT, "'2026-01-02 03:04:05+00'::timestamp with time zone", "2026-01-02T03:04:05.000000Z"},
		{oidTimestampT, "'2026-01-02 03:04:05'::timestamp without time zone", int64(1767323045000000)},
		{oidDateT, "CURRENT_DATE", int32(0)},
		{oidDateT, "'2026-01-02'::date", int32(20455)},
		{oidBytea, "'\\x00'::bytea", nil}, // no mapper for bytea
	}
	for _, tc := range tests {
		ct, err := debeziumType(tc.oid, -1)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := debeziumDefault(tc.oid, ct, tc.expr)
		if !ok {
			got = nil
		}
		if got != tc.want {
			t.Errorf("debeziumDefault(%d, %q) = %#v, want %#v", tc.oid, tc.expr, got, tc.want)
		}
	}
}

// TestJSONHeaderConverterIsJSONConverter checks the json header converter
// against connect.JSONConverter for the same Connect schema and value, as
// Kafka's JsonConverter.fromConnectHeader is fromConnectData: the id
// header against the uuid schema Debezium gives the id column, and a
// placement header of the key column against the json key converter's
// bytes for that column.
func TestJSONHeaderConverterIsJSONConverter(t *testing.T) {
	const id = "5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"
	for _, schemas := range []bool{true, false} {
		t.Run(fmt.Sprintf("schemas.enable=%t", schemas), func(t *testing.T) {
			cfg, conv := DefaultConfig(), DefaultConverters()
			cfg.AdditionalPlacement = "aggregateid:header:agg"
			conv.Key, conv.KeySchemasEnable = "json", schemas
			conv.Header, conv.HeaderSchemasEnable = "json", schemas
			r, err := New(cfg, conv)
			if err != nil {
				t.Fatal(err)
			}
			p, err := r.Bind(relation(convRow()))
			if err != nil {
				t.Fatal(err)
			}
			m, err := p.Route(tuple(convRow()), commitTime)
			if err != nil {
				t.Fatal(err)
			}
			wantID, err := connect.JSONConverter{DisableSchemas: !schemas}.FromConnectData(
				&connect.Schema{Type: connect.TypeString, Name: "io.debezium.data.Uuid", Version: 1, HasVersion: true}, id)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"id": string(wantID), "agg": string(m.Key)}
			got := map[string]string{}
			for _, h := range m.Headers {
				got[h.Key] = string(h.Value)
			}
			if !maps.Equal(got, want) {
				t.Errorf("headers %q, want %q", got, want)
			}
		})
	}
}
