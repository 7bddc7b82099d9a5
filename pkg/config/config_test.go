package config_test

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/walrelay/walrelay/pkg/config"
)

// load runs Load the way the CLI does: flags bound and parsed from args,
// environ as the environment.
func load(t *testing.T, args []string, environ ...string) (config.Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("walrelay", pflag.ContinueOnError)
	config.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parsing flags %q: %v", args, err)
	}
	return config.Load(fs, environ)
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "walrelay.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Each source overrides the ones before it: default < file < env < flag,
// for every kind of field (string, duration, list, integer, bool, and the
// router's dotted Debezium keys).
func TestLoadPrecedence(t *testing.T) {
	type source struct{ file, env, flag string }
	fields := []struct {
		path, env, yamlKey string // yamlKey: "section:\n  key" prefix
		def                string
		values             source
		get                func(config.Config) string
	}{
		{"postgres.slot", "WALRELAY_POSTGRES_SLOT", "postgres:\n  slot", "walrelay",
			source{"from_file", "from_env", "from_flag"}, func(c config.Config) string { return c.Postgres.Slot }},
		{"kafka.linger", "WALRELAY_KAFKA_LINGER", "kafka:\n  linger", "5ms",
			source{"1s", "2s", "3s"}, func(c config.Config) string { return c.Kafka.Linger.String() }},
		{"kafka.brokers", "WALRELAY_KAFKA_BROKERS", "kafka:\n  brokers", "localhost:9092",
			source{"[file:1, file:2]", "env:1,env:2", "flag:1"}, func(c config.Config) string { return strings.Join(c.Kafka.Brokers, ",") }},
		{"kafka.topic_partitions", "WALRELAY_KAFKA_TOPIC_PARTITIONS", "kafka:\n  topic_partitions", "-1",
			source{"6", "7", "8"}, func(c config.Config) string { return strconv.Itoa(int(c.Kafka.TopicPartitions)) }},
		{"kafka.create_topics", "WALRELAY_KAFKA_CREATE_TOPICS", "kafka:\n  create_topics", "true",
			source{"false", "true", "false"}, func(c config.Config) string { return strconv.FormatBool(c.Kafka.CreateTopics) }},
		{"router.route.topic.replacement", "WALRELAY_ROUTER_ROUTE_TOPIC_REPLACEMENT", "router:\n  route.topic.replacement", "outbox.event.${routedByValue}",
			source{"file.${routedByValue}", "env.${routedByValue}", "flag.${routedByValue}"}, func(c config.Config) string { return c.Router.RouteTopicReplacement }},
	}
	want := func(s source, file, env, flag bool) func(def string) string {
		return func(def string) string {
			switch {
			case flag:
				return s.flag
			case env:
				return s.env
			case file:
				return s.file
			}
			return def
		}
	}
	for _, f := range fields {
		for _, c := range []struct {
			name            string
			file, env, flag bool
		}{
			{"default", false, false, false},
			{"file", true, false, false},
			{"env", false, true, false},
			{"flag", false, false, true},
			{"file+env", true, true, false},
			{"file+flag", true, false, true},
			{"env+flag", false, true, true},
			{"file+env+flag", true, true, true},
		} {
			t.Run(f.path+"/"+c.name, func(t *testing.T) {
				var args, environ []string
				if c.file {
					args = append(args, "--config", writeFile(t, f.yamlKey+": "+f.values.file+"\n"))
				}
				if c.env {
					environ = append(environ, f.env+"="+f.values.env)
				}
				if c.flag {
					args = append(args, "--"+f.path+"="+f.values.flag)
				}
				cfg, err := load(t, args, environ...)
				if err != nil {
					t.Fatal(err)
				}
				w := want(f.values, c.file, c.env, c.flag)(f.def)
				if f.path == "kafka.brokers" && w == f.values.file {
					w = "file:1,file:2"
				}
				if got := f.get(cfg); got != w {
					t.Fatalf("%s = %q, want %q", f.path, got, w)
				}
			})
		}
	}
}

