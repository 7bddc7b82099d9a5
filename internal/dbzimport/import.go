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
// key/value/header.converter to converter.*; topic.creation.default.* to
// kafka.topic_*; heartbeat.interval.ms and status.update.interval.ms.
//
// The password is never written anywhere: not the DSN, not a comment, not
// a finding; the YAML names the variables that carry it instead
// (PGPASSWORD, WALRELAY_POSTGRES_DSN_FILE). Kafka Connect config provider
// references (${file:…}) in it are treated the same way.
//
// It reads no file and connects to nothing.
package dbzimport

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

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
	im.tables()
	im.kafka()
	im.converters()
	im.transforms()
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

	prefix      string // the connector's topic.prefix; "" when not set
	table       string // postgres.table when mapped
	routerName  string // the EventRouter transform's name; "" when none
	routerConf  router.Config
	dsnNoFiles  string // the DSN without TLS file parameters, for validation
	passwordSet bool
}

// setting is one option of the YAML.
type setting struct {
	path    string // walrelay's YAML path: postgres.dsn, router.route.by.field
	value   any    // string, bool or int64
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
	for _, s := range []string{"password", "secret", "jaas.config", "credential", "token", "apikey", "api.key"} {
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

// postgres maps database.* onto postgres.dsn, without the password.
func (im *importer) postgres() {
	type param struct{ opt, key, def string }
	params := []param{
		{"database.hostname", "host", ""},
		{"database.port", "port", "5432"},
		{"database.user", "user", ""},
		{"database.dbname", "dbname", ""},
		{"database.sslmode", "sslmode", ""},
		{"database.sslrootcert", "sslrootcert", ""},
		{"database.sslcert", "sslcert", ""},
		{"database.sslkey", "sslkey", ""},
	}
	var dsn, noFiles []string
	for _, p := range params {
		v, ok := im.get(p.opt)
		v = strings.TrimSpace(v)
		if !ok || v == "" {
			if p.def == "" {
				continue
			}
			v = p.def
		}
		if providerRef.MatchString(v) {
			im.drop(p.opt, providerReason)
			continue
		}
		switch p.key {
		case "port":
			if n, err := strconv.Atoi(v); err != nil || n < 1 || n > 65535 {
				im.drop(p.opt, "not a port number")
				continue
			}
		case "sslmode":
			v = strings.ToLower(v)
			if !slices.Contains([]string{"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}, v) {
				im.drop(p.opt, "not an sslmode Debezium or libpq knows (disable, allow, prefer, require, verify-ca, verify-full)")
				continue
			}
		}
		kv := p.key + "=" + dsnValue(v)
		dsn = append(dsn, kv)
		switch p.key {
		case "sslrootcert", "sslcert", "sslkey":
		default:
			noFiles = append(noFiles, kv)
		}
	}
	im.dsnNoFiles = strings.Join(noFiles, " ")

	var comment []string
	if pw, ok := im.get("database.password"); ok && pw != "" {
		im.passwordSet = true
		via := ""
		if providerRef.MatchString(pw) {
			via = " (the connector reads it through a Kafka Connect config provider)"
		}
		comment = append(comment, "The connector's database.password"+via+" is left out: walrelay never writes a password into its configuration or output. Give it to walrelay with PGPASSWORD (or ~/.pgpass), or write this DSN with password=... added to a file and set WALRELAY_POSTGRES_DSN_FILE to that file's path (it then replaces the dsn below).")
		im.check("database.password", "left out of postgres.dsn: set PGPASSWORD, or WALRELAY_POSTGRES_DSN_FILE to a file holding the DSN with the password (see the comment on postgres.dsn)")
	}
	if _, ok := im.get("database.sslpassword"); ok {
		comment = append(comment, "The key's password (database.sslpassword) is left out too: add sslpassword=... to the DSN in the file WALRELAY_POSTGRES_DSN_FILE names.")
		im.check("database.sslpassword", "left out of postgres.dsn: add sslpassword=... to the DSN in the file WALRELAY_POSTGRES_DSN_FILE names")
	}
	if len(dsn) == 0 {
		// Debezium requires database.hostname, user and dbname; with
		// none, the DSN would be empty, which walrelay refuses.
		dsn = []string{"host=localhost", "port=5432"}
		im.dsnNoFiles = strings.Join(dsn, " ")
		comment = append(comment, "The connector gives no database.hostname: set the host.")
	}
	im.set("postgres.dsn", strings.Join(dsn, " "), strings.Join(comment, "\n\n"))

	for _, opt := range im.keys("database.") {
		switch opt {
		case "database.server.name":
			continue // connectorComments
		case "database.sslfactory":
			im.drop(opt, "a JDBC SSL socket factory; libpq's sslmode (require does not verify the server's certificate, verify-full does) is walrelay's way")
		case "database.tcpKeepAlive":
			if strings.EqualFold(strings.TrimSpace(im.conf[opt]), "true") {
				im.ignore(opt, "walrelay's connections use TCP keepalives")
			} else {
				im.drop(opt, "walrelay's connections always use TCP keepalives")
			}
		case "database.initial.statements":
			im.drop(opt, "walrelay runs no statements of yours when it connects (libpq's options=-c name=value in the DSN sets session parameters)")
		case "database.query.timeout.ms":
			im.ignore(opt, "the timeout of Debezium's JDBC queries; walrelay's replication stream has none of them")
		default:
			if !im.used[opt] {
				im.drop(opt, "Debezium passes it to the JDBC driver; walrelay's DSN takes libpq's parameters: add the equivalent to postgres.dsn if you need one")
			}
		}
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

// dsnValue quotes a libpq key=value value when it needs it.
func dsnValue(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\n'\\") {
		return v
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// shellWord quotes s for a shell command line when it needs it.
func shellWord(s string) string {
	if regexp.MustCompile(`^[A-Za-z0-9_.,:/@+=-]+$`).MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// replication maps the plugin, slot and publication.
func (im *importer) replication() {
	plugin, pluginSet := im.get("plugin.name")
	plugin = strings.ToLower(strings.TrimSpace(plugin))
	if plugin == "" {
		plugin = debeziumPlugin
	}
	slot, slotSet := im.get("slot.name")
	if slot = strings.TrimSpace(slot); slot == "" {
		slot = debeziumSlot
	}
	pub, _ := im.get("publication.name")
	if pub = strings.TrimSpace(pub); pub == "" {
		pub = debeziumPublication
	}
	mode, modeSet := im.get("publication.autocreate.mode")
	if mode = strings.ToLower(strings.TrimSpace(mode)); mode == "" {
		mode = debeziumAutocreate
	}

	if plugin != "pgoutput" {
		ownSlot := "walrelay"
		if slot == ownSlot {
			ownSlot = "walrelay_pgoutput"
		}
		def := ""
		if !pluginSet {
			def = ", Debezium's default"
		}
		reason := fmt.Sprintf("the connector streams with plugin %s%s; walrelay reads only pgoutput, and a slot's plugin is fixed when it is created, so walrelay cannot take over slot %q. "+
			"To switch: with the connector still running, run `walrelay setup` (it creates publication walrelay_outbox for postgres.table and the pgoutput slot %s, which starts at the current WAL position); "+
			"then stop the connector and start walrelay: events committed between the two are sent by both (consumers dedupe on the id header) and none is lost; "+
			"then drop the connector's slot (`walrelay slot drop %s`) so it stops holding WAL",
			plugin, def, slot, ownSlot, slot)
		im.add(Dropped, "plugin.name", reason)
		if !slotSet {
			im.used["slot.name"] = true
		}
		im.set("postgres.slot", ownSlot, fmt.Sprintf("Not the connector's slot %q: it uses plugin %s, which walrelay cannot read. `walrelay setup` creates this pgoutput slot (see the report).", slot, plugin))
		im.set("postgres.publications", "walrelay_outbox", "Plugin "+plugin+" uses no publication; `walrelay setup` creates this one: postgres.table, INSERTs only.")
		for _, opt := range []string{"publication.name", "publication.autocreate.mode"} {
			if _, ok := im.conf[opt]; ok {
				im.ignore(opt, "applies only to pgoutput, and the connector uses "+plugin)
			}
		}
		return
	}

	slotComment := "The connector's slot (slot.name)."
	if !slotSet {
		slotComment = "The connector's slot: slot.name is not set, so Debezium's default."
	}
	im.set("postgres.slot", slot, slotComment)
	if v, ok := im.get("slot.failover"); ok {
		switch v = strings.ToLower(strings.TrimSpace(v)); v {
		case "true", "false":
			im.set("postgres.slot_failover", v, "The connector's slot.failover (PostgreSQL 17+). Without it walrelay's default, auto, makes the slot a failover slot wherever the server can have one.")
		default:
			im.drop("slot.failover", "neither true nor false")
		}
	}
	pubComment := "The connector's publication (publication.name)."
	if _, ok := im.conf["publication.name"]; !ok {
		pubComment = "The connector's publication: publication.name is not set, so Debezium's default."
	}
	allTables := fmt.Sprintf("Debezium created publication %s FOR ALL TABLES if it did not exist (and uses it as it is if it did). "+
		"walrelay treats every table of its publications as an outbox table: it refuses to start when one lacks the router's columns, and a change to such a table while it streams stops it. "+
		"Check with SELECT * FROM pg_publication_tables WHERE pubname = '%s'; if it holds more than the outbox, give walrelay a publication of the outbox alone "+
		"(`walrelay setup` creates the first of postgres.publications as FOR TABLE <postgres.table> WITH (publish = 'insert') when it does not exist, and leaves an existing one as it is). "+
		"Postgres decodes WAL with its publications as they were when the WAL was written, so create or change it before the position walrelay starts from",
		pub, strings.ReplaceAll(pub, "'", "''"))
	switch mode {
	case "all_tables":
		if modeSet {
			im.drop("publication.autocreate.mode", allTables)
		} else {
			im.check("publication.autocreate.mode", "Debezium's default is all_tables: "+allTables)
		}
		pubComment += " CHECK the tables it holds: Debezium's publication.autocreate.mode all_tables makes it FOR ALL TABLES, and walrelay treats every table of its publications as an outbox table (see the report)."
	case "filtered":
		im.ignore("publication.autocreate.mode", "the publication exists already, created by the connector for the tables it captures; walrelay run creates none (`walrelay setup` creates the first of postgres.publications for postgres.table when it does not exist)")
	case "disabled":
		im.ignore("publication.autocreate.mode", "walrelay run does not create publications either")
	case "no_tables":
		im.drop("publication.autocreate.mode", "a publication with no table publishes nothing; walrelay needs the outbox table in it (`walrelay setup` creates the first of postgres.publications for postgres.table when it does not exist)")
	default:
		im.drop("publication.autocreate.mode", "not a mode Debezium knows (all_tables, filtered, disabled, no_tables)")
	}
	im.set("postgres.publications", pub, pubComment)
}

// tableRe is one schema-qualified table name written as Debezium's table
// filters match it: schema, a dot (escaped or not), table.
var tableRe = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_$]*)(?:\\?\.)([A-Za-z_][A-Za-z0-9_$]*)$`)

// tables maps table.include.list onto postgres.table and reports the
// other capture filters.
func (im *importer) tables() {
	key, list, ok := im.getAny("table.include.list", "table.whitelist")
	if !ok || strings.TrimSpace(list) == "" {
		im.check(key, "not set: the connector captures every table, and walrelay relays one outbox table: postgres.table keeps walrelay's default public.outbox; set it to the outbox")
	} else {
		entries := splitList(list)
		switch m := tableRe.FindStringSubmatch(entries[0]); {
		case len(entries) > 1:
			im.drop(key, "walrelay relays one outbox table (postgres.table), and this lists several: set postgres.table to the outbox among them (Debezium's default public.outbox is kept)")
		case m == nil:
			im.drop(key, "a regular expression walrelay cannot turn into one table name: set postgres.table to the outbox table")
		default:
			im.table = m[1] + "." + m[2]
			im.set("postgres.table", im.table, "The outbox table ("+key+").")
		}
	}
	if key == "table.include.list" {
		if _, old := im.get("table.whitelist"); old {
			im.ignore("table.whitelist", "replaced by table.include.list")
		}
	}
	schema, _, _ := strings.Cut(im.table, ".")
	filters := []struct {
		keys    []string
		include bool
		target  string // what the filter is matched against
	}{
		{[]string{"schema.include.list", "schema.whitelist"}, true, schema},
		{[]string{"schema.exclude.list", "schema.blacklist"}, false, schema},
		{[]string{"table.exclude.list", "table.blacklist"}, false, im.table},
	}
	for _, f := range filters {
		for _, k := range f.keys {
			v, ok := im.get(k)
			if !ok {
				continue
			}
			matched := im.table != "" && matchesAny(splitList(v), f.target)
			switch {
			case f.include && matched:
				im.ignore(k, "it includes postgres.table's schema, the only one walrelay reads")
			case !f.include && im.table != "" && !matched:
				im.ignore(k, "it does not exclude postgres.table, the only table walrelay reads")
			default:
				im.drop(k, "walrelay reads postgres.table alone; this filter has no equivalent")
			}
		}
	}
}

// matchesAny reports whether one of Debezium's filter regexes matches all
// of s, ignoring case as Debezium's filters do.
func matchesAny(patterns []string, s string) bool {
	for _, p := range patterns {
		re, err := regexp.Compile(`(?i)^(?:` + p + `)$`)
		if err == nil && re.MatchString(s) {
			return true
		}
	}
	return false
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

// kafka maps topic.creation.* and the producer overrides walrelay has
// settings for. The brokers are the worker's (bootstrap.servers), not in
// the connector config.
func (im *importer) kafka() {
	if v, ok := im.get("producer.override.bootstrap.servers"); ok && !providerRef.MatchString(v) && len(splitList(v)) > 0 {
		im.set("kafka.brokers", strings.Join(splitList(v), ","), "The connector's producer.override.bootstrap.servers.")
	} else {
		if ok {
			im.drop("producer.override.bootstrap.servers", providerReason)
		}
		im.set("kafka.brokers", "localhost:9092", "SET THIS: the brokers are the Kafka Connect worker's bootstrap.servers, which the connector config does not hold (walrelay's default shown).")
	}
	if v, ok := im.get("producer.override.client.id"); ok {
		im.set("kafka.client_id", v, "The connector's producer.override.client.id.")
	}
	if v, ok := im.get("producer.override.linger.ms"); ok {
		if ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32); err == nil && ms >= 0 {
			im.set("kafka.linger", (time.Duration(ms) * time.Millisecond).String(), "The connector's producer.override.linger.ms.")
		} else {
			im.drop("producer.override.linger.ms", "not a number of milliseconds")
		}
	}
	for _, opt := range im.keys("producer.override.") {
		if im.used[opt] {
			continue
		}
		v := strings.ToLower(strings.TrimSpace(im.conf[opt]))
		switch {
		case opt == "producer.override.acks" && (v == "all" || v == "-1"):
			im.ignore(opt, "walrelay always produces with acks=all")
		case opt == "producer.override.enable.idempotence" && v == "true":
			im.ignore(opt, "walrelay's producer is always idempotent")
		default:
			im.drop(opt, "a producer setting walrelay does not take (its Kafka client is configured with kafka.*)")
		}
	}

	topicConfigs := map[string]string{}
	for _, opt := range im.keys("topic.creation.") {
		v := strings.TrimSpace(im.conf[opt])
		rest := strings.TrimPrefix(opt, "topic.creation.")
		switch {
		case opt == "topic.creation.enable":
			im.drop(opt, "a Kafka Connect worker setting; walrelay creates a routed topic the first time it is used when kafka.create_topics is true (its default)")
		case opt == "topic.creation.groups":
			im.drop(opt, "walrelay creates every topic with the same settings: the default group's (topic.creation.default.*)")
		case rest == "default.partitions":
			if n, err := strconv.ParseInt(v, 10, 32); err == nil && (n > 0 || n == -1) {
				im.set("kafka.topic_partitions", n, "topic.creation.default.partitions.")
				im.used[opt] = true
			} else {
				im.drop(opt, "not a partition count (a positive number, or -1 for the broker's default)")
			}
		case rest == "default.replication.factor":
			if n, err := strconv.ParseInt(v, 10, 16); err == nil && (n > 0 || n == -1) {
				im.set("kafka.topic_replication_factor", n, "topic.creation.default.replication.factor.")
				im.used[opt] = true
			} else {
				im.drop(opt, "not a replication factor (a positive number, or -1 for the broker's default)")
			}
		case rest == "default.include" || rest == "default.exclude":
			im.drop(opt, "walrelay creates every routed topic with the default group's settings; it does not filter topics")
		case strings.HasPrefix(rest, "default."):
			topicConfigs[strings.TrimPrefix(rest, "default.")] = v
			im.used[opt] = true
		default:
			group, _, _ := strings.Cut(rest, ".")
			im.drop(opt, fmt.Sprintf("walrelay creates every topic with the default group's settings; group %q's do not apply", group))
		}
	}
	if len(topicConfigs) > 0 {
		keys := make([]string, 0, len(topicConfigs))
		for k := range topicConfigs {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		entries := make([]string, len(keys))
		for i, k := range keys {
			entries[i] = k + "=" + topicConfigs[k]
		}
		im.set("kafka.topic_configs", topicConfigs, "topic.creation.default.* ("+strings.Join(entries, ", ")+").")
	}
}

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
		default:
			im.drop(opt, "walrelay implements StringConverter, JsonConverter, ByteArrayConverter and Debezium's BinaryDataConverter; converter."+side+" keeps walrelay's raw format")
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
		for _, k := range im.keys(opt + ".") {
			if !im.used[k] {
				im.drop(k, "a setting of the "+side+" converter walrelay does not take")
			}
		}
		if conv == "" {
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
	switch h := headerConverterClasses[class]; {
	case !ok:
		assumed = append(assumed, "header.converter")
		im.check("header.converter", "not in the connector config, so the Kafka Connect worker's header.converter applies, which the import cannot see; converter.header assumes SimpleHeaderConverter, Kafka Connect's default: CHECK header.converter in the worker's properties")
		im.set("converter.header", "simple", "")
	case h == "":
		im.drop("header.converter", "walrelay implements SimpleHeaderConverter and StringConverter for headers; converter.header keeps walrelay's raw format")
	default:
		im.set("converter.header", h, "header.converter "+class+".")
	}
	for _, k := range im.keys("header.converter.") {
		im.drop(k, "a setting of the header converter walrelay does not take")
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

// routerOptions lists the router's options (Debezium's names) in
// router.Config's order, with whether each is a boolean.
func routerOptions() (names []string, isBool map[string]bool) {
	isBool = map[string]bool{}
	t := reflect.TypeFor[router.Config]()
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("yaml")
		names = append(names, name)
		isBool[name] = f.Type.Kind() == reflect.Bool
	}
	return names, isBool
}

// transforms finds the EventRouter among the connector's transforms and
// maps its options onto router.*; every other transform and predicate is
// dropped.
func (im *importer) transforms() {
	list, _ := im.get("transforms")
	names := splitList(list)
	for _, n := range names {
		if strings.TrimSpace(im.conf["transforms."+n+".type"]) == router.EventRouterClass {
			im.routerName = n
			break
		}
	}
	if im.routerName == "" {
		im.drop("transforms", "no transform is "+router.EventRouterClass+": the connector sends Debezium's change events, which walrelay does not produce; walrelay sends outbox events, routed with the EventRouter's defaults (router: below)")
	}
	options, isBool := routerOptions()
	known := map[string]bool{}
	for _, o := range options {
		known[o] = true
	}
	values := map[string]any{}
	for _, opt := range im.keys("transforms.") {
		name, rest, _ := strings.Cut(strings.TrimPrefix(opt, "transforms."), ".")
		v := im.conf[opt]
		switch {
		case name == im.routerName && (rest == "predicate" || rest == "negate"):
			im.drop(opt, "walrelay applies the router to every row of postgres.table, its only table; check that the predicate selected exactly those")
		case name == im.routerName && known[rest]:
			if isBool[rest] {
				b, err := parseBool(v)
				if err != nil {
					im.drop(opt, "not true or false")
					continue
				}
				values[rest] = b
			} else {
				values[rest] = v
			}
			im.used[opt] = true
		case name == im.routerName:
			im.drop(opt, "not an option of Debezium's EventRouter")
		case !slices.Contains(names, name):
			im.ignore(opt, fmt.Sprintf("transform %q is not in transforms, so Kafka Connect does not run it either", name))
		default:
			class := strings.TrimSpace(im.conf["transforms."+name+".type"])
			im.drop(opt, fmt.Sprintf("transform %q (%s) is not the outbox EventRouter, the only transform walrelay runs", name, class))
		}
	}
	for _, opt := range im.keys("predicates") {
		if opt == "predicates" || strings.HasPrefix(opt, "predicates.") {
			im.drop(opt, "predicates choose the records a transform applies to; walrelay applies the router to every row of postgres.table, its only table")
		}
	}
	// Apply the options in order, checking each against walrelay's router;
	// the topic regex and replacement go together (the replacement names
	// the regex's groups).
	cfg := router.DefaultConfig()
	cv := reflect.ValueOf(&cfg).Elem()
	field := func(name string) reflect.Value {
		t := cv.Type()
		for i := range t.NumField() {
			if t.Field(i).Tag.Get("yaml") == name {
				return cv.Field(i)
			}
		}
		panic("no router option " + name) // routerOptions and this read the same struct
	}
	var units [][]string
	for _, o := range options {
		switch {
		case values[o] == nil:
		case o == "route.topic.replacement" && values["route.topic.regex"] != nil:
			// applied with route.topic.regex
		case o == "route.topic.regex" && values["route.topic.replacement"] != nil:
			units = append(units, []string{o, "route.topic.replacement"})
		default:
			units = append(units, []string{o})
		}
	}
	for _, unit := range units {
		before := cfg
		for _, o := range unit {
			field(o).Set(reflect.ValueOf(values[o]))
		}
		if _, err := router.New(cfg, router.DefaultConverters()); err != nil {
			cfg = before
			for _, o := range unit {
				im.drop("transforms."+im.routerName+"."+o, "walrelay's router refuses it: "+err.Error())
			}
			continue
		}
		for _, o := range unit {
			comment := ""
			if o == unit[0] && len(im.routerSettings()) == 0 {
				comment = fmt.Sprintf("The options of transform %q (transforms.%s.*), Debezium's EventRouter; the options it does not set have Debezium's defaults.", im.routerName, im.routerName)
			}
			im.set("router."+o, values[o], comment)
		}
	}
	im.routerConf = cfg
}

func (im *importer) routerSettings() []setting {
	var out []setting
	for _, s := range im.settings {
		if strings.HasPrefix(s.path, "router.") {
			out = append(out, s)
		}
	}
	return out
}

// relay maps the options with a relay.* or postgres.* equivalent besides
// the connection.
func (im *importer) relay() {
	if v, ok := im.get("heartbeat.interval.ms"); ok {
		ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch {
		case err != nil || ms < 0:
			im.drop("heartbeat.interval.ms", "not a number of milliseconds")
		case ms == 0:
			im.ignore("heartbeat.interval.ms", "0 turns heartbeats off, as walrelay's default relay.heartbeat_interval does")
		case ms < 100:
			im.drop("heartbeat.interval.ms", "walrelay's relay.heartbeat_interval is 0 (off) or at least 100ms")
		default:
			im.set("relay.heartbeat_interval", (time.Duration(ms) * time.Millisecond).String(),
				"heartbeat.interval.ms. walrelay's heartbeat is a pg_logical_emit_message in the slot's database, so the slot moves while the outbox is idle; it sends no heartbeat records to Kafka (Debezium sends them to __debezium-heartbeat.<topic.prefix>).")
		}
	}
	for _, opt := range []string{"heartbeat.action.query"} {
		if _, ok := im.conf[opt]; ok {
			im.drop(opt, "walrelay's heartbeat is its own pg_logical_emit_message (relay.heartbeat_interval); it runs no query of yours")
		}
	}
	for _, opt := range []string{"topic.heartbeat.prefix", "heartbeat.topics.prefix"} {
		if _, ok := im.conf[opt]; ok {
			im.drop(opt, "walrelay sends no heartbeat records to Kafka")
		}
	}
	if v, ok := im.get("status.update.interval.ms"); ok {
		ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if d := time.Duration(ms) * time.Millisecond; err == nil && d >= 10*time.Millisecond && d <= time.Minute {
			im.set("postgres.status_interval", d.String(), "status.update.interval.ms.")
		} else {
			im.drop("status.update.interval.ms", "walrelay's postgres.status_interval is between 10ms and 1m")
		}
	}
	if v, ok := im.conf["snapshot.mode"]; ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "no_data", "never", "schema_only":
			im.ignore("snapshot.mode", "walrelay takes no snapshot either: it relays what is inserted after its slot's position")
		default:
			im.drop("snapshot.mode", "walrelay takes no snapshot: it relays the rows inserted after its slot's position, never the rows already in the outbox (Debezium snapshots only when it has no offset, so a takeover of its slot is not affected)")
		}
	}
}

// ignoredAlways are options that change nothing walrelay does or sends,
// whatever their value, with the reason.
var ignoredAlways = map[string]string{
	"tasks.max":                           "the Postgres connector runs one task whatever this says; walrelay is one process per slot",
	"config.action.reload":                "a Kafka Connect setting for restarting the connector; walrelay reads its configuration at start",
	"tombstones.on.delete":                "the EventRouter drops delete events and tombstones (EventRouterDelegate), and walrelay ignores DELETEs of the outbox",
	"message.key.columns":                 "the EventRouter replaces the record key with table.field.event.key",
	"slot.max.retries":                    "walrelay retries a busy or lost slot without a limit, waiting postgres.min_backoff to postgres.max_backoff",
	"slot.retry.delay.ms":                 "walrelay retries a busy or lost slot waiting postgres.min_backoff to postgres.max_backoff",
	"retriable.restart.connector.wait.ms": "walrelay reconnects waiting postgres.min_backoff to postgres.max_backoff",
	"max.batch.size":                      "the size of Debezium's internal batches; walrelay bounds what is in flight with relay.max_in_flight_records and relay.max_in_flight_bytes",
	"max.queue.size":                      "the size of Debezium's internal queue; walrelay bounds what is in flight with relay.max_in_flight_records and relay.max_in_flight_bytes",
	"max.queue.size.in.bytes":             "the size of Debezium's internal queue; walrelay bounds what is in flight with relay.max_in_flight_records and relay.max_in_flight_bytes",
	"poll.interval.ms":                    "how long Debezium's task waits for its queue; walrelay produces each row as it is decoded (kafka.linger batches them)",
	"include.schema.changes":              "the Postgres connector emits no schema change events",
	"schema.refresh.mode":                 "walrelay reads each relation's columns from pgoutput's Relation messages",
	"snapshot.delay.ms":                   "walrelay takes no snapshot",
	"offset.mismatch.strategy":            "walrelay starts from its slot's confirmed position (see `walrelay debezium takeover` for the connector's offsets)",
}

// defaultOnly are options that change what Debezium sends unless they have
// their default value, which is what walrelay's router follows.
var defaultOnly = map[string]string{
	"decimal.handling.mode":                  "precise",
	"time.precision.mode":                    "adaptive",
	"binary.handling.mode":                   "bytes",
	"hstore.handling.mode":                   "json",
	"interval.handling.mode":                 "numeric",
	"money.fraction.digits":                  "2",
	"include.unknown.datatypes":              "false",
	"provide.transaction.metadata":           "false",
	"slot.drop.on.stop":                      "false",
	"flush.lsn.source":                       "true",
	"publish.via.partition.root":             "false",
	"schema.name.adjustment.mode":            "none",
	"field.name.adjustment.mode":             "none",
	"event.processing.failure.handling.mode": "fail",
}

// droppedReasons gives the reason for options walrelay has no equivalent
// of, when there is more to say than that.
var droppedReasons = map[string]string{
	"slot.drop.on.stop":                      "walrelay never drops its slot when it stops (`walrelay slot drop` does, on request)",
	"flush.lsn.source":                       "walrelay always confirms to its slot what Kafka acknowledged",
	"provide.transaction.metadata":           "walrelay sends no transaction metadata records",
	"publish.via.partition.root":             "walrelay reads the publication as it is; set publish_via_partition_root on it yourself",
	"event.processing.failure.handling.mode": "walrelay decides per class of row it cannot publish with relay.on_error.* (dead-letter topic, stop or log)",
	"skipped.operations":                     "walrelay relays INSERTs of the outbox and ignores the other operations, as the EventRouter does",
	"exactly.once.support":                   "walrelay's producer is idempotent but not transactional: delivery is at-least-once, and consumers dedupe on the id header",
	"transaction.boundary":                   "walrelay's producer is idempotent but not transactional: delivery is at-least-once, and consumers dedupe on the id header",
	"replica.identity.autoset.values":        "walrelay changes no table's replica identity (an insert-only outbox needs none)",
	"slot.stream.params":                     "walrelay starts pgoutput with its own parameters",
	"lsn.flush.timeout.ms":                   "walrelay confirms what Kafka acknowledged without a timeout",
	"lsn.flush.timeout.action":               "walrelay confirms what Kafka acknowledged without a timeout",
	"lsn.flush.mode":                         "walrelay always confirms to its slot what Kafka acknowledged",
	"xmin.fetch.interval.ms":                 "walrelay does not read the slot's xmin",
	"read.only":                              "walrelay's heartbeat (relay.heartbeat_interval) writes to the database; leave it at 0 on a read-only connection",
}

// rest handles every option not handled yet.
func (im *importer) rest() {
	keys := make([]string, 0, len(im.conf))
	for k := range im.conf {
		if !im.used[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := strings.ToLower(strings.TrimSpace(im.conf[k]))
		switch {
		case ignoredAlways[k] != "":
			im.ignore(k, ignoredAlways[k])
		case defaultOnly[k] != "" && v == defaultOnly[k]:
			im.ignore(k, "Debezium's default")
		case k == "skipped.operations" && !strings.Contains(v, "c"):
			im.ignore(k, droppedReasons[k])
		case droppedReasons[k] != "":
			im.drop(k, droppedReasons[k])
		case defaultOnly[k] != "":
			im.drop(k, "it changes how Debezium represents values in the events; walrelay's router follows Debezium's default ("+defaultOnly[k]+")")
		case strings.HasPrefix(k, "snapshot.") || strings.HasPrefix(k, "incremental.snapshot."):
			im.ignore(k, "walrelay takes no snapshot")
		case strings.HasPrefix(k, "errors."):
			im.drop(k, "Kafka Connect's (or Debezium's) error handling; walrelay decides per class of row it cannot publish with relay.on_error.* (dead-letter topic relay.dead_letter_topic, stop or log) and retries Postgres and Kafka without a limit")
		case strings.HasPrefix(k, "consumer.override.") || strings.HasPrefix(k, "admin.override."):
			im.drop(k, "a Kafka client setting walrelay does not take (its Kafka client is configured with kafka.*)")
		case strings.HasPrefix(k, "transaction.boundary"):
			im.drop(k, droppedReasons["transaction.boundary"])
		case strings.HasPrefix(k, "column.") || strings.HasPrefix(k, "datatype."):
			im.drop(k, "it changes the columns Debezium's events carry; walrelay's router reads the columns its options name, as they are")
		default:
			im.drop(k, "walrelay has no equivalent of this option")
		}
	}
}
