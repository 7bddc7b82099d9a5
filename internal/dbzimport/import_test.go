package dbzimport

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/walrelay/walrelay/internal/config"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// The connector configurations published by Debezium, imported as they
// are. Their sources:
//   - testdata/docs-postgresql-connector.json: the "Connector configuration
//     example" of Debezium's Postgres connector documentation,
//     documentation/modules/ROOT/pages/connectors/postgresql.adoc in
//     debezium/debezium (commit aad5519902997a3627fe296f77ea6d3452e9acce).
//   - testdata/examples-outbox-register-postgres.json: outbox/register-postgres.json
//     in debezium/debezium-examples (commit 90c3e426465f0e87ce792dfc1514e0ba71a4068e).
//
// The golden files hold the YAML and the report; cmd/walrelay's
// TestDebeziumImportThenConfig feeds the same files through the binary and
// `walrelay config`.
func TestImportPublishedExamples(t *testing.T) {
	for _, name := range []string{"docs-postgresql-connector", "examples-outbox-register-postgres"} {
		t.Run(name, func(t *testing.T) {
			c, res, out := importGolden(t, name)
			// The docs' password is also their user's and database's name:
			// look for it only where nothing else could put it.
			pw := c.Config["database.password"]
			for k, v := range c.Config {
				if v == pw && k != "database.password" {
					pw = ""
				}
			}
			if pw != "" && strings.Contains(out, pw) {
				t.Errorf("the password %q is in the output", pw)
			}
			if dsn := load(t, res.YAML).Postgres.DSN; strings.Contains(dsn, "password") || strings.Contains(dsn, "@") {
				t.Errorf("the DSN holds a password: %s", dsn)
			}
		})
	}
}

// importGolden imports testdata/<name>.json and compares the YAML and the
// report with testdata/<name>.golden; out is both, as the golden holds
// them.
func importGolden(t *testing.T, name string) (c Connector, res Result, out string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if c, err = Parse(data); err != nil {
		t.Fatal(err)
	}
	if res, err = Import(c); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	got.Write(res.YAML)
	got.WriteString("\n# ---- report ----\n")
	for _, f := range res.Findings {
		fmt.Fprintf(&got, "# %s: %s\n", f.Kind, f)
	}
	golden := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got.String() != string(want) {
		t.Errorf("import of %s differs from %s (run with -update if intended):\n%s", name, golden, got.String())
	}
	return c, res, got.String()
}

// TestImportAvroGolden pins the import of a connector on Confluent's
// AvroConverter for keys and values (testdata/confluent-avro-outbox.json,
// written for this test in the shape of Confluent's "Using Kafka Connect
// with Schema Registry" examples: the registry's URLs, basic auth with
// USER_INFO, a PEM truststore, the subject strategy and serializer
// options), and checks that `walrelay config` accepts the YAML with the
// secrets given as the YAML says (environment variables), and that no
// secret is printed.
func TestImportAvroGolden(t *testing.T) {
	c, res, out := importGolden(t, "confluent-avro-outbox")
	for _, k := range []string{"database.password", "key.converter.basic.auth.user.info", "value.converter.basic.auth.user.info"} {
		secret := c.Config[k]
		if secret == "" {
			t.Fatalf("the test connector has no %s", k)
		}
		for _, s := range []string{secret, secret[strings.Index(secret, ":")+1:]} {
			if strings.Contains(out, s) {
				t.Errorf("%s: %q is in the output", k, s)
			}
		}
	}
	// `walrelay config --config FILE` with the variables the YAML names,
	// and the CA file where walrelay runs.
	path := filepath.Join(t.TempDir(), "walrelay.yaml")
	if err := os.WriteFile(path, res.YAML, 0o600); err != nil {
		t.Fatal(err)
	}
	ca := writeCA(t)
	cfg, err := config.Load(nil, []string{"WALRELAY_CONFIG=" + path, "PGPASSWORD=x",
		"WALRELAY_CONVERTER_KEY_BASIC_AUTH_USER_INFO=" + c.Config["key.converter.basic.auth.user.info"],
		"WALRELAY_CONVERTER_VALUE_BASIC_AUTH_USER_INFO=" + c.Config["value.converter.basic.auth.user.info"],
		"WALRELAY_CONVERTER_KEY_SCHEMA_REGISTRY_SSL_TRUSTSTORE_LOCATION=" + ca,
		"WALRELAY_CONVERTER_VALUE_SCHEMA_REGISTRY_SSL_TRUSTSTORE_LOCATION=" + ca,
	})
	if err != nil {
		t.Fatalf("walrelay config refuses the imported YAML: %v", err)
	}
	conv := cfg.Converter
	if conv.Key != "avro" || conv.Value != "avro" || conv.ValueRegistryURL != "https://sr-1.internal:8081,https://sr-2.internal:8081" ||
		conv.ValueBasicAuthSource != "USER_INFO" || conv.ValueBasicAuthUserInfo != c.Config["value.converter.basic.auth.user.info"] ||
		conv.KeyRegistryCAType != "PEM" || conv.ValueSubjectStrategy != "TopicNameStrategy" || !conv.ValueEnhancedAvro {
		t.Errorf("converters %+v", conv)
	}
	if res.Dropped() {
		t.Errorf("some option was not mapped:\n%s", findingsText(res.Findings))
	}
}