// A boolean flag without a value means true, as with any command line
// tool; with =value it takes the value.
func TestBoolFlags(t *testing.T) {
	for _, c := range []struct {
		name                string
		args                []string
		pprof, createTopics bool
		positional          []string
	}{
		{"defaults", nil, false, true, nil},
		{"bare", []string{"--http.pprof"}, true, true, nil},
		{"bare before another flag", []string{"--http.pprof", "--kafka.create_topics=false"}, true, false, nil},
		{"=true", []string{"--http.pprof=true"}, true, true, nil},
		{"=false", []string{"--kafka.create_topics=false"}, false, false, nil},
		{"=0 and =1", []string{"--kafka.create_topics=0", "--http.pprof=1"}, true, false, nil},
		{"bare then an argument", []string{"--http.pprof", "false"}, true, true, []string{"false"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("walrelay", pflag.ContinueOnError)
			config.BindFlags(fs)
			if err := fs.Parse(c.args); err != nil {
				t.Fatalf("parsing %q: %v", c.args, err)
			}
			cfg, err := config.Load(fs, nil)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.HTTP.Pprof != c.pprof || cfg.Kafka.CreateTopics != c.createTopics || !slices.Equal(fs.Args(), c.positional) {
				t.Errorf("%q: http.pprof=%t kafka.create_topics=%t arguments %q; want %t, %t, %q", c.args, cfg.HTTP.Pprof, cfg.Kafka.CreateTopics, fs.Args(), c.pprof, c.createTopics, c.positional)
			}
		})
	}
	t.Run("not a boolean", func(t *testing.T) {
		_, err := load(t, []string{"--http.pprof=maybe"})
		var fe *config.FieldError
		if !errors.As(err, &fe) || fe.Field != "http.pprof" || !strings.Contains(err.Error(), "--http.pprof") {
			t.Fatalf("want a FieldError for http.pprof naming the flag, got %v", err)
		}
	})
}

// The file comes from --config, else WALRELAY_CONFIG; the flag wins.
func TestConfigFileFromEnvOrFlag(t *testing.T) {
	envFile := writeFile(t, "postgres:\n  slot: env_file\n")
	flagFile := writeFile(t, "postgres:\n  slot: flag_file\n")
	cfg, err := load(t, nil, "WALRELAY_CONFIG="+envFile)
	if err != nil || cfg.Postgres.Slot != "env_file" {
		t.Fatalf("WALRELAY_CONFIG: slot=%q err=%v", cfg.Postgres.Slot, err)
	}
	cfg, err = load(t, []string{"--config", flagFile}, "WALRELAY_CONFIG="+envFile)
	if err != nil || cfg.Postgres.Slot != "flag_file" {
		t.Fatalf("--config over WALRELAY_CONFIG: slot=%q err=%v", cfg.Postgres.Slot, err)
	}
}

// Every option can be given back its default through the environment:
// formatting a value and parsing it agree for every field type.
func TestEveryDefaultRoundTripsThroughEnv(t *testing.T) {
	def := config.Default()
	seen := map[string]bool{}
	for _, f := range config.Fields(&def) {
		if !strings.HasPrefix(f.Env, config.EnvPrefix) || f.Flag == "" || seen[f.Env] {
			t.Errorf("field %s: env %q flag %q (duplicate: %t)", f.Path, f.Env, f.Flag, seen[f.Env])
		}
		seen[f.Env] = true
		t.Run(f.Path, func(t *testing.T) {
			cfg, err := load(t, []string{"--" + f.Flag + "=" + f.Default}, f.Env+"="+f.Default)
			if err != nil {
				t.Fatalf("%s=%q and --%s=%q: %v", f.Env, f.Default, f.Flag, f.Default, err)
			}
			if !reflect.DeepEqual(cfg, config.Default()) {
				t.Fatalf("setting %s to its default %q changed the config:\n%s\nwant\n%s", f.Path, f.Default, cfg, config.Default())
			}
		})
	}
}

