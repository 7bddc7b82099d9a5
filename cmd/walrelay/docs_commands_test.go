package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/testenv"
)

// The operator docs are run as written, as TestDesignMap keeps DESIGN.md's
// map true: every command of docs/runbook.md's and
// docs/switching-from-debezium.md's ```sh, ```bash and ```console blocks.
//
//   - Every `walrelay ...` command, wherever it stands in a pipeline, parses:
//     its subcommand exists and is a command (not a group), and its flags
//     exist and take the values shown (it is run with --help appended,
//     which parses the flags and runs nothing).
//   - Every command that can run here runs for real, in a database with the
//     outbox, its publication and slot walrelay (and a slot debezium, the
//     guide's), against kfake, with `walrelay run` serving its HTTP
//     endpoints on a free port that stands for 127.0.0.1:9814: the
//     read-only walrelay subcommands, curl to walrelay's endpoints, and
//     what the docs pipe their output into (grep, sed, jq). Each must exit
//     0. A `grep -E 'a(b|c)'` must match each of its alternatives: a
//     pipeline that greps for a metric or option that does not exist
//     fails, and so does a filter of `walrelay config` that prints a YAML
//     section ("on_error:") without its nested values, or a jq projection
//     of a field the JSON's Go type does not have. `psql -c SQL` and every
//     ```sql block run through pgx.
//   - The runbook names the application_name of walrelay run's walsender
//     as pg_stat_replication shows it.
//   - In a ```console block, the lines after a `$ command` line are its
//     output: each must be a line of what the command prints (spaces
//     collapsed; a <placeholder> matches anything).
//
// What cannot run here is listed in docsSkipped with the reason; a
// command that is neither run nor listed fails the test (only curl and
// jq, which the project does not install, may be missing: those commands
// are then logged as not run).
func TestDocsCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Postgres, kfake and walrelay run")
	}
	var cmds []docCommand
	var sqls []docSQL
	texts := map[string]string{}
	for _, doc := range []string{"docs/runbook.md", "docs/switching-from-debezium.md"} {
		text, err := os.ReadFile(filepath.Join("../..", doc))
		if err != nil {
			t.Fatal(err)
		}
		texts[doc] = string(text)
		c, s := docBlocks(doc, string(text))
		cmds, sqls = append(cmds, c...), append(sqls, s...)
	}
	if len(cmds) < 40 || len(sqls) < 5 {
		t.Fatalf("found %d commands and %d SQL blocks in the docs; the extraction is broken", len(cmds), len(sqls))
	}

	// Every walrelay command parses.
	for _, c := range cmds {
		for _, seg := range c.segments(t) {
			if len(seg) == 0 || seg[0] != "walrelay" {
				continue
			}
			args := append(substitutePlaceholders(t, c, seg[1:]), "--help")
			var stdout, stderr bytes.Buffer
			if err := run(t.Context(), args, &stdout, &stderr); err != nil {
				t.Errorf("%s: `%s` does not parse: %v", c.where(), strings.Join(seg, " "), err)
				continue
			}
			if strings.Contains(stdout.String(), "\nAvailable Commands:") {
				t.Errorf("%s: `%s` names a command group, not a command:\n%s", c.where(), strings.Join(seg, " "), stdout.String())
			}
		}
	}

	// The environment the docs assume: the outbox, the slot walrelay
	// streamed by a running relay, the guide's slot debezium, events on
	// Kafka.
	dsn := testenv.Postgres(t).NewDatabase(t)
	broker := testenv.Kafka(t)
	setupOutbox(t, dsn)
	testenv.Exec(t, dsn, `SELECT pg_create_logical_replication_slot('debezium', 'pgoutput')`) // dropped with the database
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	ln.Close()
	env := childEnv(
		"WALRELAY_POSTGRES_DSN="+dsn,
		"WALRELAY_KAFKA_BROKERS="+strings.Join(broker.Addrs(), ","),
		"WALRELAY_POSTGRES_STATUS_INTERVAL=100ms",
		"WALRELAY_HTTP_LISTEN="+listen,
		// The runbook's daily operation keeps 7 days of events.
		"WALRELAY_OUTBOX_RETENTION=168h",
	)
	relay := startChild(t, env, "run")
	ids := insertEvents(t, dsn, "order", "customer")
	// One row inside the windows the docs' verify commands check (they
	// end a while before now).
	testenv.Exec(t, dsn, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload, created_at) VALUES ('order', 'agg-old', 'Happened', '{}', now() - interval '30 minutes')`)
	testenv.WaitCaughtUp(t, dsn, "walrelay", 30*time.Second)
	waitHTTP(t, relay, listen, "/readyz", 30*time.Second)

	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// walrelay on PATH is this test binary acting as walrelay (TestMain).
	if err := os.WriteFile(filepath.Join(bin, "walrelay"), []byte("#!/bin/sh\nexec '"+os.Args[0]+"' -- \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	// The guide's connector.json, as Kafka Connect's REST API returns
	// it, for a connector streaming with pgoutput from slot debezium in
	// the test's database; `walrelay debezium import` turns it into the
	// walrelay.yaml the guide's next commands use.
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	connector, err := json.Marshal(map[string]any{"name": "outbox-connector", "type": "source", "tasks": []any{}, "config": map[string]string{
		"connector.class":        "io.debezium.connector.postgresql.PostgresConnector",
		"plugin.name":            "pgoutput",
		"database.hostname":      u.Hostname(),
		"database.port":          u.Port(),
		"database.user":          u.User.Username(),
		"database.dbname":        strings.TrimPrefix(u.Path, "/"),
		"topic.prefix":           "dbserver1",
		"slot.name":              "debezium",
		"publication.name":       "walrelay_outbox",
		"table.include.list":     "public.outbox",
		"transforms":             "outbox",
		"transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
		"key.converter":          "org.apache.kafka.connect.storage.StringConverter",
		"value.converter":        "org.apache.kafka.connect.storage.StringConverter",
		"header.converter":       "org.apache.kafka.connect.storage.SimpleHeaderConverter",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "connector.json"), connector, 0o644); err != nil {
		t.Fatal(err)
	}
	// The connector's last offset on Connect's offsets topic, as a
	// heartbeat after a COMMIT at slot debezium's position leaves it
	// (see debeziumOffsets): what the guide's dry run reads.
	lsn := testenv.ParseLSN(t, slotLSN(t, dsn, "debezium"))
	broker.CreateTopic(t, "connect-offsets", 25)
	offset := &kgo.Record{Topic: "connect-offsets", Key: []byte(`["outbox-connector",{"server":"dbserver1"}]`),
		Value: fmt.Appendf(nil, `{"lsn_proc":%d,"messageType":"COMMIT","lsn_commit":%d,"lsn":%d,"txId":1,"ts_usec":1761123456789012}`, lsn, lsn, lsn)}
	if err := broker.Client(t).ProduceSync(t.Context(), offset).FirstErr(); err != nil {
		t.Fatal(err)
	}
	shellEnv := append(env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	ran := 0
	used := map[string]bool{}
	for _, c := range cmds {
		segs := c.segments(t)
		if reason := skipReason(segs, used); reason != "" {
			t.Logf("%s: not run (%s): %s", c.where(), reason, c.text)
			continue
		}
		if len(segs) == 1 && segs[0][0] == "psql" {
			sql := psqlCommand(t, c, segs[0])
			testenv.Exec(t, dsn, sql)
			ran++
			continue
		}
		if tool := missingTool(segs); tool != "" {
			if !optionalTools[tool] {
				t.Errorf("%s: %s is not installed and not in docsSkipped: %s", c.where(), tool, c.text)
			} else {
				t.Logf("%s: not run (%s is not installed): %s", c.where(), tool, c.text)
			}
			continue
		}
		line := strings.ReplaceAll(substitutePlaceholdersLine(t, c, stripComment(c.text)), "127.0.0.1:9814", listen)
		out := runShell(t, c, work, shellEnv, line)
		ran++
		for _, want := range c.output {
			if !hasOutputLine(out, want) {
				t.Errorf("%s: `%s` does not print %q (the doc shows it as its output); it printed:\n%s", c.where(), c.text, want, out)
			}
		}
		// A jq projection names fields the JSON has.
		if last := segs[len(segs)-1]; len(segs) > 1 && last[0] == "jq" && strings.HasPrefix(last[len(last)-1], "{") {
			typ := jsonTypeOf(strings.Join(segs[0], " "))
			if typ == nil {
				t.Errorf("%s: the test knows no JSON type for `%s`: add it to docsJSONTypes", c.where(), strings.Join(segs[0], " "))
			}
			for _, m := range jqFieldRE.FindAllStringSubmatch(last[len(last)-1], -1) {
				if typ != nil && !jsonNames(typ)[m[1]] {
					t.Errorf("%s: `%s` asks jq for %q, which %s does not have", c.where(), c.text, m[1], typ)
				}
			}
		}
		// What a filter of `walrelay config` prints shows values: a
		// section ("on_error:") is followed by its content.
		if segs[0][0] == "walrelay" && len(segs[0]) > 1 && segs[0][1] == "config" && len(segs) > 1 {
			if bare := bareSection(out); bare != "" {
				t.Errorf("%s: `%s` prints the section %q without its content (the filter cannot see nested YAML):\n%s", c.where(), c.text, bare, out)
			}
		}
		// A grep -E with alternatives must find each: the doc names
		// metrics, options or lines that all exist.
		if pattern, ok := grepE(segs[len(segs)-1]); ok && len(segs) > 1 {
			input := runShell(t, c, work, shellEnv, pipelinePrefix(line))
			for _, alt := range alternatives(pattern) {
				if !regexp.MustCompile("(?m)"+alt).MatchString(input) && !onlyAfterErrors[strings.TrimPrefix(alt, "^")] {
					t.Errorf("%s: `%s` greps for %q, which nothing it reads contains:\n%s", c.where(), c.text, alt, input)
				}
			}
		}
	}
	t.Logf("ran %d of %d commands", ran, len(cmds))
	for _, s := range docsSkipped {
		if !used[s.prefix] {
			t.Errorf("docsSkipped lists %q, which no command of the docs uses: remove it", s.prefix)
		}
	}

	// The runbook's SQL finds walrelay's walsender by its application_name.
	got := testenv.QueryValue[string](t, dsn, `SELECT application_name FROM pg_stat_replication WHERE pid = (SELECT active_pid FROM pg_replication_slots WHERE slot_name = 'walrelay')`)
	if m := regexp.MustCompile(`walrelay run's replication connection has application_name '([^']*)'`).FindStringSubmatch(texts["docs/runbook.md"]); m == nil || m[1] != got {
		t.Errorf("docs/runbook.md does not say that walrelay run's replication connection has application_name '%s' (it says %q)", got, m)
	}

	for _, s := range sqls {
		sql := strings.ReplaceAll(s.text, "<outbox_id from the log>", ids[0])
		if err := execSQL(t.Context(), dsn, sql); err != nil {
			t.Errorf("%s: SQL block fails: %v\n%s", s.where, err, sql)
		}
	}
}

// onlyAfterErrors are metrics the docs grep for that have no series until
// the first error: franz-go's kprom counts errors per broker (node_id),
// and a vector shows nothing before its first child.
var onlyAfterErrors = map[string]bool{
	"walrelay_kafka_connect_errors_total": true,
	"walrelay_kafka_write_errors_total":   true,
	"walrelay_kafka_read_errors_total":    true,
}

// grepE returns the pattern of a `grep -E ... PATTERN` command.
func grepE(words []string) (string, bool) {
	if len(words) < 3 || words[0] != "grep" || !slices.Contains(words, "-E") {
		return "", false
	}
	for _, w := range words[1:] {
		if !strings.HasPrefix(w, "-") {
			return w, true
		}
	}
	return "", false
}

// docsJSONTypes are the Go types of the JSON the docs pipe into jq, by
// the command that prints it.
var docsJSONTypes = []struct {
	prefix string
	typ    reflect.Type
}{
	{"curl -s http://127.0.0.1:9814/status", reflect.TypeFor[relay.Status]()},
	{"walrelay verify -o json", reflect.TypeFor[verifyJSON]()},
}

func jsonTypeOf(cmd string) reflect.Type {
	for _, j := range docsJSONTypes {
		if strings.HasPrefix(cmd, j.prefix) {
			return j.typ
		}
	}
	return nil
}

// jqFieldRE matches the field names of a jq object projection
// ({a, b, c: .c | {d}}).
var jqFieldRE = regexp.MustCompile(`[{,]\s*([a-z_]+)\s*[,}:]`)

// jsonNames returns the JSON field names of typ and of the structs it
// holds.
func jsonNames(typ reflect.Type) map[string]bool {
	names := map[string]bool{}
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct {
			return
		}
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || (!f.IsExported() && !f.Anonymous) {
				continue
			}
			if name != "" {
				names[name] = true
			}
			walk(f.Type)
		}
	}
	walk(typ)
	return names
}

// bareSection returns the first line of YAML text that opens a section
// ("key:" with nothing after it) not followed by a deeper-indented line.
func bareSection(yaml string) string {
	lines := strings.Split(strings.TrimRight(yaml, "\n"), "\n")
	indent := func(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }
	for i, l := range lines {
		if strings.HasSuffix(l, ":") && (i+1 == len(lines) || indent(lines[i+1]) <= indent(l)) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// optionalTools are the programs of the docs' pipelines that the project
// does not install (make deps): without them a command is not run, with a
// log line.
var optionalTools = map[string]bool{"curl": true, "jq": true}

// docsSkipped are the programs (or walrelay subcommands) of the docs'
// commands that do not run here, and why: a command (of a pipeline) that
// starts with a prefix, or that is the prefix ending in "$". A command using one is only
// parse-checked (its walrelay parts).
var docsSkipped = []struct{ prefix, reason string }{
	{"journalctl", "reads the systemd journal of a walrelay service"},
	{"systemctl", "needs a systemd unit"},
	{"kcat", "reads topics of a production Kafka named <broker>"},
	{"kafka-topics.sh", "Apache Kafka's CLI, not installed here"},
	{"kafka-configs.sh", "Apache Kafka's CLI, not installed here"},
	{"curl -s http://connect:8083", "needs Kafka Connect's REST API (the test writes the connector.json it would save)"},
	{"curl -X PUT http://connect:8083", "needs Kafka Connect's REST API"},
	{"walrelay debezium takeover --config walrelay.yaml --connector outbox-connector --topic-prefix dbserver1 --offsets-topic connect-offsets$", "moves slot debezium and relays until stopped (its --dry-run runs)"},
	{"walrelay verify --since 2026-11-24T00:00:00Z --until 2026-11-24T06:00:00Z --republish", "publishes to Kafka"},
}

// skipReason returns why a command in segs cannot run here, or "", and
// marks the entry of docsSkipped used.
func skipReason(segs [][]string, used map[string]bool) string {
	for _, seg := range segs {
		line := strings.Join(seg, " ")
		for _, s := range docsSkipped {
			if whole, ok := strings.CutSuffix(s.prefix, "$"); (ok && line == whole) || (!ok && strings.HasPrefix(line, s.prefix)) {
				used[s.prefix] = true
				return s.reason
			}
		}
	}
	return ""
}

// missingTool returns the first program of segs that is not installed.
func missingTool(segs [][]string) string {
	for _, seg := range segs {
		if seg[0] == "walrelay" {
			continue
		}
		if _, err := exec.LookPath(seg[0]); err != nil {
			return seg[0]
		}
	}
	return ""
}

// docCommand is one shell command of a doc, with the output the doc shows
// for it (console blocks only).
type docCommand struct {
	doc    string
	line   int
	text   string
	output []string
}

func (c docCommand) where() string { return fmt.Sprintf("%s:%d", c.doc, c.line) }

// segments splits the command into its pipeline's commands, each as
// shell words, without the trailing comment.
func (c docCommand) segments(t *testing.T) [][]string {
	t.Helper()
	words, err := shellWords(c.text)
	if err != nil {
		t.Fatalf("%s: %v: %s", c.where(), err, c.text)
	}
	var segs [][]string
	var cur []string
	for _, w := range words {
		if w == "|" {
			segs = append(segs, cur)
			cur = nil
			continue
		}
		cur = append(cur, w)
	}
	return append(segs, cur)
}

// docSQL is one ```sql block.
type docSQL struct {
	where string
	text  string
}

// docBlocks returns the shell commands and SQL blocks of a Markdown doc.
func docBlocks(doc, text string) ([]docCommand, []docSQL) {
	var cmds []docCommand
	var sqls []docSQL
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		lang, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), "```")
		if !ok || lang == "" {
			continue
		}
		start := i + 1
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, strings.TrimSpace(lines[i]))
		}
		switch lang {
		case "sql":
			sqls = append(sqls, docSQL{fmt.Sprintf("%s:%d", doc, start), strings.Join(body, "\n")})
		case "sh", "bash":
			for j := 0; j < len(body); j++ {
				line, n := joinContinued(body[j:])
				if line != "" && !strings.HasPrefix(line, "#") {
					cmds = append(cmds, docCommand{doc: doc, line: start + j + 1, text: line})
				}
				j += n - 1
			}
		case "console":
			for j := 0; j < len(body); j++ {
				rest, ok := strings.CutPrefix(body[j], "$ ")
				if !ok {
					continue
				}
				line, n := joinContinued(append([]string{rest}, body[j+1:]...))
				c := docCommand{doc: doc, line: start + j + 1, text: line}
				for j += n; j < len(body) && !strings.HasPrefix(body[j], "$ "); j++ {
					if body[j] != "" {
						c.output = append(c.output, body[j])
					}
				}
				j--
				cmds = append(cmds, c)
			}
		}
	}
	return cmds, sqls
}

