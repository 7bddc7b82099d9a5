package config_test

// Tests of loading: default < file < env < flag, boolean flags, defaults via env, unknown variables.

import (
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/walrelay/walrelay/internal/config"
)

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
		{"postgres.table", "WALRELAY_POSTGRES_TABLE", "postgres:\n  table", "public.outbox",
			source{"[file.a, file.b]", "env.a,env.b", "flag.a"}, func(c config.Config) string { return strings.Join(c.Postgres.Table, ",") }},
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
				if w == f.values.file && strings.HasPrefix(w, "[") { // a YAML sequence
					w = strings.ReplaceAll(strings.Trim(w, "[]"), ", ", ",")
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
