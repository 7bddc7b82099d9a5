package dbzimport

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/walrelay/walrelay/internal/connect/avro"
)

// AvroConverterClass is Confluent's Avro converter for Kafka Connect
// (avro-converter io/confluent/connect/avro/AvroConverter.java in
// confluentinc/schema-registry), which walrelay's avro converter
// reproduces.
const AvroConverterClass = "io.confluent.connect.avro.AvroConverter"

// prefixSchemaIDSerializer is the default of key.schema.id.serializer and
// value.schema.id.serializer (schema-serializer
// AbstractKafkaSchemaSerDeConfig): the 5-byte header 0x00 + the id, the
// only wire format walrelay writes.
const prefixSchemaIDSerializer = "io.confluent.kafka.serializers.schema.id.PrefixSchemaIdSerializer"

// avroBools are the AvroConverter options that map one to one onto a
// boolean of converter.<side>.*, with the same name.
var avroBools = []string{
	"auto.register.schemas",       // AbstractKafkaSchemaSerDeConfig.AUTO_REGISTER_SCHEMAS
	"use.latest.version",          // USE_LATEST_VERSION
	"latest.compatibility.strict", // LATEST_COMPATIBILITY_STRICT
	"normalize.schemas",           // NORMALIZE_SCHEMAS
	"connect.meta.data",           // AvroDataConfig.CONNECT_META_DATA_CONFIG
	"enhanced.avro.schema.support",
	"scrub.invalid.names",
}

// avroTuning are AvroConverter client settings that only tune how the
// Java client talks to the registry: walrelay waits for a registry that is
// down or slow (the stream waits, Postgres keeps the WAL) and retries it
// without a limit, and caches every id it was given.
var avroTuning = map[string]bool{
	"max.retries": true, "retries.wait.ms": true, "retries.max.wait.ms": true,
	"http.connect.timeout.ms": true, "http.read.timeout.ms": true,
	"max.schemas.per.subject": true, "latest.cache.size": true, "latest.cache.ttl.sec": true,
	"missing.cache.size": true, "missing.id.cache.ttl.sec": true, "missing.schema.cache.ttl.sec": true,
	"missing.version.cache.ttl.sec": true, "schema.registry.url.randomize": true, "use.apache.http.client": true,
	"bearer.auth.cache.expiry.buffer.seconds": true,
}

// avroRefused are AvroConverter options walrelay does not implement whatever
// their value, with the reason.
var avroRefused = map[string]string{
	"use.schema.id":            "walrelay never writes with a fixed schema id: it registers (or looks up) the schema it derives, as auto.register.schemas and use.latest.version say",
	"use.schema.guid":          "walrelay never writes with a fixed schema GUID",
	"use.latest.with.metadata": "walrelay does not choose schemas by their metadata",
	"context.name.strategy":    "walrelay uses the default context (subjects without a :.context: prefix)",
	"proxy.host":               "walrelay reaches the registry directly (HTTPS_PROXY in its environment applies to it as to any Go program)",
	"proxy.port":               "walrelay reaches the registry directly (HTTPS_PROXY in its environment applies to it as to any Go program)",
	"propagate.schema.tags":    "walrelay registers schemas without tags",
	"schema.format":            "walrelay registers the Avro schema text AvroData derives",
}

// userInfoRe matches the user info of a URL: scheme://user:password@.
var userInfoRe = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/?#@\s]*@`)

// redactUserInfo replaces the user info of every URL in s.
func redactUserInfo(s string) string {
	return userInfoRe.ReplaceAllString(s, "${1}(user info not printed)@")
}

// stripUserInfo removes the user info from each comma-separated URL of s;
// had reports whether one had some. A URL that does not parse is an error.
func stripUserInfo(s string) (out string, had bool, err error) {
	var urls []string
	for _, raw := range splitList(s) {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return "", false, fmt.Errorf("%q is not an http or https URL", redactUserInfo(raw))
		}
		if u.User != nil {
			had = true
			u.User = nil
		}
		urls = append(urls, u.String())
	}
	if len(urls) == 0 {
		return "", false, fmt.Errorf("no URL")
	}
	return strings.Join(urls, ","), had, nil
}

