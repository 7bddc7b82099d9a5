package config_test

// Tests of the config file's errors in walrelay's words (golden), of what
// the file accepts (quoted numbers, YAML's integer forms, a Debezium
// connector's transforms.<name>. prefix), and of the bound on how much of
// a value any error repeats.

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/config"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// Each testdata/yamlerrors/NAME.yaml is refused with the one line in
// NAME.golden: the option as walrelay names it, the file and line, the
// reason and the fix (go test -run TestConfigFileErrorsGolden -update
// rewrites them).
func TestConfigFileErrorsGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "yamlerrors", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases in testdata/yamlerrors: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			_, err := load(t, []string{"--config", file})
			if err == nil {
				t.Fatalf("%s was accepted", file)
			}
			got := err.Error() + "\n"
			for _, internal := range []string{"!!", "not found in type", "unmarshal", "time.Duration", "config.", "router.Config"} {
				if strings.Contains(got, internal) {
					t.Errorf("the error shows Go's or yaml.v3's words (%q): %s", internal, got)
				}
			}
			if strings.Count(got, "\n") != 1 {
				t.Errorf("not one line: %q", got)
			}
			golden := strings.TrimSuffix(file, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if got != string(want) {
				t.Errorf("error\n got: %s want: %s", got, want)
			}
		})
	}
}

// What the file accepts beyond the plain form: numbers quoted or in YAML's
// other integer forms, YAML 1.1 booleans, aliases, and a Debezium
// connector's transform options pasted with their transforms.<name>.
// prefix, under router: or at the top.
func TestConfigFileAccepts(t *testing.T) {
	cfg, err := load(t, []string{"--config", writeFile(t, `
relay:
  max_in_flight_records: "4096"
  max_in_flight_bytes: 0x100000
outbox:
  prune_batch: &batch 1_000
snapshot:
  chunk_rows: *batch
kafka:
  topic_partitions: '12'
  create_topics: no
transforms: outbox
transforms.outbox.type: io.debezium.transforms.outbox.EventRouter
router:
  transforms.outbox.route.topic.replacement: events.${routedByValue}
  transforms.outbox.table.field.event.key: aggregate_id
  route.by.field: kind
  table.field.event.timestamp: ~
  table.field.event.type:
log:
`)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"quoted number", cfg.Relay.MaxInFlightRecords, 4096},
		{"hexadecimal", cfg.Relay.MaxInFlightBytes, int64(1 << 20)},
		{"underscores", cfg.Outbox.PruneBatch, 1000},
		{"alias", cfg.Snapshot.ChunkRows, 1000},
		{"quoted int32", cfg.Kafka.TopicPartitions, int32(12)},
		{"YAML 1.1 boolean", cfg.Kafka.CreateTopics, false},
		{"transforms.<name>. under router", cfg.Router.RouteTopicReplacement, "events.${routedByValue}"},
		{"transforms.<name>. under router", cfg.Router.FieldEventKey, "aggregate_id"},
		{"transforms.<name>. at the top", cfg.Router.Type, "io.debezium.transforms.outbox.EventRouter"},
		{"plain router option beside them", cfg.Router.RouteByField, "kind"},
		{"null string option (empty)", cfg.Router.FieldEventType, ""},
		{"a section with nothing under it", cfg.Log, config.Default().Log},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

// No error repeats more than a bounded start of a value, whichever source
// gave it: a 6.6 MB value once came back whole.
func TestErrorsBoundTheValue(t *testing.T) {
	huge := strings.Repeat("x", 6_600_000)
	file := func(content string) []string { return []string{"--config", writeFile(t, content)} }
	for _, c := range []struct {
		name    string
		args    []string
		environ []string
		want    string // in the error
	}{
		{"flag", []string{"--log.level=" + huge}, nil, `config log.level="` + strings.Repeat("x", 64) + `"… (6600000 bytes) (from --log.level): must be debug, info, warn or error`},
		{"environment", nil, []string{"WALRELAY_KAFKA_LINGER=" + huge}, "(6600000 bytes) (from WALRELAY_KAFKA_LINGER): not a duration"},
		{"file value", file("log:\n  format: " + huge + "\n"), nil, "(6600000 bytes) (from "},
		{"file key", file("postgres:\n  ? " + huge + "\n  : 1\n"), nil, "bytes cut]"},
		{"router option", []string{"--router.route.topic.regex=(" + huge}, nil, "config router: "},
		{"duration that looks like a number", []string{"--kafka.linger=" + strings.Repeat("1", 100_000)}, nil, "not a duration"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := load(t, c.args, c.environ...)
			if err == nil {
				t.Fatal("accepted")
			}
			if len(err.Error()) > 1024 {
				t.Errorf("the error is %d bytes long: %.300s…", len(err.Error()), err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %.600q does not contain %q", err, c.want)
			}
		})
	}
}

// An unknown option in the file is an *OptionError naming it, with
// the closest option; a bad value stays a *FieldError.
func TestConfigFileErrorTypes(t *testing.T) {
	_, err := load(t, []string{"--config", writeFile(t, "postgres:\n  slott: x\n")})
	var ue *config.OptionError
	if !errors.As(err, &ue) || ue.Option != "postgres.slott" || ue.Suggestion != "postgres.slot" {
		t.Errorf("want an *OptionError for postgres.slott suggesting postgres.slot, got %#v", err)
	}
	_, err = load(t, []string{"--config", writeFile(t, "postgres:\n  status_interval: 30\n")})
	var fe *config.FieldError
	if !errors.As(err, &fe) || fe.Field != "postgres.status_interval" || fe.Value != "30" {
		t.Errorf("want a *FieldError for postgres.status_interval=30, got %#v", err)
	}
}

// The environment and the flags give the same unit hint and suggestion.
func TestEnvAndFlagErrorsSayTheFix(t *testing.T) {
	for _, c := range []struct {
		name    string
		args    []string
		environ []string
		want    string
	}{
		{"duration flag", []string{"--postgres.status_interval=30"}, nil,
			`config postgres.status_interval="30" (from --postgres.status_interval): a duration needs a unit: write 30s (units: ms, s, m, h)`},
		{"duration env", nil, []string{"WALRELAY_KAFKA_LINGER=5"},
			`config kafka.linger="5" (from WALRELAY_KAFKA_LINGER): a duration needs a unit: write 5s (units: ms, s, m, h)`},
		{"unknown env", nil, []string{"WALRELAY_POSTGRES_SLOTT=x"},
			"unknown environment variable WALRELAY_POSTGRES_SLOTT (did you mean WALRELAY_POSTGRES_SLOT?) (run `walrelay config --list` to list the valid ones)"},
		{"broker port", []string{"--kafka.brokers=host:99999"}, nil,
			`config kafka.brokers="host:99999" (from --kafka.brokers): the port must be a number from 1 to 65535`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := load(t, c.args, c.environ...)
			if err == nil || err.Error() != c.want {
				t.Errorf("error\n got: %v\nwant: %s", err, c.want)
			}
		})
	}
}