func TestValidateNamesFieldAndValue(t *testing.T) {
	cases := []struct {
		name         string
		mutate       func(*config.Config)
		field, value string
	}{
		{"dsn empty", func(c *config.Config) { c.Postgres.DSN = "" }, "postgres.dsn", ""},
		{"dsn invalid, password redacted", func(c *config.Config) { c.Postgres.DSN = "host=db port=notaport password=hunter2" }, "postgres.dsn", "host=db port=notaport password=xxxxx"},
		{"slot uppercase", func(c *config.Config) { c.Postgres.Slot = "Bad-Slot" }, "postgres.slot", "Bad-Slot"},
		{"slot empty", func(c *config.Config) { c.Postgres.Slot = "" }, "postgres.slot", ""},
		{"slot too long", func(c *config.Config) { c.Postgres.Slot = strings.Repeat("s", 64) }, "postgres.slot", strings.Repeat("s", 64)},
		{"no publication", func(c *config.Config) { c.Postgres.Publications = nil }, "postgres.publications", ""},
		{"publication too long", func(c *config.Config) { c.Postgres.Publications = []string{strings.Repeat("p", 64)} }, "postgres.publications", strings.Repeat("p", 64)},
		{"table with two dots", func(c *config.Config) { c.Postgres.Table = "a.b.c" }, "postgres.table", "a.b.c"},
		{"table quoted", func(c *config.Config) { c.Postgres.Table = `public."Outbox"` }, "postgres.table", `public."Outbox"`},
		{"status interval too short", func(c *config.Config) { c.Postgres.StatusInterval = time.Millisecond }, "postgres.status_interval", "1ms"},
		{"status interval too long", func(c *config.Config) { c.Postgres.StatusInterval = 2 * time.Minute }, "postgres.status_interval", "2m0s"},
		{"min backoff zero", func(c *config.Config) { c.Postgres.MinBackoff = 0 }, "postgres.min_backoff", "0s"},
		{"no broker", func(c *config.Config) { c.Kafka.Brokers = nil }, "kafka.brokers", ""},
		{"broker without port", func(c *config.Config) { c.Kafka.Brokers = []string{"kafka1"} }, "kafka.brokers", "kafka1"},
		{"partitions zero", func(c *config.Config) { c.Kafka.TopicPartitions = 0 }, "kafka.topic_partitions", "0"},
		{"partitions -2", func(c *config.Config) { c.Kafka.TopicPartitions = -2 }, "kafka.topic_partitions", "-2"},
		{"replication factor zero", func(c *config.Config) { c.Kafka.TopicReplicationFactor = 0 }, "kafka.topic_replication_factor", "0"},
		{"batch too small", func(c *config.Config) { c.Kafka.BatchMaxBytes = 100 }, "kafka.batch_max_bytes", "100"},
		{"negative linger", func(c *config.Config) { c.Kafka.Linger = -time.Second }, "kafka.linger", "-1s"},
		{"no in-flight records", func(c *config.Config) { c.Relay.MaxInFlightRecords = 0 }, "relay.max_in_flight_records", "0"},
		{"in-flight bytes too small", func(c *config.Config) { c.Relay.MaxInFlightBytes = 10 }, "relay.max_in_flight_bytes", "10"},
		{"negative shutdown timeout", func(c *config.Config) { c.Relay.ShutdownTimeout = -time.Second }, "relay.shutdown_timeout", "-1s"},
		{"bad dead-letter topic", func(c *config.Config) { c.Relay.DeadLetterTopic = "dead letters!" }, "relay.dead_letter_topic", "dead letters!"},
		{"log level", func(c *config.Config) { c.Log.Level = "verbose" }, "log.level", "verbose"},
		{"log format", func(c *config.Config) { c.Log.Format = "xml" }, "log.format", "xml"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := config.Default()
			c.mutate(&cfg)
			err := cfg.Validate()
			if err == nil {
				t.Fatalf("Validate accepted %s=%q", c.field, c.value)
			}
			var fe *config.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate error is not a *FieldError: %v", err)
			}
			if fe.Field != c.field || fe.Value != c.value {
				t.Fatalf("FieldError{Field: %q, Value: %q}, want %q, %q (%v)", fe.Field, fe.Value, c.field, c.value, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, c.field) || !strings.Contains(msg, strconv.Quote(c.value)) || strings.Contains(msg, "\n") {
				t.Fatalf("message should be one line naming %s and %q: %q", c.field, c.value, msg)
			}
			if strings.Contains(msg, "hunter2") {
				t.Fatalf("message leaks the password: %q", msg)
			}
		})
	}
	t.Run("router option", func(t *testing.T) {
		cfg := config.Default()
		cfg.Router.RouteTopicRegex = "(unclosed"
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), "route.topic.regex") || !strings.Contains(err.Error(), "(unclosed") {
			t.Fatalf("want an error naming route.topic.regex and its value, got %v", err)
		}
	})
	t.Run("defaults are valid", func(t *testing.T) {
		cfg := config.Default()
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
	})
}

