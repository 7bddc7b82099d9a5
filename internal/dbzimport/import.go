// Package dbzimport turns a Debezium Postgres connector's configuration into
// the equivalent walrelay configuration, for `walrelay debezium import`.
//
// In: a [Connector] ([Parse] reads Kafka Connect's JSON, with or without the
// {"name":…,"config":…} wrapper, or a .properties file). Out: a [Result]
// holding walrelay's YAML, which `walrelay config` accepts as it is, and
// [Finding]s: every option walrelay cannot do what it does ([Dropped], with
// the reason), every assumption the user must check ([Check]), and every
// option that changes nothing walrelay does ([Ignored]).
//
// What maps (option names and defaults from Debezium's
// PostgresConnectorConfig, RelationalDatabaseConnectorConfig and
// CommonConnectorConfig): database.* to a libpq DSN without the password;
// slot.name, publication.name (Debezium's defaults debezium and
// dbz_publication when omitted); table.include.list to postgres.table; the
// options of the transform whose type is Debezium's EventRouter to router.*;
// key/value/header.converter to converter.* (Confluent's AvroConverter with
// its schema registry options included: avro.go); topic.creation.default.*
// to kafka.topic_*; heartbeat.interval.ms and status.update.interval.ms.
//
// The password is never written anywhere: not the DSN, not a comment, not
// a finding; the YAML names the variables that carry it instead
// (PGPASSWORD, WALRELAY_POSTGRES_DSN_FILE). Kafka Connect config provider
// references (${file:…}) in it are treated the same way. So are the schema
// registry's secrets (basic.auth.user.info, the user info of its URL,
// bearer.auth.token: WALRELAY_CONVERTER_<SIDE>_BASIC_AUTH_USER_INFO and
// ..._BEARER_AUTH_TOKEN, or their _FILE variants), and a finding prints no
// URL's user info.
//
// It reads no file and connects to nothing.
package dbzimport

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/walrelay/walrelay/internal/router"
)

// PostgresConnectorClass is the connector.class of Debezium's Postgres
// connector, the only one walrelay replaces.
const PostgresConnectorClass = "io.debezium.connector.postgresql.PostgresConnector"

// Debezium's defaults for the options that decide what walrelay streams.
const (
	// debeziumSlot is ReplicationConnection.Builder.DEFAULT_SLOT_NAME.
	debeziumSlot = "debezium"
	// debeziumPublication is ReplicationConnection.Builder.DEFAULT_PUBLICATION_NAME.
	debeziumPublication = "dbz_publication"
	// debeziumPlugin is PostgresConnectorConfig.PLUGIN_NAME's default.
	debeziumPlugin = "decoderbufs"
	// debeziumAutocreate is PUBLICATION_AUTOCREATE_MODE's default.
	debeziumAutocreate = "all_tables"
)

// Kind says what a Finding means for the import.
type Kind uint8

// Kinds of findings.
const (
	// Dropped: walrelay cannot do what the option (or Debezium's default
	// for it) does; the YAML goes without it. `walrelay debezium import`
	// exits 1 when there is one.
	Dropped Kind = iota + 1
	// Check: the import assumed something the connector config does not
	// say (the worker's converters) or that walrelay may treat differently
	// (the publication's tables, the password); the user must check it.
	Check
	// Ignored: the option changes nothing walrelay does or sends.
	Ignored
)

var kindNames = [...]string{Dropped: "not mapped", Check: "check", Ignored: "ignored"}

// String returns how the report heads the kind.
func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Finding is one option (or Debezium default) the report lists.
type Finding struct {
	Option string // connector option, e.g. tasks.max
	// Value is the option's value as it may be printed: secrets are
	// "(not printed)"; empty when the option is not set and the finding
	// is about Debezium's default.
	Value  string
	Kind   Kind
	Reason string
}

// String reads `tasks.max=1: reason` or, for a default, `plugin.name (not
// set): reason`.
func (f Finding) String() string {
	if f.Value == "" {
		return f.Option + " (not set): " + f.Reason
	}
	return f.Option + "=" + f.Value + ": " + f.Reason
}

// Result is an import's outcome.
type Result struct {
	// YAML is walrelay's configuration, with comments.
	YAML []byte
	// Findings are sorted by kind, then option.
	Findings []Finding
}

// Dropped reports whether some option could not be mapped.
func (r Result) Dropped() bool {
	return slices.ContainsFunc(r.Findings, func(f Finding) bool { return f.Kind == Dropped })
}

// Import maps c onto walrelay's configuration. Its error wraps ErrBadInput
// when c is not a Debezium Postgres connector.
func Import(c Connector) (Result, error) {
	class, ok := c.Config["connector.class"]
	switch class = strings.TrimSpace(class); {
	case !ok || class == "":
		return Result{}, fmt.Errorf("%w: no connector.class", ErrBadInput)
	case class != PostgresConnectorClass:
		return Result{}, fmt.Errorf("%w: connector.class %q: walrelay replaces %s only", ErrBadInput, class, PostgresConnectorClass)
	}
	im := &importer{conf: c.Config, name: c.Name, used: map[string]bool{"connector.class": true, "name": true}}
	im.connectorComments()
	im.postgres()
	im.replication()
	im.tableFilters()
	im.kafka()
	im.transforms() // before the converters: an envelope makes the value an Avro record
	im.converters()
	im.nameAdjustment()
	im.relay()
	im.rest()
	return im.result()
}

