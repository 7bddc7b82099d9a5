package config_test

// Tests of validation errors: the field, its value and where the value came from.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/config"
)

func TestValidateNamesFieldAndValue(t *testing.T) {
	cases := []struct {
		name         string
		mutate       func(*config.Config)
		field, value string
	}{
		{"dsn empty", func(c *config.Config) { c.Postgres.DSN = "" }, "postgres.dsn", ""},
		{"dsn invalid, password redacted", func(c *config.Config) { c.Postgres.DSN = "host=db port=notaport password=hunter2" }, "postgres.dsn", "host=db port=notaport password=xxxxx"},
		{"primary_dsn invalid, password redacted", func(c *config.Config) { c.Postgres.PrimaryDSN = "host=db port=notaport password=hunter2" }, "postgres.primary_dsn", "host=db port=notaport password=xxxxx"},
		{"slot uppercase", func(c *config.Config) { c.Postgres.Slot = "Bad-Slot" }, "postgres.slot", "Bad-Slot"},
		{"slot empty", func(c *config.Config) { c.Postgres.Slot = "" }, "postgres.slot", ""},
		{"slot too long", func(c *config.Config) { c.Postgres.Slot = strings.Repeat("s", 64) }, "postgres.slot", strings.Repeat("s", 64)},
		{"no publication", func(c *config.Config) { c.Postgres.Publications = nil }, "postgres.publications", ""},
		{"publication too long", func(c *config.Config) { c.Postgres.Publications = []string{strings.Repeat("p", 64)} }, "postgres.publications", strings.Repeat("p", 64)},
		{"table with two dots", func(c *config.Config) { c.Postgres.Table = config.StringList{"a.b.c"} }, "postgres.table", "a.b.c"},
		{"no table", func(c *config.Config) { c.Postgres.Table = nil }, "postgres.table", ""},
		{"second table invalid", func(c *config.Config) { c.Postgres.Table = config.StringList{"public.outbox", "a.b.c"} }, "postgres.table", "a.b.c"},
		{"table listed twice", func(c *config.Config) {
			c.Postgres.Table = config.StringList{"outbox", "billing.outbox", "public.outbox"}
		}, "postgres.table", "outbox,billing.outbox,public.outbox"},
		{"table quoted", func(c *config.Config) { c.Postgres.Table = config.StringList{`public."Outbox"`} }, "postgres.table", `public."Outbox"`},
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
		{"delivery", func(c *config.Config) { c.Relay.Delivery = "exactly-once" }, "relay.delivery", "exactly-once"},
		{"checkpoint topic", func(c *config.Config) { c.Relay.Delivery, c.Relay.CheckpointTopic = config.ExactlyOnce, "" }, "relay.checkpoint_topic", ""},
		{"transaction timeout", func(c *config.Config) { c.Relay.Delivery, c.Kafka.TransactionTimeout = config.ExactlyOnce, time.Hour }, "kafka.transaction_timeout", "1h0m0s"},
		{"time column", func(c *config.Config) { c.Outbox.TimeColumn = "" }, "outbox.time_column", ""},
		{"partition interval", func(c *config.Config) { c.Outbox.PartitionInterval = 90 * time.Minute }, "outbox.partition_interval", "1h30m0s"},
		{"partitions ahead", func(c *config.Config) { c.Outbox.PartitionsAhead = 0 }, "outbox.partitions_ahead", "0"},
		{"retention", func(c *config.Config) { c.Outbox.Retention = time.Second }, "outbox.retention", "1s"},
		{"prune interval", func(c *config.Config) { c.Outbox.PruneInterval = 0 }, "outbox.prune_interval", "0s"},
		{"prune batch", func(c *config.Config) { c.Outbox.PruneBatch = 0 }, "outbox.prune_batch", "0"},
		{"message prefix of walrelay's own", func(c *config.Config) { c.Outbox.MessagePrefix = "walrelay.heartbeat" }, "outbox.message_prefix", "walrelay.heartbeat"},
		{"prune statement timeout", func(c *config.Config) { c.Outbox.PruneStatementTimeout = 0 }, "outbox.prune_statement_timeout", "0s"},
		{"snapshot mode", func(c *config.Config) { c.Snapshot.Mode = "always" }, "snapshot.mode", "always"},
		{"snapshot with exactly-once", func(c *config.Config) { c.Snapshot.Mode, c.Relay.Delivery = config.SnapshotInitial, config.ExactlyOnce }, "snapshot.mode", "initial"},
		{"snapshot chunk", func(c *config.Config) { c.Snapshot.ChunkRows = 0 }, "snapshot.chunk_rows", "0"},
		{"snapshot progress", func(c *config.Config) { c.Snapshot.ProgressInterval = 0 }, "snapshot.progress_interval", "0s"},
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

// TestTables pins the one place that splits postgres.table: the order kept,
// "t" meaning public.t, and the record in the first table's schema.
func TestTables(t *testing.T) {
	c := config.Default()
	c.Postgres.Table = config.StringList{"billing.outbox", "outbox", "Orders.Outbox"}
	got := c.Postgres.Tables()
	want := []string{"billing.outbox", "public.outbox", "Orders.Outbox"}
	quoted := []string{`"billing"."outbox"`, `"public"."outbox"`, `"Orders"."Outbox"`}
	if len(got) != len(want) {
		t.Fatalf("Tables() = %v, want %v", got, want)
	}
	for i, tn := range got {
		if tn.String() != want[i] || tn.Quoted() != quoted[i] {
			t.Errorf("table %d = %s / %s, want %s / %s", i, tn, tn.Quoted(), want[i], quoted[i])
		}
	}
	if s := c.Postgres.RecordSchema(); s != "billing" {
		t.Errorf("RecordSchema() = %q, want billing (the first table's)", s)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("three distinct tables refused: %v", err)
	}
}