// An error in a value read from the environment or a flag says where the
// value came from.
func TestFieldErrorNamesSource(t *testing.T) {
	cases := []struct {
		name         string
		args         []string
		env          []string
		field, value string
		source       string
	}{
		{"duration from env", nil, []string{"WALRELAY_KAFKA_LINGER=abc"}, "kafka.linger", "abc", "WALRELAY_KAFKA_LINGER"},
		{"duration from flag", []string{"--kafka.linger=abc"}, nil, "kafka.linger", "abc", "--kafka.linger"},
		{"integer from env", nil, []string{"WALRELAY_KAFKA_TOPIC_PARTITIONS=many"}, "kafka.topic_partitions", "many", "WALRELAY_KAFKA_TOPIC_PARTITIONS"},
		{"integer overflow from flag", []string{"--kafka.topic_replication_factor=70000"}, nil, "kafka.topic_replication_factor", "70000", "--kafka.topic_replication_factor"},
		{"bool from env", nil, []string{"WALRELAY_KAFKA_CREATE_TOPICS=maybe"}, "kafka.create_topics", "maybe", "WALRELAY_KAFKA_CREATE_TOPICS"},
		{"map from flag", []string{"--kafka.topic_configs=cleanup.policy"}, nil, "kafka.topic_configs", "cleanup.policy", "--kafka.topic_configs"},
		{"flag beats a bad env value? no: env is parsed first", []string{"--kafka.linger=1s"}, []string{"WALRELAY_KAFKA_LINGER=abc"}, "kafka.linger", "abc", "WALRELAY_KAFKA_LINGER"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := load(t, c.args, c.env...)
			var fe *config.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("want a *FieldError, got %v", err)
			}
			if fe.Field != c.field || fe.Value != c.value || fe.Source != c.source || !strings.Contains(err.Error(), "(from "+c.source+")") {
				t.Fatalf("got %q (field %q value %q), want field %s value %q from %s", err, fe.Field, fe.Value, c.field, c.value, c.source)
			}
		})
	}
}