// importer holds one import's state.
type importer struct {
	conf     map[string]string
	name     string
	used     map[string]bool // options handled
	findings []Finding
	settings []setting
	header   []string // the document's head comment, one paragraph per entry

	prefix      string   // the connector's topic.prefix; "" when not set
	tables      []string // postgres.table when mapped, in the connector's order
	routerName  string   // the EventRouter transform's name; "" when none
	routerConf  router.Config
	dsnNoFiles  string // the DSN without TLS file parameters, for validation
	passwordSet bool
}

// setting is one option of the YAML.
type setting struct {
	path    string // walrelay's YAML path: postgres.dsn, router.route.by.field
	value   any    // string, []string (a YAML sequence), bool or int64
	comment string // head comment; "" for none
}

// get returns an option and marks it handled.
func (im *importer) get(key string) (string, bool) {
	v, ok := im.conf[key]
	if ok {
		im.used[key] = true
	}
	return v, ok
}

// getAny returns the first of keys that is set (current name first,
// then the ones older Debezium versions used).
func (im *importer) getAny(keys ...string) (key, value string, ok bool) {
	for _, k := range keys {
		if v, ok := im.get(k); ok {
			return k, v, true
		}
	}
	return keys[0], "", false
}

func (im *importer) add(kind Kind, option, reason string) {
	im.used[option] = true
	value, ok := im.conf[option]
	switch {
	case !ok:
		value = ""
	case secretOption(option):
		value = "(not printed)"
	case value == "":
		value = `""`
	default:
		value = redactUserInfo(value)
	}
	im.findings = append(im.findings, Finding{Option: option, Value: value, Kind: kind, Reason: reason})
}

func (im *importer) drop(option, reason string)   { im.add(Dropped, option, reason) }
func (im *importer) check(option, reason string)  { im.add(Check, option, reason) }
func (im *importer) ignore(option, reason string) { im.add(Ignored, option, reason) }

func (im *importer) set(path string, value any, comment string) {
	im.settings = append(im.settings, setting{path: path, value: value, comment: comment})
}

// secretOption reports options whose values are never printed.
func secretOption(key string) bool {
	k := strings.ToLower(key)
	for _, s := range []string{"password", "secret", "jaas.config", "credential", "token", "apikey", "api.key", "user.info"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// providerRef matches a Kafka Connect config provider reference,
// ${provider:[path:]key} (ConfigTransformer's DEFAULT_PATTERN); a plain
// ${name}, such as the router's ${routedByValue}, is not one.
var providerRef = regexp.MustCompile(`\$\{[^}]*?:(?:[^}]*?:)?[^}]*?\}`)

const providerReason = "a Kafka Connect config provider reference (${provider:path:key}), which walrelay does not resolve: write the value itself into the YAML"

// connectorComments names the connector and its topic prefix, which
// `walrelay debezium takeover` needs to find the connector's offsets.
func (im *importer) connectorComments() {
	prefixKey, prefix, ok := im.getAny("topic.prefix", "database.server.name")
	if prefixKey == "topic.prefix" {
		if _, old := im.get("database.server.name"); old {
			im.ignore("database.server.name", "replaced by topic.prefix since Debezium 2.0")
		}
	}
	name := im.name
	if name == "" {
		name = "<connector name>"
	}
	p := prefix
	if !ok || prefix == "" {
		p = "<topic.prefix>"
	} else {
		im.prefix = prefix
	}
	head := fmt.Sprintf("walrelay configuration imported by `walrelay debezium import` from Debezium connector %q. Check it with `walrelay config --config FILE`.", name)
	if im.name == "" {
		head = "walrelay configuration imported by `walrelay debezium import` from a Debezium connector whose name the input does not give. Check it with `walrelay config --config FILE`."
	}
	takeover := fmt.Sprintf("Debezium keeps its position in Kafka Connect's offsets topic under the connector's name and topic prefix (%s %q), which routing does not use. To start where the connector stopped: walrelay debezium takeover --connector %s --topic-prefix %s",
		prefixKey, prefix, shellWord(name), shellWord(p))
	if topic, ok := im.get("offsets.storage.topic"); ok {
		takeover += fmt.Sprintf(" (this connector's offsets are in topic %q, its offsets.storage.topic, not the worker's)", topic)
		im.check("offsets.storage.topic", "the connector keeps its offsets in this topic, not in the worker's offset.storage.topic: the takeover must read them there")
	}
	if plugin := strings.ToLower(strings.TrimSpace(im.conf["plugin.name"])); plugin != "pgoutput" {
		if plugin == "" {
			plugin = debeziumPlugin
		}
		takeover = fmt.Sprintf("Connector %s, %s %s. walrelay cannot take over its slot, which uses plugin %s: see plugin.name in the report for the switch.", shellWord(name), prefixKey, shellWord(p), plugin)
	}
	im.header = append(im.header, head, takeover)
	if !ok || prefix == "" {
		im.check("topic.prefix", "not set (Debezium requires it): the takeover needs the prefix the connector ran with")
	}
}

// keys returns the options starting with prefix, sorted.
func (im *importer) keys(prefix string) []string {
	var out []string
	for k := range im.conf {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// shellWord quotes s for a shell command line when it needs it.
func shellWord(s string) string {
	if regexp.MustCompile(`^[A-Za-z0-9_.,:/@+=-]+$`).MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func splitList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parseBool parses a boolean as Kafka's ConfigDef does: true or false,
// ignoring case and surrounding blanks.
func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%q is not a boolean", s)
}