// connector is a Postgres connector config with pgoutput, an outbox
// router and every converter set, which imports without a finding but
// the ones each case adds; opts are added over it ("-key" removes key).
func connector(opts ...string) Connector {
	c := map[string]string{
		"connector.class":                PostgresConnectorClass,
		"name":                           "orders-outbox",
		"tasks.max":                      "1",
		"database.hostname":              "db.internal",
		"database.port":                  "5433",
		"database.user":                  "dbz",
		"database.dbname":                "orders",
		"topic.prefix":                   "orders",
		"plugin.name":                    "pgoutput",
		"slot.name":                      "orders_slot",
		"publication.name":               "orders_pub",
		"publication.autocreate.mode":    "filtered",
		"table.include.list":             "public.outbox",
		"transforms":                     "outbox",
		"transforms.outbox.type":         "io.debezium.transforms.outbox.EventRouter",
		"key.converter":                  "org.apache.kafka.connect.storage.StringConverter",
		"value.converter":                "org.apache.kafka.connect.json.JsonConverter",
		"value.converter.schemas.enable": "false",
		"header.converter":               "org.apache.kafka.connect.storage.SimpleHeaderConverter",
	}
	for _, o := range opts {
		if k, ok := strings.CutPrefix(o, "-"); ok {
			delete(c, k)
			continue
		}
		k, v, _ := strings.Cut(o, "=")
		c[k] = v
	}
	return Connector{Name: c["name"], Config: c}
}

// load decodes an import's YAML as `walrelay config` does, with the
// registry secrets the YAML leaves to the environment given as the
// variables it names would give them.
func load(t *testing.T, out []byte) config.Config {
	t.Helper()
	c := config.Default()
	dec := yaml.NewDecoder(bytes.NewReader(out))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("decoding the YAML: %v\n%s", err, out)
	}
	conv := &c.Converter
	for _, s := range []struct {
		source, bearer  string
		userInfo, token *string
	}{
		{conv.KeyBasicAuthSource, conv.KeyBearerAuthSource, &conv.KeyBasicAuthUserInfo, &conv.KeyBearerAuthToken},
		{conv.ValueBasicAuthSource, conv.ValueBearerAuthSource, &conv.ValueBasicAuthUserInfo, &conv.ValueBearerAuthToken},
	} {
		if *s.userInfo != "" || *s.token != "" {
			t.Errorf("the YAML holds a registry secret:\n%s", out)
		}
		if s.source == "USER_INFO" {
			*s.userInfo = "user:password" // WALRELAY_CONVERTER_<SIDE>_BASIC_AUTH_USER_INFO
		}
		if s.bearer == "STATIC_TOKEN" {
			*s.token = "token" // WALRELAY_CONVERTER_<SIDE>_BEARER_AUTH_TOKEN
		}
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("the YAML does not validate: %v\n%s", err, out)
	}
	return c
}

