package dbzimport

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

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

// dsnValue quotes a libpq key=value value when it needs it.
func dsnValue(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\n'\\") {
		return v
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
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
		"(`walrelay setup` creates the first of postgres.publications as FOR TABLE <the tables of postgres.table> WITH (publish = 'insert') when it does not exist, and adds to an existing one the listed tables it lacks). "+
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
		im.ignore("publication.autocreate.mode", "the publication exists already, created by the connector for the tables it captures, which postgres.table lists; walrelay run creates none (`walrelay setup` creates the first of postgres.publications for the tables of postgres.table when it does not exist, and adds those it lacks)")
	case "disabled":
		im.ignore("publication.autocreate.mode", "walrelay run does not create publications either")
	case "no_tables":
		im.drop("publication.autocreate.mode", "a publication with no table publishes nothing; walrelay needs the outbox tables in it (`walrelay setup` creates the first of postgres.publications for the tables of postgres.table when it does not exist, and adds those it lacks)")
	default:
		im.drop("publication.autocreate.mode", "not a mode Debezium knows (all_tables, filtered, disabled, no_tables)")
	}
	im.set("postgres.publications", pub, pubComment)
}

// tableRe is one schema-qualified table name written as Debezium's table
// filters match it: schema, a dot (escaped or not), table.
var tableRe = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_$]*)(?:\\?\.)([A-Za-z_][A-Za-z0-9_$]*)$`)

// tableFilters maps table.include.list onto postgres.table, in the connector's
// order (the first table's schema holds walrelay_slot_positions), and
// reports the other capture filters, matched against every table.
func (im *importer) tableFilters() {
	key, list, ok := im.getAny("table.include.list", "table.whitelist")
	if !ok || strings.TrimSpace(list) == "" {
		im.check(key, "not set: the connector captures every table, and walrelay relays the outbox tables postgres.table lists: postgres.table keeps walrelay's default public.outbox; set it to the outbox tables")
	} else {
		var tables []string
		for _, e := range splitList(list) {
			m := tableRe.FindStringSubmatch(e)
			if m == nil {
				// The import cannot list the database's tables, and
				// mapping only the literal entries would leave a
				// table out without a word.
				tables = nil
				im.drop(key, fmt.Sprintf("%s is a regular expression walrelay cannot turn into table names: list the outbox tables in postgres.table (walrelay_slot_positions goes in the first one's schema)", e))
				break
			}
			if t := m[1] + "." + m[2]; !slices.Contains(tables, t) {
				tables = append(tables, t)
			}
		}
		im.tables = tables
		switch len(tables) {
		case 0:
		case 1:
			im.set("postgres.table", tables[0], "The outbox table ("+key+").")
		default:
			im.set("postgres.table", tables, fmt.Sprintf("The outbox tables (%s), in the connector's order: walrelay_slot_positions goes in the first one's schema, %s.", key, schemaOf(tables[0])))
		}
	}
	if key == "table.include.list" {
		if _, old := im.get("table.whitelist"); old {
			im.ignore("table.whitelist", "replaced by table.include.list")
		}
	}
	filters := []struct {
		keys    []string
		include bool
		target  func(table string) string // what the filter is matched against
	}{
		{[]string{"schema.include.list", "schema.whitelist"}, true, schemaOf},
		{[]string{"schema.exclude.list", "schema.blacklist"}, false, schemaOf},
		{[]string{"table.exclude.list", "table.blacklist"}, false, func(t string) string { return t }},
	}
	one := len(im.tables) == 1
	for _, f := range filters {
		for _, k := range f.keys {
			v, ok := im.get(k)
			if !ok {
				continue
			}
			// The tables the filter leaves out of the capture: an include
			// that misses them, an exclude that matches them.
			var out []string
			for _, t := range im.tables {
				if matchesAny(splitList(v), f.target(t)) != f.include {
					out = append(out, t)
				}
			}
			switch {
			case len(im.tables) == 0 || (one && len(out) > 0):
				im.drop(k, "walrelay reads postgres.table alone; this filter has no equivalent")
			case len(out) > 0:
				im.drop(k, fmt.Sprintf("it leaves %s out of the capture, and walrelay reads every table of postgres.table, which table.include.list lists; this filter has no equivalent", strings.Join(out, ", ")))
			case f.include && one:
				im.ignore(k, "it includes postgres.table's schema, the only one walrelay reads")
			case f.include:
				im.ignore(k, "it includes the schema of every table of postgres.table, the only tables walrelay reads")
			case one:
				im.ignore(k, "it does not exclude postgres.table, the only table walrelay reads")
			default:
				im.ignore(k, "it excludes none of the tables of postgres.table, the only tables walrelay reads")
			}
		}
	}
}

// schemaOf is the schema of "schema.table".
func schemaOf(table string) string {
	schema, _, _ := strings.Cut(table, ".")
	return schema
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
