package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `walrelay debezium import` turns the connector configurations Debezium
// publishes (its Postgres connector docs' example, debezium-examples'
// outbox/register-postgres.json: sources in internal/dbzimport's
// TestImportPublishedExamples) into a file `walrelay config` accepts as it
// is, with the password given the ways the YAML's comment names, and never
// printed.
func TestDebeziumImportThenConfig(t *testing.T) {
	for _, tc := range []struct{ file, password string }{
		{"docs-postgresql-connector.json", "postgres"},
		{"examples-outbox-register-postgres.json", "postgrespw"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "walrelay.yaml")
			stdout, stderr, code := walrelay(t, childEnv(), "debezium", "import", filepath.Join("../../internal/dbzimport/testdata", tc.file), "--out", out)
			// Both omit plugin.name: Debezium's default decoderbufs is
			// reported as not mapped.
			if code != 1 || !strings.Contains(stderr, "plugin.name (not set)") || !strings.HasSuffix(stderr, "walrelay: some connector options were not mapped (listed above)\n") {
				t.Fatalf("exit %d, want 1 with plugin.name reported; stderr:\n%s", code, stderr)
			}
			if stdout != "" {
				t.Errorf("with --out, stdout should be empty: %s", stdout)
			}
			yaml, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"PGPASSWORD", "WALRELAY_POSTGRES_DSN_FILE", "CHECK THE CONVERTERS"} {
				if !strings.Contains(string(yaml), want) {
					t.Errorf("the YAML does not mention %s:\n%s", want, yaml)
				}
			}
			if tc.password != "postgres" && strings.Contains(string(yaml)+stderr, tc.password) { // the docs' password is also their user's name
				t.Errorf("the password is in the output")
			}

			// The password through PGPASSWORD: the YAML as it is.
			stdout, stderr, code = walrelay(t, childEnv("PGPASSWORD="+tc.password), "config", "--config", out)
			if code != 0 {
				t.Fatalf("walrelay config: exit %d: %s", code, stderr)
			}
			if !strings.Contains(stdout, "dbname=") || !strings.Contains(stdout, "json") {
				t.Errorf("walrelay config did not print the imported settings:\n%s", stdout)
			}

			// The password through WALRELAY_POSTGRES_DSN_FILE: the DSN with
			// password= added, in a file.
			dsn := strings.TrimSpace(strings.TrimPrefix(grepLine(t, string(yaml), "  dsn: "), "  dsn: "))
			dsnFile := filepath.Join(t.TempDir(), "dsn")
			if err := os.WriteFile(dsnFile, []byte(dsn+" password="+tc.password+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			stdout, stderr, code = walrelay(t, childEnv("WALRELAY_POSTGRES_DSN_FILE="+dsnFile), "config", "--config", out)
			if code != 0 || !strings.Contains(stdout, "password=xxxxx") {
				t.Fatalf("walrelay config with the DSN file: exit %d, want 0 and the password redacted; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			if strings.Contains(stdout, "password="+tc.password) {
				t.Errorf("walrelay config printed the password")
			}
		})
	}
}

func grepLine(t *testing.T, text, prefix string) string {
	t.Helper()
	for l := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	t.Fatalf("no line starting with %q in:\n%s", prefix, text)
	return ""
}