func TestImport(t *testing.T) {
	ca := writeCA(t)
	for _, tc := range []struct {
		name string
		in   Connector
		// check inspects the loaded configuration.
		check func(t *testing.T, c config.Config)
		// findings are the findings expected, option → kind; every other
		// finding fails the test.
		findings map[string]Kind
		// absent are strings neither the YAML nor the findings may hold.
		absent []string
	}{
		{
			name: "everything mapped",
			in:   connector(),
			check: func(t *testing.T, c config.Config) {
				want := config.Default()
				want.Postgres.DSN = "host=db.internal port=5433 user=dbz dbname=orders"
				want.Postgres.Slot, want.Postgres.Publications, want.Postgres.Table = "orders_slot", []string{"orders_pub"}, config.StringList{"public.outbox"}
				want.Converter.Key, want.Converter.Value, want.Converter.ValueSchemasEnable, want.Converter.Header = "string", "json", false, "simple"
				want.Converter.TopicPrefix = "orders"
				want.Router.Type = "io.debezium.transforms.outbox.EventRouter"
				if got := c.String(); got != want.String() {
					t.Errorf("got\n%s\nwant\n%s", got, want.String())
				}
			},
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored},
		},
		{
			name: "Debezium's defaults: slot, publication, all_tables, worker converters",
			in: connector("-slot.name", "-publication.name", "-publication.autocreate.mode",
				"-key.converter", "-value.converter", "-value.converter.schemas.enable", "-header.converter"),
			check: func(t *testing.T, c config.Config) {
				if c.Postgres.Slot != "debezium" || c.Postgres.Publications[0] != "dbz_publication" {
					t.Errorf("slot %q publications %q, want Debezium's debezium and dbz_publication", c.Postgres.Slot, c.Postgres.Publications)
				}
				conv := c.Converter
				if conv.Key != "json" || !conv.KeySchemasEnable || conv.Value != "json" || !conv.ValueSchemasEnable || conv.Header != "simple" {
					t.Errorf("converters %+v, want the Connect worker defaults: json with schemas, simple headers", conv)
				}
			},
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Check,
				"key.converter": Check, "value.converter": Check, "header.converter": Check},
		},
		{
			name:     "all_tables set explicitly is dropped",
			in:       connector("publication.autocreate.mode=all_tables"),
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Dropped},
		},
		{
			name: "decoderbufs: walrelay's own slot and publication",
			in:   connector("-plugin.name"),
			check: func(t *testing.T, c config.Config) {
				if c.Postgres.Slot != "walrelay" || c.Postgres.Publications[0] != "walrelay_outbox" {
					t.Errorf("slot %q publications %q, want walrelay's own", c.Postgres.Slot, c.Postgres.Publications)
				}
			},
			findings: map[string]Kind{"tasks.max": Ignored, "plugin.name": Dropped, "publication.autocreate.mode": Ignored, "publication.name": Ignored},
		},
		{
			name: "password, sslpassword and a provider reference are never printed",
			in: connector("database.password=${file:/opt/secrets/pg.properties:password}", "database.sslpassword=KeyPassw0rd",
				"database.sslmode=VERIFY-FULL", "database.user=${env:PGUSER_SECRET}"),
			check: func(t *testing.T, c config.Config) {
				if c.Postgres.DSN != "host=db.internal port=5433 dbname=orders sslmode=verify-full" {
					t.Errorf("dsn %q", c.Postgres.DSN)
				}
			},
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored,
				"database.password": Check, "database.sslpassword": Check, "database.user": Dropped},
			absent: []string{"/opt/secrets", "KeyPassw0rd", "file:"},
		},
		{
			name: "a plain password and TLS files",
			in:   connector("database.password=S3cret pw", "database.sslrootcert="+ca, "database.sslmode=verify-ca"),
			check: func(t *testing.T, c config.Config) {
				if want := "host=db.internal port=5433 user=dbz dbname=orders sslmode=verify-ca sslrootcert=" + ca; c.Postgres.DSN != want {
					t.Errorf("dsn %q, want %q", c.Postgres.DSN, want)
				}
			},
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored, "database.password": Check},
			absent:   []string{"S3cret"},
		},
		{
			name: "the router under another name, other transforms and predicates dropped",
			in: connector("transforms=unwrap,events", "-transforms.outbox.type",
				"transforms.unwrap.type=io.debezium.transforms.ExtractNewRecordState",
				"transforms.events.type=io.debezium.transforms.outbox.EventRouter",
				"transforms.events.route.by.field=kind",
				"transforms.events.route.topic.regex=(?<kind>.*)",
				"transforms.events.route.topic.replacement=events.${kind}",
				"transforms.events.table.expand.json.payload=TRUE",
				"transforms.events.predicate=isOutbox",
				"transforms.events.no.such.option=1",
				"predicates=isOutbox",
				"predicates.isOutbox.type=org.apache.kafka.connect.transforms.predicates.TopicNameMatches"),
			check: func(t *testing.T, c config.Config) {
				r := c.Router
				if r.RouteByField != "kind" || r.RouteTopicRegex != "(?<kind>.*)" || r.RouteTopicReplacement != "events.${kind}" || !r.ExpandJSONPayload {
					t.Errorf("router %+v", r)
				}
			},
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored,
				"transforms.unwrap.type": Dropped, "transforms.events.predicate": Dropped, "transforms.events.no.such.option": Dropped,
				"predicates": Dropped, "predicates.isOutbox.type": Dropped},
		},
		{
			name: "a router option walrelay refuses is dropped, the rest kept",
			in: connector("transforms.outbox.route.topic.regex=(?<x>a)*+", "transforms.outbox.route.topic.replacement=t.${x}",
				"transforms.outbox.table.field.event.key=aggregate_id"),
			check: func(t *testing.T, c config.Config) {
				if c.Router.RouteTopicRegex != "(?<routedByValue>.*)" || c.Router.FieldEventKey != "aggregate_id" {
					t.Errorf("router %+v", c.Router)
				}
			},
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored,
				"transforms.outbox.route.topic.regex": Dropped, "transforms.outbox.route.topic.replacement": Dropped},
		},
		{
			name:     "no EventRouter",
			in:       connector("-transforms", "-transforms.outbox.type"),
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored, "transforms": Dropped},
		},
		{
			name: "binary with a json delegate, an Avro key converter",
			in: connector("key.converter=io.confluent.connect.avro.AvroConverter", "key.converter.schema.registry.url=http://sr:8081",
				"value.converter=io.debezium.converters.BinaryDataConverter",
				"value.converter.delegate.converter.type=org.apache.kafka.connect.json.JsonConverter",
				"value.converter.delegate.converter.type.schemas.enable=false"),
			check: func(t *testing.T, c config.Config) {
				conv := c.Converter
				if conv.Key != "avro" || conv.KeyRegistryURL != "http://sr:8081" || conv.Value != "binary" || conv.ValueDelegate != "json" || conv.ValueSchemasEnable {
					t.Errorf("converters %+v", conv)
				}
			},
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored,
				"value.converter.schemas.enable": Ignored, "field.name.adjustment.mode": Check},
		},
		{
			name: "AvroConverter values: every registry option",
			in: connector("value.converter=io.confluent.connect.avro.AvroConverter", "-value.converter.schemas.enable",
				"value.converter.schema.registry.url=https://sr-user:Url-P4ss@sr.internal:8081/",
				"value.converter.basic.auth.credentials.source=URL",
				"value.converter.schema.registry.ssl.truststore.location=/etc/kafka/secrets/sr.truststore.jks",
				"value.converter.schema.registry.ssl.truststore.password=Tr-P4ss",
				"value.converter.schema.registry.ssl.keystore.location=/etc/kafka/secrets/client.pem",
				"value.converter.schema.registry.ssl.keystore.type=pem",
				"value.converter.value.subject.name.strategy=io.confluent.kafka.serializers.subject.TopicRecordNameStrategy",
				"value.converter.key.subject.name.strategy=io.confluent.kafka.serializers.subject.RecordNameStrategy",
				"value.converter.auto.register.schemas=false", "value.converter.use.latest.version=true",
				"value.converter.latest.compatibility.strict=FALSE", "value.converter.normalize.schemas=true",
				"value.converter.connect.meta.data=false", "value.converter.scrub.invalid.names=true",
				"value.converter.enhanced.avro.schema.support=true",
				"value.converter.value.schema.id.serializer=io.confluent.kafka.serializers.schema.id.PrefixSchemaIdSerializer",
				"value.converter.max.retries=5", "value.converter.use.schema.id=3", "value.converter.context.name.strategy=com.example.Ctx",
				"transforms.outbox.table.fields.additional.placement=type:envelope:eventType"),
			check: func(t *testing.T, c config.Config) {
				conv := c.Converter
				if conv.Value != "avro" || conv.ValueRegistryURL != "https://sr.internal:8081/" || conv.ValueBasicAuthSource != "USER_INFO" ||
					conv.ValueRegistryCAFile != "" || conv.ValueRegistryCertFile != "/etc/kafka/secrets/client.pem" ||
					conv.ValueRegistryCertType != "PEM" || conv.ValueSubjectStrategy != "TopicRecordNameStrategy" ||
					conv.ValueAutoRegister || !conv.ValueUseLatestVersion || conv.ValueLatestStrict || !conv.ValueNormalizeSchemas ||
					conv.ValueConnectMetaData || !conv.ValueScrubInvalidNames || !conv.ValueEnhancedAvro {
					t.Errorf("converters %+v", conv)
				}
			},
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored,
				"value.converter.schema.registry.url":                     Check,
				"value.converter.schema.registry.ssl.truststore.location": Dropped,
				"value.converter.schema.registry.ssl.truststore.password": Check,
				"value.converter.key.subject.name.strategy":               Ignored,
				"value.converter.enhanced.avro.schema.support":            Ignored,
				"value.converter.value.schema.id.serializer":              Ignored,
				"value.converter.max.retries":                             Ignored,
				"value.converter.use.schema.id":                           Dropped,
				"value.converter.context.name.strategy":                   Dropped,
				"field.name.adjustment.mode":                              Check},
			absent: []string{"sr-user", "Url-P4ss", "Tr-P4ss"},
		},
		{
			name: "AvroConverter keys and values: USER_INFO and a static token never printed",
			in: connector("key.converter=io.confluent.connect.avro.AvroConverter", "value.converter=io.confluent.connect.avro.AvroConverter",
				"-value.converter.schemas.enable",
				"key.converter.schema.registry.url=http://sr:8081", "key.converter.basic.auth.credentials.source=USER_INFO",
				"key.converter.basic.auth.user.info=sr-key-user:Key-P4ss",
				"value.converter.schema.registry.url=http://sr:8081", "value.converter.bearer.auth.credentials.source=STATIC_TOKEN",
				"value.converter.bearer.auth.token=eyJ0b2tlbiI6InNlY3JldCJ9", "value.converter.bearer.auth.logical.cluster=lsrc-123"),
			check: func(t *testing.T, c config.Config) {
				conv := c.Converter
				if conv.Key != "avro" || conv.KeyBasicAuthSource != "USER_INFO" ||
					conv.Value != "avro" || conv.ValueBearerAuthSource != "STATIC_TOKEN" {
					t.Errorf("converters %+v", conv)
				}
			},
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored,
				"key.converter.basic.auth.user.info": Check, "value.converter.bearer.auth.token": Check,
				"value.converter.bearer.auth.logical.cluster": Dropped, "field.name.adjustment.mode": Check},
			absent: []string{"sr-key-user", "Key-P4ss", "eyJ0b2tlbiI6InNlY3JldCJ9"},
		},
		{
			name: "AvroConverter: what walrelay does not do",
			in: connector("key.converter=io.confluent.connect.avro.AvroConverter", "value.converter=io.confluent.connect.avro.AvroConverter",
				"-value.converter.schemas.enable",
				"key.converter.basic.auth.credentials.source=SASL_INHERIT",
				"key.converter.key.subject.name.strategy=RecordNameStrategy",
				"value.converter.schema.registry.url=http://sr:8081",
				"value.converter.bearer.auth.credentials.source=OAUTHBEARER", "value.converter.bearer.auth.client.secret=Cl-S3cret",
				"value.converter.value.subject.name.strategy=RecordNameStrategy",
				"value.converter.use.latest.with.metadata=app=orders",
				"value.converter.value.schema.id.serializer=io.confluent.kafka.serializers.schema.id.HeaderSchemaIdSerializer",
				"value.converter.schema.registry.ssl.keystore.location=/etc/kafka/client.p12",
				"value.converter.schema.registry.ssl.keystore.type=PKCS12",
				"value.converter.schema.registry.ssl.key.password=K3y-P4ss"),
			check: func(t *testing.T, c config.Config) {
				conv := c.Converter
				if conv.Key != "avro" || conv.KeyRegistryURL != "http://localhost:8081" || conv.KeyBasicAuthSource != "" ||
					conv.KeySubjectStrategy != "" || conv.ValueSubjectStrategy != "" || conv.ValueBearerAuthSource != "" || conv.ValueRegistryCertFile != "" {
					t.Errorf("converters %+v", conv)
				}
			},
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored,
				"key.converter.schema.registry.url":                     Check,
				"key.converter.basic.auth.credentials.source":           Dropped,
				"key.converter.key.subject.name.strategy":               Dropped,
				"value.converter.bearer.auth.credentials.source":        Dropped,
				"value.converter.bearer.auth.client.secret":             Dropped,
				"value.converter.value.subject.name.strategy":           Dropped,
				"value.converter.use.latest.with.metadata":              Dropped,
				"value.converter.value.schema.id.serializer":            Dropped,
				"value.converter.schema.registry.ssl.keystore.location": Dropped,
				"value.converter.schema.registry.ssl.key.password":      Dropped,
				"field.name.adjustment.mode":                            Check},
			absent: []string{"Cl-S3cret", "K3y-P4ss"},
		},
		{
			name: "AvroConverter: use.latest.version with auto-registration, basic auth and a bearer token",
			in: connector("value.converter=io.confluent.connect.avro.AvroConverter", "-value.converter.schemas.enable",
				"value.converter.schema.registry.url=http://sr:8081", "value.converter.use.latest.version=true",
				"value.converter.basic.auth.credentials.source=USER_INFO", "value.converter.basic.auth.user.info=u:Both-P4ss",
				"value.converter.bearer.auth.credentials.source=STATIC_TOKEN", "value.converter.bearer.auth.token=Both-T0ken"),
			check: func(t *testing.T, c config.Config) {
				conv := c.Converter
				if conv.Value != "avro" || conv.ValueUseLatestVersion || !conv.ValueAutoRegister || conv.ValueBasicAuthSource != "USER_INFO" || conv.ValueBearerAuthSource != "" {
					t.Errorf("converters %+v", conv)
				}
			},
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored,
				"value.converter.use.latest.version": Ignored, "value.converter.basic.auth.user.info": Check,
				"value.converter.bearer.auth.credentials.source": Dropped, "value.converter.bearer.auth.token": Ignored,
				"field.name.adjustment.mode": Check},
			absent: []string{"Both-P4ss", "Both-T0ken"},
		},
		{
			name: "JsonConverter headers without schemas",
			in:   connector("header.converter=org.apache.kafka.connect.json.JsonConverter", "header.converter.schemas.enable=false"),
			check: func(t *testing.T, c config.Config) {
				if c.Converter.Header != "json" || c.Converter.HeaderSchemasEnable {
					t.Errorf("converters %+v", c.Converter)
				}
			},
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored},
		},
		{
			name: "header schemas.enable without JsonConverter",
			in:   connector("header.converter.schemas.enable=false", "header.converter.other=1"),
			check: func(t *testing.T, c config.Config) {
				if c.Converter.Header != "simple" || !c.Converter.HeaderSchemasEnable {
					t.Errorf("converters %+v", c.Converter)
				}
			},
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored,
				"header.converter.schemas.enable": Ignored, "header.converter.other": Dropped},
		},
		{
			name:     "schema.name.adjustment.mode avro changes the envelope's name",
			in:       connector("topic.prefix=orders-db", "schema.name.adjustment.mode=avro", "transforms.outbox.table.fields.additional.placement=type:envelope"),
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored, "schema.name.adjustment.mode": Dropped},
		},
		{
			name:     "schema.name.adjustment.mode avro on valid names",
			in:       connector("schema.name.adjustment.mode=avro", "transforms.outbox.table.fields.additional.placement=type:envelope"),
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored, "schema.name.adjustment.mode": Ignored},
		},
		{
			name:     "schema.name.adjustment.mode avro_unicode without an envelope",
			in:       connector("topic.prefix=orders-db", "schema.name.adjustment.mode=avro_unicode"),
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored, "schema.name.adjustment.mode": Ignored},
		},
		{
			name:     "field.name.adjustment.mode avro without Avro",
			in:       connector("field.name.adjustment.mode=avro", "schema.name.adjustment.mode=none"),
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored, "field.name.adjustment.mode": Check, "schema.name.adjustment.mode": Ignored},
		},
		{
			name: "topic creation, heartbeat, status interval, producer overrides",
			in: connector("topic.creation.default.partitions=6", "topic.creation.default.replication.factor=3",
				"topic.creation.default.cleanup.policy=compact", "topic.creation.default.retention.ms=-1",
				"topic.creation.groups=big", "topic.creation.big.include=big\\..*", "topic.creation.enable=true",
				"heartbeat.interval.ms=10000", "status.update.interval.ms=500",
				"producer.override.bootstrap.servers=k1:9092, k2:9092", "producer.override.linger.ms=20",
				"producer.override.acks=all", "producer.override.compression.type=zstd"),
			check: func(t *testing.T, c config.Config) {
				k := c.Kafka
				if k.TopicPartitions != 6 || k.TopicReplicationFactor != 3 || !maps.Equal(k.TopicConfigs, config.StringMap{"cleanup.policy": "compact", "retention.ms": "-1"}) {
					t.Errorf("topic settings %d %d %v", k.TopicPartitions, k.TopicReplicationFactor, k.TopicConfigs)
				}
				if strings.Join(k.Brokers, ",") != "k1:9092,k2:9092" || k.Linger != 20*time.Millisecond {
					t.Errorf("brokers %v linger %v", k.Brokers, k.Linger)
				}
				if c.Relay.HeartbeatInterval != 10*time.Second || c.Postgres.StatusInterval != 500*time.Millisecond {
					t.Errorf("heartbeat %v status %v", c.Relay.HeartbeatInterval, c.Postgres.StatusInterval)
				}
			},
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored,
				"topic.creation.groups": Dropped, "topic.creation.big.include": Dropped, "topic.creation.enable": Dropped,
				"producer.override.acks": Ignored, "producer.override.compression.type": Dropped},
		},
		{
			name: "values walrelay's ranges refuse are dropped",
			in:   connector("heartbeat.interval.ms=50", "status.update.interval.ms=120000", "topic.creation.default.partitions=0"),
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored,
				"heartbeat.interval.ms": Dropped, "status.update.interval.ms": Dropped, "topic.creation.default.partitions": Dropped},
		},
		{
			name: "an escaped table name, matching schema filter",
			in:   connector(`table.include.list=inventory\.outboxevent`, "schema.include.list=inv.*", "table.exclude.list=public\\.audit"),
			check: func(t *testing.T, c config.Config) {
				if c.Postgres.Tables()[0].String() != "inventory.outboxevent" {
					t.Errorf("table %q", c.Postgres.Table)
				}
			},
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored,
				"schema.include.list": Ignored, "table.exclude.list": Ignored},
		},
		{
			name: "several tables, in the connector's order",
			in:   connector(`table.include.list=public.outbox,billing\.outbox,public.outbox`),
			check: func(t *testing.T, c config.Config) {
				if want := (config.StringList{"public.outbox", "billing.outbox"}); !slices.Equal(c.Postgres.Table, want) {
					t.Errorf("postgres.table %q, want %q", c.Postgres.Table, want)
				}
				if c.Postgres.RecordSchema() != "public" {
					t.Errorf("record schema %q, want the first table's, public", c.Postgres.RecordSchema())
				}
			},
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored},
		},
		{
			name: "a regex among the tables drops them all",
			in:   connector("table.include.list=public.outbox,billing.outbox_.*"),
			check: func(t *testing.T, c config.Config) {
				if want := config.Default().Postgres.Table; !slices.Equal(c.Postgres.Table, want) {
					t.Errorf("postgres.table %q, want walrelay's default %q", c.Postgres.Table, want)
				}
			},
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored, "table.include.list": Dropped},
		},
		{
			name: "filters that capture every table",
			in:   connector("table.include.list=public.outbox,billing.outbox", "schema.include.list=public,billing", "table.exclude.list=public\\.audit"),
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored,
				"schema.include.list": Ignored, "table.exclude.list": Ignored},
		},
		{
			name: "filters that leave a table out",
			in:   connector("table.include.list=public.outbox,billing.outbox", "schema.include.list=public", "table.exclude.list=bill.*\\.outbox"),
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored,
				"schema.include.list": Dropped, "table.exclude.list": Dropped},
		},
		{
			name:     "a table regex",
			in:       connector("table.include.list=public.outbox_.*"),
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored, "table.include.list": Dropped},
		},
		{
			name: "snapshot, slot and error options",
			in: connector("snapshot.mode=initial", "snapshot.fetch.size=1000", "slot.drop.on.stop=true",
				"errors.tolerance=all", "time.precision.mode=adaptive", "decimal.handling.mode=double", "some.unknown.option=x"),
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored,
				"snapshot.mode": Dropped, "snapshot.fetch.size": Ignored, "slot.drop.on.stop": Dropped, "errors.tolerance": Dropped,
				"time.precision.mode": Ignored, "decimal.handling.mode": Dropped, "some.unknown.option": Dropped},
		},
		{
			name: "slot.failover maps to postgres.slot_failover",
			in:   connector("slot.failover=true"),
			check: func(t *testing.T, c config.Config) {
				if c.Postgres.SlotFailover != config.FailoverTrue {
					t.Errorf("postgres.slot_failover %q, want true", c.Postgres.SlotFailover)
				}
			},
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored},
		},
		{
			name: "slot.failover=false (Debezium's default) is kept",
			in:   connector("slot.failover=false"),
			check: func(t *testing.T, c config.Config) {
				if c.Postgres.SlotFailover != config.FailoverFalse {
					t.Errorf("postgres.slot_failover %q, want false", c.Postgres.SlotFailover)
				}
			},
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored},
		},
		{
			name:     "snapshot no_data",
			in:       connector("snapshot.mode=no_data", "database.server.name=old"),
			findings: map[string]Kind{"tasks.max": Ignored, "publication.autocreate.mode": Ignored, "snapshot.mode": Ignored, "database.server.name": Ignored},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Import(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			c := load(t, res.YAML)
			if tc.check != nil {
				tc.check(t, c)
			}
			got := map[string]Kind{}
			for _, f := range res.Findings {
				got[f.Option] = f.Kind
			}
			if !maps.Equal(got, tc.findings) {
				t.Errorf("findings:\n%s\nwant %v", findingsText(res.Findings), tc.findings)
			}
			wantDropped := false
			for _, k := range tc.findings {
				wantDropped = wantDropped || k == Dropped
			}
			if res.Dropped() != wantDropped {
				t.Errorf("Dropped() = %t, want %t", res.Dropped(), wantDropped)
			}
			all := string(res.YAML) + findingsText(res.Findings)
			for _, s := range append(tc.absent, secrets(tc.in)...) {
				if strings.Contains(all, s) {
					t.Errorf("the output holds %q:\n%s", s, all)
				}
			}
		})
	}
}

