package router

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/connect/avro"
)

// avroConv returns the default converters with the value (and, with key,
// the key) set to avro against a registry.
func avroConv(key bool) Converters {
	c := DefaultConverters()
	c.Value, c.ValueRegistryURL = "avro", "http://sr:8081"
	if key {
		c.Key, c.KeyRegistryURL = "io.confluent.connect.avro.AvroConverter", "http://sr:8081"
	}
	return c
}

func TestAvroConfigErrors(t *testing.T) {
	tests := []struct {
		name    string
		cfg     func(*Config)
		conv    func(*Converters)
		wantErr string
	}{
		{name: "no registry url", conv: func(c *Converters) { c.ValueRegistryURL = " , " },
			wantErr: `converter value.schema.registry.url " , ": the avro converter needs the schema registry's URL`},
		{name: "bad registry url", conv: func(c *Converters) { c.ValueRegistryURL = "sr:8081" },
			wantErr: `converter value.schema.registry.url "sr:8081": want http:// or https:// URLs, comma-separated`},
		{name: "bad url keeps its password out", conv: func(c *Converters) { c.ValueRegistryURL = "https://u:secret@sr:8081,ftp://x" },
			wantErr: `converter value.schema.registry.url "https://u:xxxxx@sr:8081,ftp://x": want http:// or https:// URLs, comma-separated`},
		{name: "unknown strategy", conv: func(c *Converters) { c.ValueSubjectStrategy = "AssociatedNameStrategy" },
			wantErr: `converter value.subject.name.strategy: subject name strategy "AssociatedNameStrategy": want TopicNameStrategy, RecordNameStrategy or TopicRecordNameStrategy`},
		{name: "record strategy for a key", conv: func(c *Converters) { *c = avroConv(true); c.KeySubjectStrategy = "RecordNameStrategy" },
			wantErr: `converter key.subject.name.strategy RecordNameStrategy: the key's Avro schema is a column's, not a record`},
		{name: "record strategy without envelope", conv: func(c *Converters) {
			c.ValueSubjectStrategy = "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy"
		}, wantErr: `converter value.subject.name.strategy TopicRecordNameStrategy: without envelope placements the value's Avro schema is the payload column's`},
		{name: "record strategy with registry schema", cfg: func(c *Config) { c.AdditionalPlacement = "type:envelope:eventType" },
			conv:    func(c *Converters) { c.ValueSubjectStrategy = "RecordNameStrategy"; c.ValueAvroSchema = "registry" },
			wantErr: `converter value.subject.name.strategy RecordNameStrategy: with converter value.avro.schema registry the schema comes from the subject`},
		{name: "jks truststore", conv: func(c *Converters) { c.ValueRegistryCAType = "JKS" },
			wantErr: `converter value.schema.registry.ssl.truststore.type "JKS": walrelay reads PEM files only`},
		{name: "pkcs12 keystore", conv: func(c *Converters) { c.ValueRegistryCertType = "PKCS12" },
			wantErr: `converter value.schema.registry.ssl.keystore.type "PKCS12": walrelay reads PEM files only`},
		{name: "sasl inherit", conv: func(c *Converters) { c.ValueBasicAuthSource = "SASL_INHERIT" },
			wantErr: `converter value.basic.auth.credentials.source "SASL_INHERIT": walrelay does not take the registry's credentials from Kafka's SASL settings`},
		{name: "unknown basic source", conv: func(c *Converters) { c.ValueBasicAuthSource = "LDAP" },
			wantErr: `converter value.basic.auth.credentials.source "LDAP": want USER_INFO or URL`},
		{name: "user info without source", conv: func(c *Converters) { c.ValueBasicAuthUserInfo = "u:p" },
			wantErr: `converter value.basic.auth.user.info is set but converter value.basic.auth.credentials.source is not USER_INFO`},
		{name: "user info without colon", conv: func(c *Converters) { c.ValueBasicAuthSource = "USER_INFO"; c.ValueBasicAuthUserInfo = "up" },
			wantErr: `converter value.basic.auth.credentials.source USER_INFO: converter value.basic.auth.user.info must be user:password`},
		{name: "url source without user info", conv: func(c *Converters) { c.ValueBasicAuthSource = "URL" },
			wantErr: `converter value.basic.auth.credentials.source URL: no registry URL has user info`},
		{name: "oauth bearer", conv: func(c *Converters) { c.ValueBearerAuthSource = "OAUTHBEARER" },
			wantErr: `converter value.bearer.auth.credentials.source "OAUTHBEARER": walrelay implements STATIC_TOKEN only`},
		{name: "static token without token", conv: func(c *Converters) { c.ValueBearerAuthSource = "STATIC_TOKEN" },
			wantErr: `converter value.bearer.auth.credentials.source STATIC_TOKEN: converter value.bearer.auth.token is empty`},
		{name: "token without source", conv: func(c *Converters) { c.ValueBearerAuthToken = "t" },
			wantErr: `converter value.bearer.auth.token is set but converter value.bearer.auth.credentials.source is not STATIC_TOKEN`},
		{name: "unknown avro.schema", conv: func(c *Converters) { c.ValueAvroSchema = "inferred" },
			wantErr: `converter value.avro.schema "inferred": want connect or registry`},
		{name: "version column without registry", conv: func(c *Converters) { c.ValueAvroVersionColumn = "v" },
			wantErr: `converter value.avro.schema.version.column "v": only with converter value.avro.schema registry`},
		{name: "registry with envelope", cfg: func(c *Config) { c.AdditionalPlacement = "type:envelope:eventType" },
			conv:    func(c *Converters) { c.ValueAvroSchema = "registry" },
			wantErr: `converter value.avro.schema registry: the value is the payload's JSON encoded with the registry's schema, which leaves no room for envelope placements`},
		{name: "registry with expanded json", cfg: func(c *Config) { c.ExpandJSONPayload = true },
			conv:    func(c *Converters) { c.ValueAvroSchema = "registry" },
			wantErr: `converter value.avro.schema registry: the registry's schema gives the payload its structure; unset table.expand.json.payload`},
		{name: "use latest with auto register", conv: func(c *Converters) { c.ValueUseLatestVersion = true },
			wantErr: `converter value.use.latest.version true: only with converter value.auto.register.schemas false`},
		{name: "avro option on a json side", conv: func(c *Converters) { c.Key = "json"; c.KeyRegistryURL = "http://sr:8081" },
			wantErr: `converter key.schema.registry.url "http://sr:8081": an avro converter option, but converter key is "json"`},
		{name: "avro boolean on a raw side", conv: func(c *Converters) { c.KeyConnectMetaData = false },
			wantErr: `converter key.connect.meta.data false: an avro converter option, but converter key is "raw"`},
		{name: "avro secret on a raw side is not echoed", conv: func(c *Converters) { c.KeyBasicAuthUserInfo = "u:secret" },
			wantErr: `converter key.basic.auth.user.info (a secret): an avro converter option, but converter key is "raw"`},
		{name: "avro is no delegate", conv: func(c *Converters) { c.Key = "binary"; c.KeyDelegate = "avro" },
			wantErr: `converter key.delegate.converter.type "avro": want string, json or bytes, or their Kafka Connect class`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, conv := DefaultConfig(), avroConv(false)
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			tc.conv(&conv)
			_, err := New(cfg, conv)
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Fatalf("New error %v,\nwant it to start with %s", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "secret") && !strings.Contains(err.Error(), "(a secret)") {
				t.Errorf("error shows a secret: %v", err)
			}
		})
	}
}