// A value that fails validation is reported with where it came from: the
// variable, the flag, or the file and line that set it last.
func TestValidationErrorNamesSource(t *testing.T) {
	file := writeFile(t, "log:\n  format: text\n  level: verbose\npostgres:\n  max_backoff: 1ms\n")
	cases := []struct {
		name    string
		args    []string
		env     []string
		want    string // the whole message, %s for the file's path
		wantSrc string
	}{
		{"env", nil, []string{"WALRELAY_LOG_LEVEL=verbose"},
			`config log.level="verbose" (from WALRELAY_LOG_LEVEL): must be debug, info, warn or error`, "WALRELAY_LOG_LEVEL"},
		{"flag", []string{"--log.level=verbose"}, nil,
			`config log.level="verbose" (from --log.level): must be debug, info, warn or error`, "--log.level"},
		{"flag over env", []string{"--log.level=loud"}, []string{"WALRELAY_LOG_LEVEL=verbose"},
			`config log.level="loud" (from --log.level): must be debug, info, warn or error`, "--log.level"},
		{"file", []string{"--config", file}, []string{"WALRELAY_POSTGRES_MAX_BACKOFF=1s"},
			`config log.level="verbose" (from %s:3): must be debug, info, warn or error`, file + ":3"},
		{"env over file", []string{"--config", file}, []string{"WALRELAY_LOG_LEVEL=chatty", "WALRELAY_POSTGRES_MAX_BACKOFF=1s"},
			`config log.level="chatty" (from WALRELAY_LOG_LEVEL): must be debug, info, warn or error`, "WALRELAY_LOG_LEVEL"},
		{"file with the default it is checked against", []string{"--config", file, "--log.level=info"}, nil,
			`config postgres.max_backoff="1ms" (from %s:5): must be at least postgres.min_backoff (250ms)`, file + ":5"},
		{"secret from a file variable", nil, []string{"WALRELAY_POSTGRES_DSN_FILE=" + writeFile(t, "")},
			`config postgres.dsn="" (from WALRELAY_POSTGRES_DSN_FILE): required`, "WALRELAY_POSTGRES_DSN_FILE"},
		{"list from env", nil, []string{"WALRELAY_KAFKA_BROKERS=kafka1"},
			`config kafka.brokers="kafka1" (from WALRELAY_KAFKA_BROKERS): brokers are host:port`, "WALRELAY_KAFKA_BROKERS"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := load(t, c.args, c.env...)
			want := c.want
			if strings.Contains(want, "%s") {
				want = fmt.Sprintf(want, file)
			}
			if err == nil || err.Error() != want {
				t.Fatalf("got  %v\nwant %s", err, want)
			}
			var fe *config.FieldError
			if !errors.As(err, &fe) || fe.Source != c.wantSrc {
				t.Fatalf("FieldError %+v, want Source %q", fe, c.wantSrc)
			}
		})
	}
	t.Run("Validate on its own names no source", func(t *testing.T) {
		cfg := config.Default()
		cfg.Log.Level = "verbose"
		err := cfg.Validate()
		if want := `config log.level="verbose": must be debug, info, warn or error`; err == nil || err.Error() != want {
			t.Fatalf("got %v, want %s", err, want)
		}
	})
}

func TestUnknownEnvironmentVariable(t *testing.T) {
	_, err := load(t, nil, "WALRELAY_NOPE=1", "WALRELAY_POSTGRES_SLOTT=x")
	if err == nil || !strings.Contains(err.Error(), "WALRELAY_NOPE") || !strings.Contains(err.Error(), "WALRELAY_POSTGRES_SLOTT") {
		t.Fatalf("want an error naming both unknown variables, got %v", err)
	}
	// The test harness's and the binary lookup's variables are not config.
	if _, err := load(t, nil, "WALRELAY_TEST_CHILD=1", "WALRELAY_PG_BIN=/usr/lib/postgresql/15/bin", "OTHER_NOPE=1"); err != nil {
		t.Fatalf("non-config variables rejected: %v", err)
	}
}