// joinContinued joins lines ending in a backslash and returns the command
// and how many lines it took.
func joinContinued(lines []string) (string, int) {
	var b strings.Builder
	n := 0
	for _, l := range lines {
		n++
		if s, ok := strings.CutSuffix(l, `\`); ok {
			b.WriteString(s)
			continue
		}
		b.WriteString(l)
		break
	}
	return strings.TrimSpace(b.String()), n
}

// shellWords splits a command line as sh would (quotes, backslashes), with
// "|" as a word of its own and a "#" comment removed. It does not expand
// anything.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, cur.String())
		}
		cur.Reset()
		inWord = false
	}
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case ch == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case ch == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte(`"\$`+"`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i == len(s) {
				return nil, fmt.Errorf("unterminated quote")
			}
			inWord = true
		case ch == '\\' && i+1 < len(s):
			cur.WriteByte(s[i+1])
			inWord = true
			i++
		case ch == ' ' || ch == '\t':
			flush()
		case ch == '#' && !inWord:
			flush()
			return words, nil
		case ch == '|':
			flush()
			words = append(words, "|")
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	flush()
	return words, nil
}

// unquoted calls f with the index of each byte of line outside quotes,
// until f returns false.
func unquoted(line string, f func(i int) bool) {
	quote := byte(0)
	for i := 0; i < len(line); i++ {
		switch ch := line[i]; {
		case quote != 0:
			if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"':
			quote = ch
		default:
			if !f(i) {
				return
			}
		}
	}
}

// stripComment removes a trailing "# comment" from a command line.
func stripComment(line string) string {
	end := len(line)
	unquoted(line, func(i int) bool {
		if line[i] == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t') {
			end = i
			return false
		}
		return true
	})
	return strings.TrimSpace(line[:end])
}

// pipelinePrefix is the command without its last pipeline stage.
func pipelinePrefix(line string) string {
	last := len(line)
	unquoted(line, func(i int) bool {
		if line[i] == '|' {
			last = i
		}
		return true
	})
	return line[:last]
}

// alternatives expands an extended regular expression "A|B", where each
// of A and B may hold one group "pre(a|b)post", into its alternatives.
func alternatives(re string) []string {
	var top []string
	depth, from := 0, 0
	for i, ch := range re {
		switch ch {
		case '(':
			depth++
		case ')':
			depth--
		case '|':
			if depth == 0 {
				top, from = append(top, re[from:i]), i+1
			}
		}
	}
	top = append(top, re[from:])
	var out []string
	for _, alt := range top {
		open := strings.IndexByte(alt, '(')
		end := strings.IndexByte(alt, ')')
		if open < 0 || end < open || strings.Count(alt, "(") > 1 {
			out = append(out, alt)
			continue
		}
		for _, a := range strings.Split(alt[open+1:end], "|") {
			out = append(out, alt[:open]+a+alt[end+1:])
		}
	}
	return out
}

// placeholders are the values the docs' <placeholders> stand for.
var placeholders = map[string]string{
	"<updated_at minus an hour>": "1h",
	"<broker>":                   "127.0.0.1:9092",
	"<topic>":                    "outbox.event.order",
}

var placeholderRE = regexp.MustCompile(`<[a-z][^<>]*>`)

func substitutePlaceholders(t *testing.T, c docCommand, args []string) []string {
	t.Helper()
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = substitutePlaceholdersLine(t, c, a)
	}
	return out
}

// substitutePlaceholdersLine replaces the docs' <placeholders> by values;
// one not in placeholders fails the test.
func substitutePlaceholdersLine(t *testing.T, c docCommand, s string) string {
	t.Helper()
	return placeholderRE.ReplaceAllStringFunc(s, func(p string) string {
		v, ok := placeholders[p]
		if !ok {
			t.Errorf("%s: placeholder %s has no value in the test's placeholders", c.where(), p)
		}
		return v
	})
}

// psqlCommand returns the SQL of a `psql -c SQL` command.
func psqlCommand(t *testing.T, c docCommand, words []string) string {
	t.Helper()
	if len(words) != 3 || words[1] != "-c" {
		t.Fatalf("%s: only `psql -c SQL` can run here: %s", c.where(), c.text)
	}
	return words[2]
}

// runShell runs line with bash in dir and returns its stdout; a non-zero
// exit fails the test.
func runShell(t *testing.T, c docCommand, dir string, env []string, line string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", line)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Errorf("%s: `%s`: %v\nstdout:\n%s\nstderr:\n%s", c.where(), line, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// hasOutputLine reports whether out has a line equal to want, spaces
// collapsed, a <placeholder> in want matching anything.
func hasOutputLine(out, want string) bool {
	parts := placeholderRE.Split(strings.Join(strings.Fields(want), " "), -1)
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	re := regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
	for _, l := range strings.Split(out, "\n") {
		if re.MatchString(strings.Join(strings.Fields(l), " ")) {
			return true
		}
	}
	return false
}

// execSQL runs sql (several statements allowed) in the database at dsn.
func execSQL(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// TestREADMECommandsParse: every walrelay command of the README's shell
// blocks (as `walrelay`, `./walrelay` or `bin/walrelay`) parses, its
// subcommand and flags existing (run in-process with --help appended,
// which parses and runs nothing). The README's commands that need a
// Postgres and a Kafka of one's own are the quick start's; the docs'
// commands run for real in TestDocsCommands.
func TestREADMECommandsParse(t *testing.T) {
	text, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	cmds, _ := docBlocks("README.md", string(text))
	n := 0
	for _, c := range cmds {
		for _, seg := range c.segments(t) {
			if len(seg) == 0 {
				continue
			}
			switch seg[0] {
			case "walrelay", "./walrelay", "bin/walrelay":
			default:
				continue
			}
			n++
			args := append(substitutePlaceholders(t, c, seg[1:]), "--help")
			var stdout, stderr bytes.Buffer
			if err := run(t.Context(), args, &stdout, &stderr); err != nil {
				t.Errorf("%s: `%s` does not parse: %v", c.where(), strings.Join(seg, " "), err)
				continue
			}
			if strings.Contains(stdout.String(), "\nAvailable Commands:") {
				t.Errorf("%s: `%s` names a command group, not a command", c.where(), strings.Join(seg, " "))
			}
		}
	}
	if n < 3 {
		t.Fatalf("found %d walrelay commands in README.md's shell blocks; the extraction is broken", n)
	}
	t.Logf("%d walrelay commands of README.md parse", n)
}