func TestAvroSettings(t *testing.T) {
	conv := avroConv(true)
	conv.KeyRegistryURL = "https://alice:pw@sr-1:8081/, https://sr-2:8081"
	conv.KeyBasicAuthSource = "URL"
	conv.KeyRegistryCAFile, conv.KeyRegistryCAType = "/etc/ca.pem", "pem"
	conv.ValueBasicAuthSource, conv.ValueBasicAuthUserInfo = "USER_INFO", "bob:p:w"
	conv.ValueSubjectStrategy = "RecordNameStrategy"
	conv.ValueAutoRegister, conv.ValueUseLatestVersion, conv.ValueNormalizeSchemas = false, true, true
	conv.ValueConnectMetaData, conv.ValueScrubInvalidNames = false, true
	cfg := DefaultConfig()
	cfg.AdditionalPlacement = "type:envelope:eventType"
	r, err := New(cfg, conv)
	if err != nil {
		t.Fatal(err)
	}
	k, ok := r.Avro(true)
	if !ok {
		t.Fatal("Avro(true): not avro")
	}
	if strings.Join(k.URLs, " ") != "https://sr-1:8081/ https://sr-2:8081" || k.BasicAuthUser != "alice" || k.BasicAuthPassword != "pw" ||
		k.CAFile != "/etc/ca.pem" || k.Strategy != avro.TopicNameStrategy || !k.AutoRegister || !k.LatestStrict || k.Registry ||
		k.Options != (avro.Options{ConnectMetaData: true}) {
		t.Errorf("key settings %+v", k)
	}
	v, _ := r.Avro(false)
	if v.BasicAuthUser != "bob" || v.BasicAuthPassword != "p:w" || v.Strategy != avro.RecordNameStrategy || v.AutoRegister ||
		!v.UseLatestVersion || !v.Normalize || v.Options != (avro.Options{ScrubInvalidNames: true}) {
		t.Errorf("value settings %+v", v)
	}
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		if out := fmt.Sprintf(f, v); strings.Contains(out, "p:w") || !strings.Contains(out, `basic user "bob"`) {
			t.Errorf("%s of the settings: %s", f, out)
		}
	}
	r, _ = New(DefaultConfig(), DefaultConverters())
	if _, ok := r.Avro(false); ok {
		t.Error("Avro(false) with the raw converter: ok")
	}
}