func TestConfigFile(t *testing.T) {
	for _, content := range []string{"", "\n", "# only a comment\n", "---\n"} {
		t.Run("empty "+strings.TrimSpace(content), func(t *testing.T) {
			cfg, err := load(t, []string{"--config", writeFile(t, content)})
			if err != nil {
				t.Fatalf("empty config file %q: %v", content, err)
			}
			if !reflect.DeepEqual(cfg, config.Default()) {
				t.Fatalf("empty config file changed the config:\n%s", cfg)
			}
		})
	}
	for _, c := range []struct{ name, content, key string }{
		{"top level", "nope: 1\n", "nope"},
		{"nested", "postgres:\n  slot: s\n  slott: t\n", "slott"},
		{"router", "router:\n  route.by.fieldd: x\n", "route.by.fieldd"},
	} {
		t.Run("unknown key "+c.name, func(t *testing.T) {
			_, err := load(t, []string{"--config", writeFile(t, c.content)})
			if err == nil || !strings.Contains(err.Error(), c.key) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("want a one-line error naming %q, got %q", c.key, err)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		_, err := load(t, []string{"--config", filepath.Join(t.TempDir(), "absent.yaml")})
		if err == nil || !strings.Contains(err.Error(), "absent.yaml") {
			t.Fatalf("want an error naming the file, got %v", err)
		}
	})
	t.Run("values", func(t *testing.T) {
		cfg, err := load(t, []string{"--config", writeFile(t, `
postgres:
  publications: [a, b]
kafka:
  topic_configs:
    cleanup.policy: compact
router:
  table.field.event.key: ""
`)})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(cfg.Postgres.Publications, ","); got != "a,b" {
			t.Errorf("publications %q", got)
		}
		if cfg.Kafka.TopicConfigs["cleanup.policy"] != "compact" {
			t.Errorf("topic_configs %v", cfg.Kafka.TopicConfigs)
		}
		if cfg.Router.FieldEventKey != "" {
			t.Errorf("an explicit empty key field was not applied: %q", cfg.Router.FieldEventKey)
		}
	})
}

// A list or map option in the file may be written as the environment
// gives it, one comma-separated string, as well as a YAML sequence or
// mapping.
func TestConfigFileCommaSeparated(t *testing.T) {
	type got struct {
		brokers, publications []string
		topicConfigs          map[string]string
	}
	def := config.Default()
	defaults := got{def.Kafka.Brokers, def.Postgres.Publications, map[string]string{}}
	for _, c := range []struct {
		name, content string
		want          got
	}{
		{"brokers comma-separated", "kafka:\n  brokers: a:9092,b:9092\n",
			got{[]string{"a:9092", "b:9092"}, defaults.publications, defaults.topicConfigs}},
		{"brokers comma-separated with spaces", "kafka:\n  brokers: ' a:9092 ,  b:9092 ,'\n",
			got{[]string{"a:9092", "b:9092"}, defaults.publications, defaults.topicConfigs}},
		{"one broker as a string", "kafka:\n  brokers: a:9092\n",
			got{[]string{"a:9092"}, defaults.publications, defaults.topicConfigs}},
		{"brokers flow sequence", "kafka:\n  brokers: [a:9092, b:9092]\n",
			got{[]string{"a:9092", "b:9092"}, defaults.publications, defaults.topicConfigs}},
		{"brokers block sequence", "kafka:\n  brokers:\n    - a:9092\n    - b:9092\n",
			got{[]string{"a:9092", "b:9092"}, defaults.publications, defaults.topicConfigs}},
		{"publications comma-separated", "postgres:\n  publications: p1, p2\n",
			got{defaults.brokers, []string{"p1", "p2"}, defaults.topicConfigs}},
		{"topic_configs comma-separated", "kafka:\n  topic_configs: cleanup.policy=compact, retention.ms=1000\n",
			got{defaults.brokers, defaults.publications, map[string]string{"cleanup.policy": "compact", "retention.ms": "1000"}}},
		{"topic_configs mapping", "kafka:\n  topic_configs:\n    cleanup.policy: compact\n",
			got{defaults.brokers, defaults.publications, map[string]string{"cleanup.policy": "compact"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := load(t, []string{"--config", writeFile(t, c.content)})
			if err != nil {
				t.Fatal(err)
			}
			g := got{cfg.Kafka.Brokers, cfg.Postgres.Publications, cfg.Kafka.TopicConfigs}
			if !slices.Equal(g.brokers, c.want.brokers) || !slices.Equal(g.publications, c.want.publications) || !maps.Equal(g.topicConfigs, c.want.topicConfigs) {
				t.Errorf("got brokers %q, publications %q, topic_configs %v; want %q, %q, %v", g.brokers, g.publications, g.topicConfigs, c.want.brokers, c.want.publications, c.want.topicConfigs)
			}
		})
	}
	for _, c := range []struct{ name, content, want string }{
		{"map entry without =", "kafka:\n  topic_configs: cleanup.policy\n", "line 2"},
		{"list of mappings", "kafka:\n  brokers:\n    - host: a\n", "line 3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, c.content)
			_, err := load(t, []string{"--config", path})
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("want a one-line error naming %s and %s, got %v", path, c.want, err)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	cases := []struct {
		name, dsn, want string
		secret          string
	}{
		{"URL userinfo", "postgres://walrelay:S3cret@db:5432/app?sslmode=require", "postgres://walrelay:xxxxx@db:5432/app?sslmode=require", "S3cret"},
		{"URL userinfo escaped", "postgres://u:p%40ss%2Fw@db/app", "postgres://u:xxxxx@db/app", "p%40ss"},
		{"URL empty user", "postgresql://:S3cret@db/app", "postgresql://:xxxxx@db/app", "S3cret"},
		{"URL query", "postgres://u@db/app?password=S3cret&sslmode=disable", "", "S3cret"},
		{"URL userinfo and query", "postgres://u:S3cret@db/app?password=Other1", "", "Other1"},
		{"URL multi-host", "postgres://u:S3cret@h1:5432,h2:5433/app", "postgres://u:xxxxx@h1:5432,h2:5433/app", "S3cret"},
		{"URL unparsable", "postgres://u:S3 cret@db/app", "<unparsable URL, redacted>", "S3"},
		{"URL without password", "postgres://u@db/app", "postgres://u@db/app", ""},
		{"key=value", "host=db user=u password=S3cret dbname=app", "host=db user=u password=xxxxx dbname=app", "S3cret"},
		{"key = value spaced", "host=db password = S3cret dbname=app", "host=db password = xxxxx dbname=app", "S3cret"},
		{"key=value quoted with spaces", "host=db password='S3 cr et' dbname=app", "host=db password=xxxxx dbname=app", "cr et"},
		{"key=value quoted with escaped quote", `host=db password='it\'s S3cret' dbname=app`, "host=db password=xxxxx dbname=app", "S3cret"},
		{"key=value last", "host=db password=S3cret", "host=db password=xxxxx", "S3cret"},
		{"key=value sslpassword", "host=db sslpassword=S3cret", "host=db sslpassword=xxxxx", "S3cret"},
		{"key=value without password", "host=db user=u", "host=db user=u", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := config.Redact(c.dsn)
			if c.want != "" && got != c.want {
				t.Errorf("Redact(%q) = %q, want %q", c.dsn, got, c.want)
			}
			if c.secret != "" && strings.Contains(got, c.secret) {
				t.Errorf("Redact(%q) = %q still holds %q", c.dsn, got, c.secret)
			}
		})
	}
}

func TestStringRedactsDSN(t *testing.T) {
	cfg := config.Default()
	cfg.Postgres.DSN = "postgres://walrelay:S3cretPassw0rd@db/app"
	s := cfg.String()
	if strings.Contains(s, "S3cretPassw0rd") || !strings.Contains(s, "walrelay:xxxxx@db/app") {
		t.Fatalf("String() does not redact the DSN:\n%s", s)
	}
	if cfg.Postgres.DSN != "postgres://walrelay:S3cretPassw0rd@db/app" {
		t.Fatal("String() modified the config")
	}
}

// A secret is redacted in errors about it too.
func TestSecretRedactedInLoadErrors(t *testing.T) {
	_, err := load(t, nil, "WALRELAY_POSTGRES_DSN=host=db port=notaport password=S3cretPassw0rd")
	if err == nil || strings.Contains(err.Error(), "S3cretPassw0rd") || !strings.Contains(err.Error(), "postgres.dsn") {
		t.Fatalf("want an error naming postgres.dsn without the password, got %v", err)
	}
}
