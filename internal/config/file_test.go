package config_test

// Tests of the config file: where it comes from, empty files, unknown keys, values, comma lists.

import (
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/config"
)

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
		{"map entry without =", "kafka:\n  topic_configs: cleanup.policy\n", ":2)"},
		{"list of mappings", "kafka:\n  brokers:\n    - host: a\n", ":3)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, c.content)
			_, err := load(t, []string{"--config", path})
			if err == nil || !strings.Contains(err.Error(), path+c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("want a one-line error naming %s%s, got %v", path, c.want, err)
			}
		})
	}
}