func unhexT(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const (
	avroJSONB    = `["null",{"type":"string","connect.version":1,"connect.name":"io.debezium.data.Json"}]`
	avroEnvelope = `{"type":"record","name":"Value","namespace":"test_server.public.outbox.order","fields":[` +
		`{"name":"payload","type":["null",{"type":"string","connect.version":1,"connect.name":"io.debezium.data.Json"}],"default":null},` +
		`{"name":"eventType","type":"string"},{"name":"prio","type":["null",{"type":"int","connect.type":"int16"}],"default":null},` +
		`{"name":"status","type":[{"type":"string","connect.default":"new"},"null"],"default":"new"}],"connect.version":3,"connect.name":"test_server.public.outbox.order.Value"}`
)

// TestAvroRoute routes rows with the avro converter and checks the bytes
// (Confluent's header with a zero id, then the body) and the schema handed
// to the relay, against docs/design/avro.md 1.7.
func TestAvroRoute(t *testing.T) {
	const payload = `{"a": 1}`
	zero := "00 00000000 "
	t.Run("jsonb payload, varchar key", func(t *testing.T) {
		p := convPlan(t, DefaultConfig(), avroConv(true), with(baseRow(), text("payload", oidJSONB, payload)))
		m, err := p.Route(tuple(with(baseRow(), text("payload", oidJSONB, payload))), commitTime)
		if err != nil {
			t.Fatal(err)
		}
		if want := unhexT(t, zero+"02 10"+hex.EncodeToString([]byte(payload))); string(m.Value) != string(want) {
			t.Errorf("value % x, want % x", m.Value, want)
		}
		if m.ValueAvro.Schema == nil || m.ValueAvro.Schema.String() != avroJSONB || m.ValueAvro.Registry {
			t.Errorf("value schema %+v", m.ValueAvro)
		}
		if want := unhexT(t, zero+"02 06"+hex.EncodeToString([]byte("A-1"))); string(m.Key) != string(want) {
			t.Errorf("key % x, want % x", m.Key, want)
		}
		if m.KeyAvro.Schema == nil || m.KeyAvro.Schema.String() != `["null","string"]` {
			t.Errorf("key schema %+v", m.KeyAvro)
		}
		// The id header stays raw.
		if string(m.Headers[0].Value) != "5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11" {
			t.Errorf("id header %q", m.Headers[0].Value)
		}
	})
	t.Run("NULL key and NULL payload", func(t *testing.T) {
		row := with(baseRow(), null("aggregateid", oidVarchar), null("payload", oidJSONB))
		p := convPlan(t, DefaultConfig(), avroConv(true), row)
		m, err := p.Route(tuple(row), commitTime)
		if err != nil {
			t.Fatal(err)
		}
		if m.Key != nil || m.Value != nil || !m.KeyAvro.IsZero() || !m.ValueAvro.IsZero() {
			t.Errorf("key %q %+v value %q %+v, want Kafka nulls and no schemas", m.Key, m.KeyAvro, m.Value, m.ValueAvro)
		}
	})
	t.Run("bytea NOT NULL payload is raw", func(t *testing.T) {
		row := with(baseRow(), nn(text("payload", oidBytea, `\x0102`)))
		p := convPlan(t, DefaultConfig(), avroConv(false), row)
		m, err := p.Route(tuple(row), commitTime)
		if err != nil {
			t.Fatal(err)
		}
		if want := unhexT(t, zero+"01 02"); string(m.Value) != string(want) || !m.ValueAvro.Schema.RawBytes() {
			t.Errorf("value % x, want % x", m.Value, want)
		}
	})
	t.Run("NULL payload with a default", func(t *testing.T) {
		row := with(baseRow(), def(null("payload", oidJSONB), "'{}'::jsonb"))
		p := convPlan(t, DefaultConfig(), avroConv(false), row)
		m, err := p.Route(tuple(row), commitTime)
		if err != nil {
			t.Fatal(err)
		}
		if want := unhexT(t, zero+"00 04 7b7d"); string(m.Value) != string(want) {
			t.Errorf("value % x, want % x", m.Value, want)
		}
		if got := m.ValueAvro.Schema.String(); got != `[{"type":"string","connect.version":1,"connect.default":"{}","connect.name":"io.debezium.data.Json"},"null"]` {
			t.Errorf("schema %s", got)
		}
	})
	t.Run("envelope, case E", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.AdditionalPlacement = "type:envelope:eventType,prio:envelope,status:envelope"
		cfg.FieldEventSchemaVersion = "v"
		conv := avroConv(false)
		conv.TopicPrefix = "test_server"
		row := with(baseRow(), text("payload", oidJSONB, payload), nn(text("type", oidVarchar, "OrderCreated")),
			null("prio", oidInt2), def(null("status", oidVarchar), "'new'::character varying"), text("v", oidInt4, "3"))
		p := convPlan(t, cfg, conv, row)
		m, err := p.Route(tuple(row), commitTime)
		if err != nil {
			t.Fatal(err)
		}
		want := unhexT(t, zero+"02 10 7b2261223a20317d 18 4f7264657243726561746564 00 00 06 6e6577")
		if string(m.Value) != string(want) {
			t.Errorf("value\n got % x\nwant % x", m.Value, want)
		}
		if got := m.ValueAvro.Schema.String(); got != avroEnvelope {
			t.Errorf("schema\n got %s\nwant %s", got, avroEnvelope)
		}
		if name, _ := m.ValueAvro.Schema.FullName(); name != "test_server.public.outbox.order.Value" {
			t.Errorf("record name %q", name)
		}
		// The same routing value and version: the same schema pointer,
		// from the plan's cache; another version or routing value: another.
		m2, _ := p.Route(tuple(row), commitTime)
		if m2.ValueAvro.Schema != m.ValueAvro.Schema {
			t.Error("a second row of the same shape got another schema pointer")
		}
		m3, _ := p.Route(tuple(with(row, text("v", oidInt4, "4"))), commitTime)
		m4, _ := p.Route(tuple(with(row, text("aggregatetype", oidVarchar, "customer"))), commitTime)
		if m3.ValueAvro.Schema == m.ValueAvro.Schema || !strings.Contains(m3.ValueAvro.Schema.String(), `"connect.version":4`) ||
			m4.ValueAvro.Schema == m.ValueAvro.Schema || !strings.Contains(m4.ValueAvro.Schema.String(), `"namespace":"test_server.public.outbox.customer"`) {
			t.Errorf("version 4: %s\ncustomer: %s", m3.ValueAvro.Schema, m4.ValueAvro.Schema)
		}
	})
	t.Run("expanded JSON, case F", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.ExpandJSONPayload = true
		row := with(baseRow(), text("payload", oidJSONB, `{"a":1,"address":{"city":"X"},"tags":["t"]}`))
		p := convPlan(t, cfg, avroConv(false), row)
		m, err := p.Route(tuple(row), commitTime)
		if err != nil {
			t.Fatal(err)
		}
		if want := unhexT(t, zero+"02 02 02 02 02 02 58 02 02 02 02 74 00"); string(m.Value) != string(want) {
			t.Errorf("value % x, want % x", m.Value, want)
		}
		const textF = `["null",{"type":"record","name":"payload","fields":[{"name":"a","type":["null","int"],"default":null},{"name":"address","type":["null",{"type":"record","name":"address","namespace":"payload","fields":[{"name":"city","type":["null","string"],"default":null}],"connect.name":"payload.address"}],"default":null},{"name":"tags","type":["null",{"type":"array","items":["null","string"]}],"default":null}],"connect.name":"payload"}]`
		if got := m.ValueAvro.Schema.String(); got != textF {
			t.Errorf("schema %s", got)
		}
		m2, _ := p.Route(tuple(row), commitTime)
		if m2.ValueAvro.Schema != m.ValueAvro.Schema {
			t.Error("an equal expanded schema was not interned")
		}
		// A JSON key that is not an Avro name fails the row, naming it.
		_, err = p.Route(tuple(with(row, text("payload", oidJSONB, `{"first-name":"x"}`))), commitTime)
		var re *RowError
		if !errors.As(err, &re) || re.Class != ClassPayloadInvalid || re.Column != "payload" || !errors.Is(err, avro.ErrInvalidName) ||
			!strings.Contains(err.Error(), `field "first-name"`) {
			t.Errorf("invalid name: %v", err)
		}
	})
	t.Run("registry schema", func(t *testing.T) {
		conv := avroConv(true)
		conv.ValueAvroSchema, conv.ValueAvroVersionColumn = "registry", "sv"
		conv.KeyAvroSchema = "registry"
		row := with(baseRow(), text("payload", oidJSONB, payload), text("sv", oidInt4, "7"))
		p := convPlan(t, DefaultConfig(), conv, row)
		m, err := p.Route(tuple(row), commitTime)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Value) != payload || m.ValueAvro != (AvroRef{Registry: true, Version: 7}) {
			t.Errorf("value %q %+v", m.Value, m.ValueAvro)
		}
		// The key column's value as JSON: a string for varchar, a number
		// for an integer, the text itself for jsonb; bytea holds no JSON.
		if string(m.Key) != `"A-1"` || m.KeyAvro != (AvroRef{Registry: true}) {
			t.Errorf("key %q %+v, want the JSON string \"A-1\"", m.Key, m.KeyAvro)
		}
		for _, kc := range []struct {
			c    col
			want string
		}{
			{text("aggregateid", oidVarchar, `a "quoted" id`), `"a \"quoted\" id"`},
			{text("aggregateid", oidInt8, "42"), `42`},
			{text("aggregateid", oidJSONB, `{"tenant": 7}`), `{"tenant": 7}`},
		} {
			krow := with(row, kc.c)
			kp := convPlan(t, DefaultConfig(), conv, krow)
			var km Message
			if err := kp.RouteTo(&km, tuple(krow), commitTime); err != nil || string(km.Key) != kc.want {
				t.Errorf("key column %v: key %q, %v; want %s", kc.c, km.Key, err, kc.want)
			}
		}
		brow := with(row, text("aggregateid", oidBytea, `\x0102`))
		if _, err := convPlan(t, DefaultConfig(), conv, brow).Route(tuple(brow), commitTime); err == nil || !strings.Contains(err.Error(), "bytea key column holds no JSON") {
			t.Errorf("bytea key: %v; want a row error", err)
		}
		m, err = p.Route(tuple(with(row, null("sv", oidInt4))), commitTime)
		if err != nil || m.ValueAvro.Version != 0 {
			t.Errorf("NULL version column: %+v %v", m.ValueAvro, err)
		}
		_, err = p.Route(tuple(with(row, text("sv", oidInt4, "0"))), commitTime)
		var re *RowError
		if !errors.As(err, &re) || re.Class != ClassPayloadInvalid || re.Column != "sv" {
			t.Errorf("version 0: %v", err)
		}
		// The version column must exist and be an integer.
		r, _ := New(DefaultConfig(), conv)
		var missing *MissingColumnError
		if _, err := r.Bind(relation(baseRow())); !errors.As(err, &missing) || missing.Column != "sv" {
			t.Errorf("Bind without the version column: %v", err)
		}
		if _, err := r.Bind(relation(with(baseRow(), text("sv", oidText, "7")))); err == nil ||
			!strings.Contains(err.Error(), `converter value.avro.schema.version.column column "sv": must be of an integer type`) {
			t.Errorf("Bind with a text version column: %v", err)
		}
	})
}

// TestAvroRouteToReusesBuffer checks that RouteTo writes the Avro bytes
// into the message's buffer: with a recycled buffer a row allocates no
// new bytes for them.
func TestAvroRouteToReusesBuffer(t *testing.T) {
	row := with(baseRow(), text("payload", oidJSONB, `{"a": 1}`))
	p := convPlan(t, DefaultConfig(), avroConv(true), row)
	cols := tuple(row)
	var m Message
	if err := p.RouteTo(&m, cols, commitTime); err != nil {
		t.Fatal(err)
	}
	first := &m.Buf[:1][0]
	if err := p.RouteTo(&m, cols, commitTime); err != nil {
		t.Fatal(err)
	}
	if &m.Buf[:1][0] != first {
		t.Error("the second RouteTo did not reuse the buffer")
	}
	if &m.Value[0] != &m.Buf[len(m.Buf)-len(m.Value)] {
		t.Error("the value is not in the message's buffer")
	}
}