// envVar is the environment variable of a converter.* option.
func envVar(path string) string {
	return "WALRELAY_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(path))
}

// avro maps the options of an AvroConverter on side ("key" or "value")
// onto converter.<side>.*, Confluent's names with the <side>.converter.
// prefix stripped (AbstractKafkaSchemaSerDeConfig, SchemaRegistryClientConfig,
// AvroDataConfig in confluentinc/schema-registry). envelope says whether
// the router builds an envelope (a record schema). It returns the comment
// for converter.<side>. Secrets (basic.auth.user.info, bearer.auth.token,
// the stores' passwords) are never written: the YAML names the variables
// that carry them.
func (im *importer) avro(side string, envelope bool) string {
	pre := side + ".converter."
	out := "converter." + side + "."
	notes := []string{fmt.Sprintf("%s %s: walrelay's avro converter writes Confluent's wire format (0x00, the 4-byte schema id, Avro binary) with the schema AvroData derives from Debezium's Connect schema, registered in the schema registry below.", side+".converter", AvroConverterClass)}

	// The registry's URLs, without user info.
	url, ok := im.get(pre + "schema.registry.url")
	urlInfo := false
	switch stripped, had, err := stripUserInfo(url); {
	case !ok:
		im.check(pre+"schema.registry.url", "not set, and AvroConverter requires it: SET converter."+side+".schema.registry.url (walrelay's placeholder http://localhost:8081 is in the YAML)")
		im.set(out+"schema.registry.url", "http://localhost:8081", "SET THIS: the connector gives no "+pre+"schema.registry.url.")
	case providerRef.MatchString(url):
		im.drop(pre+"schema.registry.url", providerReason)
		im.set(out+"schema.registry.url", "http://localhost:8081", "SET THIS: the connector's "+pre+"schema.registry.url is a config provider reference.")
	case err != nil:
		im.drop(pre+"schema.registry.url", err.Error())
		im.set(out+"schema.registry.url", "http://localhost:8081", "SET THIS: the connector's "+pre+"schema.registry.url is not a URL walrelay reads.")
	default:
		urlInfo = had
		c := pre + "schema.registry.url."
		if had {
			c += " Its user info (user:password@) is left out: walrelay never writes a password into its configuration or output."
		}
		im.set(out+"schema.registry.url", stripped, c)
	}

	// Basic auth: USER_INFO, or URL, whose credentials are moved to
	// USER_INFO so that the URL holds none; SASL_INHERIT refused. Without
	// the option Confluent's client sends no credentials
	// (RestService.configure reads the connector's own settings, with no
	// default, and the URL's user info only with URL:
	// UrlBasicAuthCredentialProvider).
	userInfoVar := envVar(out + "basic.auth.user.info")
	userInfoKeys := []string{pre + "basic.auth.user.info", pre + "schema.registry.basic.auth.user.info"}
	userInfoUsed := false
	source, sourceSet := im.get(pre + "basic.auth.credentials.source")
	switch s := strings.ToUpper(strings.TrimSpace(source)); {
	case s == "": // unset or empty: none (RestService.configure's isNonEmpty)
		if sourceSet {
			im.ignore(pre+"basic.auth.credentials.source", "empty: no basic auth, walrelay's default")
		}
		if urlInfo {
			im.check(pre+"schema.registry.url", "its user info (user:password@) is left out of the URL; Confluent's client does not send it without basic.auth.credentials.source URL, so neither does walrelay")
		}
	case s == "USER_INFO" || (s == "URL" && urlInfo):
		im.set(out+"basic.auth.credentials.source", "USER_INFO", fmt.Sprintf("Basic auth: the user:password is a secret, not written here: set %s (or %s_FILE, a file holding it).", userInfoVar, userInfoVar))
		if s == "URL" {
			im.check(pre+"schema.registry.url", fmt.Sprintf("its user info (user:password@) is left out of the URL: give it to walrelay with %s or %s_FILE (converter.%s.basic.auth.credentials.source is USER_INFO)", userInfoVar, userInfoVar, side))
		} else {
			userInfoUsed = true
			if urlInfo {
				im.check(pre+"schema.registry.url", "its user info (user:password@) is left out of the URL; with USER_INFO neither Confluent's client nor walrelay uses it")
			}
		}
	case s == "URL":
		im.ignore(pre+"basic.auth.credentials.source", "URL with no user info in the URL: no basic auth, walrelay's default")
	case s == "SASL_INHERIT":
		im.drop(pre+"basic.auth.credentials.source", "SASL_INHERIT sends the Kafka client's SASL credentials to the registry; walrelay does not: set converter."+side+".basic.auth.credentials.source USER_INFO and "+userInfoVar)
	default:
		im.drop(pre+"basic.auth.credentials.source", "walrelay implements USER_INFO and URL")
	}
	for _, k := range userInfoKeys {
		if _, set := im.get(k); !set {
			continue
		}
		if userInfoUsed {
			im.check(k, fmt.Sprintf("a secret, left out of the YAML: give it to walrelay with %s or %s_FILE (a file holding user:password)", userInfoVar, userInfoVar))
		} else {
			im.ignore(k, "basic.auth.credentials.source is not USER_INFO, so Confluent's client does not send it either")
		}
	}

	// Bearer tokens: STATIC_TOKEN only; without the source option
	// Confluent's client sends no token.
	tokenVar := envVar(out + "bearer.auth.token")
	tokenUsed := false
	basicSet := strings.TrimSpace(source) != ""
	if v, ok := im.get(pre + "bearer.auth.credentials.source"); ok && strings.TrimSpace(v) != "" {
		if s := strings.ToUpper(strings.TrimSpace(v)); basicSet {
			im.drop(pre+"bearer.auth.credentials.source", "with basic.auth.credentials.source set too, Confluent's client refuses the configuration (RestService.configure: only one of them may be specified), and so does walrelay; the import keeps the basic auth")
		} else if s == "STATIC_TOKEN" {
			tokenUsed = true
			im.set(out+"bearer.auth.credentials.source", "STATIC_TOKEN", fmt.Sprintf("The bearer token is a secret, not written here: set %s (or %s_FILE, a file holding it).", tokenVar, tokenVar))
		} else {
			im.drop(pre+"bearer.auth.credentials.source", "walrelay implements STATIC_TOKEN only (a token it reads from "+tokenVar+" or a file); it fetches no OAuth tokens (OAUTHBEARER, SASL_OAUTHBEARER_INHERIT, CUSTOM)")
		}
	}
	if _, ok := im.get(pre + "bearer.auth.token"); ok {
		if tokenUsed {
			im.check(pre+"bearer.auth.token", fmt.Sprintf("a secret, left out of the YAML: give it to walrelay with %s or %s_FILE", tokenVar, tokenVar))
		} else {
			im.ignore(pre+"bearer.auth.token", "bearer.auth.credentials.source is not STATIC_TOKEN, so Confluent's client does not send it either")
		}
	}
	for _, k := range im.keys(pre + "bearer.auth.") {
		if !im.used[k] && !avroTuning[strings.TrimPrefix(k, pre)] {
			im.drop(k, "a setting of the OAuth bearer sources or Confluent Cloud headers walrelay does not implement (it sends a static token only)")
		}
	}

	// TLS: PEM files only.
	for _, st := range []struct{ store, what, convert string }{
		{"truststore", "the CAs that verify the registry", "openssl pkcs12 -in STORE.p12 -nokeys -out ca.pem"},
		{"keystore", "the client certificate and its key", "openssl pkcs12 -in STORE.p12 -nodes -out client.pem (certificate and unencrypted key in one file)"},
	} {
		loc, locSet := im.get(pre + "schema.registry.ssl." + st.store + ".location")
		typ, typSet := im.get(pre + "schema.registry.ssl." + st.store + ".type")
		t := strings.ToUpper(strings.TrimSpace(typ))
		if !typSet {
			t = "JKS" // Kafka's ssl.*.type default
		}
		passKey := pre + "schema.registry.ssl." + st.store + ".password"
		_, passSet := im.get(passKey)
		switch {
		case !locSet:
			if typSet {
				im.ignore(pre+"schema.registry.ssl."+st.store+".type", "no "+st.store+" location")
			}
			if passSet {
				im.ignore(passKey, "no "+st.store+" location")
			}
		case t == "PEM":
			im.set(out+"schema.registry.ssl."+st.store+".location", strings.TrimSpace(loc), "")
			im.set(out+"schema.registry.ssl."+st.store+".type", "PEM", "")
			if passSet {
				im.ignore(passKey, "walrelay reads the PEM file as it is, without a store password")
			}
		default:
			reason := fmt.Sprintf("a %s %s (%s): walrelay reads PEM files only. Convert it, then set converter.%s.schema.registry.ssl.%s.location to the PEM file and .type to PEM: ", t, st.store, st.what, side, st.store)
			if t == "JKS" {
				reason += fmt.Sprintf("keytool -importkeystore -srckeystore %s -destkeystore STORE.p12 -deststoretype PKCS12, then ", filepath.Base(strings.TrimSpace(loc)))
			}
			im.drop(pre+"schema.registry.ssl."+st.store+".location", reason+st.convert)
			if typSet {
				im.used[pre+"schema.registry.ssl."+st.store+".type"] = true
			}
			if passSet {
				im.check(passKey, "the "+st.store+"'s password, needed only to convert it to PEM (see the location)")
			}
		}
	}
	if _, ok := im.get(pre + "schema.registry.ssl.key.password"); ok {
		im.drop(pre+"schema.registry.ssl.key.password", "walrelay reads an unencrypted PEM key: decrypt it with openssl pkey -in key.pem -out key-plain.pem and keep that file private")
	}
	if v, ok := im.get(pre + "schema.registry.ssl.endpoint.identification.algorithm"); ok {
		if strings.EqualFold(strings.TrimSpace(v), "https") {
			im.ignore(pre+"schema.registry.ssl.endpoint.identification.algorithm", "walrelay always verifies the registry's host name (https)")
		} else {
			im.drop(pre+"schema.registry.ssl.endpoint.identification.algorithm", "walrelay always verifies the registry's host name against its certificate")
		}
	}

	// Subjects: the side's strategy; Confluent reads
	// key.subject.name.strategy for a key converter and
	// value.subject.name.strategy for a value converter.
	other := map[string]string{"key": "value", "value": "key"}[side]
	if _, ok := im.get(pre + other + ".subject.name.strategy"); ok {
		im.ignore(pre+other+".subject.name.strategy", "a "+side+" converter reads "+side+".subject.name.strategy only")
	}
	if v, ok := im.get(pre + side + ".subject.name.strategy"); ok {
		st, err := avro.ParseSubjectStrategy(v)
		short := strings.TrimPrefix(strings.TrimSpace(v), "io.confluent.kafka.serializers.subject.")
		switch {
		case short == "AssociatedNameStrategy":
			im.check(pre+side+".subject.name.strategy", "walrelay uses TopicNameStrategy, which AssociatedNameStrategy falls back to when the registry associates no subject with the topic: check that your registry has no associations for these topics")
		case err != nil:
			im.drop(pre+side+".subject.name.strategy", "walrelay implements TopicNameStrategy, RecordNameStrategy and TopicRecordNameStrategy")
		case st != avro.TopicNameStrategy && (side == "key" || !envelope):
			im.drop(pre+side+".subject.name.strategy", fmt.Sprintf("%s needs a record schema, and the %s is not one (the key is a column; the value is a record only with an envelope placement): Confluent's serializer throws on every such record, and walrelay refuses the combination", st, side))
		default:
			im.set(out+"subject.name.strategy", st.String(), "")
		}
	} else {
		notes = append(notes, fmt.Sprintf("Subjects: TopicNameStrategy (<topic>-%s), what %s.subject.name.strategy gives when unset on a registry without subject associations.", side, side))
	}

	autoRegister := true // AbstractKafkaSchemaSerDeConfig.AUTO_REGISTER_SCHEMAS' default
	if b, err := parseBool(im.conf[pre+"auto.register.schemas"]); err == nil {
		autoRegister = b
	}
	for _, o := range avroBools {
		v, ok := im.get(pre + o)
		if !ok {
			continue
		}
		b, err := parseBool(v)
		if err != nil {
			im.drop(pre+o, "not true or false")
			continue
		}
		if o == "use.latest.version" && b && autoRegister {
			// AbstractKafkaAvroSerializer.serializeImpl registers first:
			// use.latest.version is read only without auto-registration.
			im.ignore(pre+o, "read only with auto.register.schemas false: Confluent's serializer registers the schema first, as walrelay does")
			continue
		}
		comment := ""
		if o == "enhanced.avro.schema.support" {
			im.ignore(pre+o, "no effect on outbox records: AvroData reads it only for Connect schemas named or parameterised as its own enums and unions (io.confluent.connect.avro.Enum, io.confluent.connect.avro.Union: AvroData.fromConnectSchema, unionMemberFieldName), which the EventRouter's records never hold")
			comment = "enhanced.avro.schema.support has no effect on outbox records."
		}
		im.set(out+o, b, comment)
	}

	for _, o := range []string{"key.schema.id.serializer", "value.schema.id.serializer"} {
		if v, ok := im.get(pre + o); ok {
			if strings.TrimSpace(v) == prefixSchemaIDSerializer {
				im.ignore(pre+o, "the 0x00 + 4-byte id prefix, the only wire format walrelay writes")
			} else {
				im.drop(pre+o, "walrelay writes the schema id as Confluent's 5-byte prefix ("+prefixSchemaIDSerializer+") only")
			}
		}
	}
	for _, k := range im.keys(pre) {
		if im.used[k] {
			continue
		}
		o := strings.TrimPrefix(k, pre)
		switch {
		case avroRefused[o] != "":
			im.drop(k, avroRefused[o])
		case avroTuning[o]:
			im.ignore(k, "a tuning setting of Confluent's registry client: walrelay waits for a registry that is down or slow (the stream waits, Postgres keeps the WAL), retries without a limit, and keeps every id it was given")
		case o == "id.compatibility.strict":
			im.ignore(k, "read only with use.schema.id, which walrelay does not implement")
		case strings.HasPrefix(o, "rule.") || strings.HasPrefix(o, "validation.rules."):
			im.drop(k, "walrelay runs no data contract rules")
		case strings.HasPrefix(o, "request.header."):
			im.drop(k, "walrelay sends no extra HTTP headers to the registry")
		}
	}
	return strings.Join(notes, "\n\n")
}

// hasEnvelope reports whether the router's table.fields.additional.placement
// puts a column into an envelope, which makes the value a record.
func (im *importer) hasEnvelope() bool {
	for e := range strings.SplitSeq(im.routerConf.AdditionalPlacement, ",") {
		parts := strings.Split(e, ":")
		if len(parts) >= 2 && strings.EqualFold(strings.TrimSpace(parts[1]), "envelope") {
			return true
		}
	}
	return false
}