// Exit 0 when everything maps, 1 when options are dropped, 2 for bad input
// (with nothing on stdout).
func TestDebeziumImportExitCodes(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	const mapped = `name=orders
connector.class=io.debezium.connector.postgresql.PostgresConnector
database.hostname=db
database.user=dbz
database.dbname=orders
topic.prefix=orders
plugin.name=pgoutput
publication.autocreate.mode=filtered
table.include.list=public.outbox
transforms=outbox
transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
key.converter=org.apache.kafka.connect.storage.StringConverter
value.converter=org.apache.kafka.connect.storage.StringConverter
header.converter=org.apache.kafka.connect.storage.SimpleHeaderConverter
`
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string // a substring of stderr
	}{
		{"all mapped, properties", []string{write("c.properties", mapped)}, 0, "publication.autocreate.mode=filtered"},
		{"dropped", []string{write("d.properties", mapped+"tasks.max=1\nslot.drop.on.stop=true\n")}, 1, "slot.drop.on.stop=true: walrelay never drops its slot"},
		{"bad JSON", []string{write("bad.json", `{"config": {`)}, 2, "parsing JSON"},
		{"no connector.class", []string{write("n.json", `{"name": "x", "config": {"database.hostname": "db"}}`)}, 2, "no connector.class"},
		{"another connector", []string{write("m.json", `{"connector.class": "io.debezium.connector.mysql.MySqlConnector"}`)}, 2, "MySqlConnector"},
		{"no such file", []string{filepath.Join(dir, "missing.json")}, 2, "no such file"},
		{"no file", nil, 2, "accepts 1 arg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := walrelay(t, childEnv(), append([]string{"debezium", "import"}, tc.args...)...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("exit %d, want %d with %q on stderr:\n%s", code, tc.code, tc.stderr, stderr)
			}
			if tc.code == 2 && stdout != "" {
				t.Errorf("stdout should be empty on bad input: %s", stdout)
			}
			if tc.code != 2 && !strings.Contains(stdout, "postgres:") {
				t.Errorf("stdout should hold the YAML: %s", stdout)
			}
			noStackTrace(t, "stderr", stderr)
		})
	}
}

// The "Done when" for the import of a connector using Confluent's
// AvroConverter: `walrelay debezium import` writes a config that `walrelay
// config` validates once the registry's user info (left out of the YAML,
// a secret) comes from the environment or a file, and neither command
// prints it.
func TestDebeziumImportAvroThenConfig(t *testing.T) {
	const userInfo = "dbz-sr:Sr-P4ssw0rd"
	out := filepath.Join(t.TempDir(), "walrelay.yaml")
	_, stderr, code := walrelay(t, childEnv(), "debezium", "import", "../../internal/dbzimport/testdata/confluent-avro-outbox.json", "--out", out)
	if code != 0 && code != 1 {
		t.Fatalf("import: exit %d: %s", code, stderr)
	}
	yaml, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"  value: avro\n", "  key: avro\n", "value.schema.registry.url: https://sr-1.internal:8081,https://sr-2.internal:8081"} {
		if !strings.Contains(string(yaml), want) {
			t.Errorf("the YAML lacks %q:\n%s", want, yaml)
		}
	}
	if strings.Contains(string(yaml)+stderr, "Sr-P4ssw0rd") {
		t.Errorf("the import printed the registry password")
	}
	// Without the user info the config names the missing secret.
	_, stderr, code = walrelay(t, childEnv("PGPASSWORD=Pg-S3cret!"), "config", "--config", out)
	if code == 0 || !strings.Contains(stderr, "basic.auth.user.info") {
		t.Errorf("walrelay config without the registry's user info: exit %d, want an error naming basic.auth.user.info:\n%s", code, stderr)
	}
	keyFile := filepath.Join(t.TempDir(), "sr-key-user-info")
	if err := os.WriteFile(keyFile, []byte(userInfo+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := walrelay(t, childEnv("PGPASSWORD=Pg-S3cret!", "WALRELAY_CONVERTER_VALUE_BASIC_AUTH_USER_INFO="+userInfo,
		"WALRELAY_CONVERTER_KEY_BASIC_AUTH_USER_INFO_FILE="+keyFile), "config", "--config", out)
	if code != 0 {
		t.Fatalf("walrelay config: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "value: avro") || strings.Contains(stdout+stderr, "Sr-P4ssw0rd") {
		t.Errorf("walrelay config should print the avro converters and never the registry password:\n%s\n%s", stdout, stderr)
	}
}