// writeCA writes a self-signed CA certificate for a DSN's sslrootcert,
// which walrelay's validation reads.
func writeCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// secrets returns the values of the options holding secrets: passwords,
// a registry's user:password and tokens (and the password part of the
// user info).
func secrets(c Connector) []string {
	var out []string
	for k, v := range c.Config {
		if v == "" || !strings.Contains(k, "password") && !strings.Contains(k, "user.info") && !strings.Contains(k, "token") {
			continue
		}
		out = append(out, v)
		if _, pw, ok := strings.Cut(v, ":"); ok && strings.Contains(k, "user.info") {
			out = append(out, pw)
		}
	}
	return out
}

func findingsText(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "  %s: %s\n", f.Kind, f)
	}
	return b.String()
}

func TestImportBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Connector
		want string
	}{
		{"no connector.class", Connector{Config: map[string]string{"database.hostname": "db"}}, "no connector.class"},
		{"another connector", Connector{Config: map[string]string{"connector.class": "io.debezium.connector.mysql.MySqlConnector"}}, `connector.class "io.debezium.connector.mysql.MySqlConnector"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Import(tc.in)
			if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want ErrBadInput naming %s", err, tc.want)
			}
		})
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    Connector
		wantErr string
	}{
		{
			name: "REST body with wrapper",
			in:   `{"name": "c1", "config": {"connector.class": "X", "tasks.max": 1, "slot.drop.on.stop": false}}`,
			want: Connector{Name: "c1", Config: map[string]string{"connector.class": "X", "tasks.max": "1", "slot.drop.on.stop": "false"}},
		},
		{
			name: "GET /connectors/NAME with tasks and type",
			in:   "\ufeff" + `{"name": "c1", "config": {"name": "c1", "a": "b"}, "tasks": [], "type": "source"}`,
			want: Connector{Name: "c1", Config: map[string]string{"name": "c1", "a": "b"}},
		},
		{
			name: "config alone, name inside",
			in:   `  {"name": "c2", "connector.class": "X"}`,
			want: Connector{Name: "c2", Config: map[string]string{"name": "c2", "connector.class": "X"}},
		},
		{
			name: "properties",
			in: "# a comment\n! another\nname=c3\nconnector.class : X\ntasks.max 1\n" +
				"transforms.outbox.route.topic.replacement=${routedByValue}.events\n" +
				"long=a,\\\n    b\nkey\\=with\\:colon=v\\u00e9\\t\n\n   \nempty=\n",
			want: Connector{Name: "c3", Config: map[string]string{"name": "c3", "connector.class": "X", "tasks.max": "1",
				"transforms.outbox.route.topic.replacement": "${routedByValue}.events", "long": "a,b", "key=with:colon": "vé\t", "empty": ""}},
		},
		{name: "bad JSON", in: `{"name": "c1", "config": {`, wantErr: "parsing JSON"},
		{name: "a list value", in: `{"transforms": ["outbox"]}`, wantErr: `option "transforms": want a string, number or boolean`},
		{name: "two objects", in: `{"a": "b"} {"c": "d"}`, wantErr: "text after the top-level object"},
		{name: "names differ", in: `{"name": "a", "config": {"name": "b"}}`, wantErr: `names the connector "a" and its config "b"`},
		{name: "bad unicode escape", in: `key=\u12`, wantErr: "line 1: malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.in))
			if tc.wantErr != "" {
				if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want ErrBadInput with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != tc.want.Name || !maps.Equal(got.Config, tc.want.Config) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestImportAvroCombinations imports every combination of the
// AvroConverter options whose values interact (auth sources, URLs with and
// without user info, strategies with and without an envelope), with the
// registration options and the stores cycled through, on either side:
// each must give YAML that walrelay validates (Import errors otherwise)
// and print no secret.
func TestImportAvroCombinations(t *testing.T) {
	opt := func(name string, values ...string) [][]string {
		out := [][]string{nil}
		for _, v := range values {
			out = append(out, []string{name + "=" + v})
		}
		return out
	}
	dims := [][][]string{
		opt("schema.registry.url", "http://sr:8081", "https://u:Url-P4ss@sr:8081,https://sr2:8081", "ftp://sr"),
		append(opt("basic.auth.credentials.source", "USER_INFO", "URL", "SASL_INHERIT", ""),
			[]string{"basic.auth.credentials.source=USER_INFO", "basic.auth.user.info=u:Ui-P4ss"},
			[]string{"basic.auth.user.info=u:Ui-P4ss"}),
		append(opt("bearer.auth.credentials.source", "STATIC_TOKEN", "OAUTHBEARER"),
			[]string{"bearer.auth.credentials.source=STATIC_TOKEN", "bearer.auth.token=T0ken-S3cret"}),
		opt("SIDE.subject.name.strategy", "TopicNameStrategy", "io.confluent.kafka.serializers.subject.RecordNameStrategy",
			"TopicRecordNameStrategy", "AssociatedNameStrategy", "com.example.Custom"),
		{nil, {"auto.register.schemas=false"}, {"use.latest.version=true"}, {"auto.register.schemas=false", "use.latest.version=true"}},
		{nil, {"schema.registry.ssl.truststore.location=/s/ca.pem", "schema.registry.ssl.truststore.type=PEM"},
			{"schema.registry.ssl.truststore.location=/s/ts.jks", "schema.registry.ssl.truststore.password=Ts-P4ss"},
			{"schema.registry.ssl.keystore.location=/s/c.pem", "schema.registry.ssl.keystore.type=PEM"}},
	}
	cycled := dims[4:]
	dims = dims[:4]
	n := 0
	for _, side := range []string{"key", "value"} {
		for _, envelope := range []bool{false, true} {
			idx := make([]int, len(dims))
			for {
				opts := []string{side + ".converter=" + AvroConverterClass, "-value.converter.schemas.enable"}
				add := func(d [][]string, i int) {
					for _, o := range d[i] {
						opts = append(opts, side+".converter."+strings.ReplaceAll(o, "SIDE", side))
					}
				}
				for d, i := range idx {
					add(dims[d], i)
				}
				for k, d := range cycled {
					add(d, (n+k)%len(d))
				}
				if envelope {
					opts = append(opts, "transforms.outbox.table.fields.additional.placement=type:envelope:eventType")
				}
				res, err := Import(connector(opts...))
				n++
				if err != nil {
					t.Fatalf("%v: %v", opts, err)
				}
				all := string(res.YAML) + findingsText(res.Findings)
				for _, s := range []string{"Url-P4ss", "Ui-P4ss", "T0ken-S3cret", "Ts-P4ss"} {
					if strings.Contains(all, s) {
						t.Fatalf("%v: the output holds %q:\n%s", opts, s, all)
					}
				}
				// Next combination.
				d := 0
				for ; d < len(dims); d++ {
					if idx[d]++; idx[d] < len(dims[d]) {
						break
					}
					idx[d] = 0
				}
				if d == len(dims) {
					break
				}
			}
		}
	}
	t.Logf("%d combinations imported", n)
}
