package config

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/router"
)

// FieldError names a configuration field, the value it rejected and,
// when Load read that value, where from.
type FieldError struct {
	Field  string // YAML path, e.g. postgres.slot
	Value  string // the offending value, redacted if secret
	Reason string
	// Source is where the value came from: a WALRELAY_* variable (or its
	// _FILE), a --flag, or the config file and line ("walrelay.yaml:12").
	// It is empty for a default, and when Validate is called on its own.
	Source string
}

// Error reads `config log.level="verbose" (from WALRELAY_LOG_LEVEL): must
// be debug, info, warn or error`. A value over 64 bytes is shown by its
// start and its length.
func (e *FieldError) Error() string {
	if e.Source != "" {
		return fmt.Sprintf("config %s=%s (from %s): %s", e.Field, quoteValue(e.Value), e.Source, e.Reason)
	}
	return fmt.Sprintf("config %s=%s: %s", e.Field, quoteValue(e.Value), e.Reason)
}

var identRe = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// ValidationError lists every problem Validate found, on one line.
type ValidationError struct{ Errs []error }

func (e *ValidationError) Error() string {
	msgs := make([]string, len(e.Errs))
	for i, err := range e.Errs {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

// Unwrap lets errors.As find each *FieldError.
func (e *ValidationError) Unwrap() []error { return e.Errs }

// Validate checks every field; the error is a *ValidationError holding one
// *FieldError per problem.
func (c *Config) Validate() error { return c.validate(nil) }

// validate is Validate, with each FieldError's Source taken from sources
// (YAML path to where Load read the value).
func (c *Config) validate(sources map[string]string) error {
	var errs []error
	bad := func(field, value, reason string) {
		errs = append(errs, &FieldError{Field: field, Value: value, Reason: reason, Source: sources[field]})
	}
	if c.Postgres.DSN == "" {
		bad("postgres.dsn", "", "required")
	} else if _, err := pgconn.ParseConfig(c.Postgres.DSN); err != nil {
		reason := "not a valid connection string"
		// The cause (e.g. an sslrootcert file that cannot be read) names
		// no secret; the whole error would repeat the DSN.
		var pe *pgconn.ParseConfigError
		if errors.As(err, &pe) && pe.Unwrap() != nil {
			reason += ": " + pe.Unwrap().Error()
		}
		bad("postgres.dsn", Redact(c.Postgres.DSN), reason)
	}
	if c.Postgres.PrimaryDSN != "" {
		if _, err := pgconn.ParseConfig(c.Postgres.PrimaryDSN); err != nil {
			reason := "not a valid connection string"
			var pe *pgconn.ParseConfigError
			if errors.As(err, &pe) && pe.Unwrap() != nil {
				reason += ": " + pe.Unwrap().Error()
			}
			bad("postgres.primary_dsn", Redact(c.Postgres.PrimaryDSN), reason)
		}
	}
	if !identRe.MatchString(c.Postgres.Slot) {
		bad("postgres.slot", c.Postgres.Slot, "slot names are 1-63 lowercase letters, digits and underscores")
	}
	if len(c.Postgres.Publications) == 0 {
		bad("postgres.publications", "", "at least one publication is required")
	}
	for _, p := range c.Postgres.Publications {
		if p == "" || len(p) > 63 {
			bad("postgres.publications", p, "publication names are 1-63 characters")
		}
	}
	if len(c.Postgres.Table) == 0 {
		bad("postgres.table", "", "at least one outbox table is required")
	}
	seen := make(map[string]bool, len(c.Postgres.Table))
	for _, t := range c.Postgres.Table {
		schema, name, err := SplitTable(t)
		if err != nil {
			bad("postgres.table", t, err.Error())
			continue
		}
		if full := schema + "." + name; seen[full] {
			bad("postgres.table", strings.Join(c.Postgres.Table, ","), full+" is listed twice")
		} else {
			seen[full] = true
		}
	}
	switch c.Postgres.SlotFailover {
	case FailoverAuto, FailoverTrue, FailoverFalse:
	default:
		bad("postgres.slot_failover", c.Postgres.SlotFailover, "must be auto, true or false")
	}
	if c.Postgres.StatusInterval < 10*time.Millisecond || c.Postgres.StatusInterval > time.Minute {
		bad("postgres.status_interval", c.Postgres.StatusInterval.String(), "must be between 10ms and 1m (below the server's wal_sender_timeout)")
	}
	if c.Postgres.MinBackoff <= 0 {
		bad("postgres.min_backoff", c.Postgres.MinBackoff.String(), "must be positive")
	} else if c.Postgres.MaxBackoff < c.Postgres.MinBackoff {
		bad("postgres.max_backoff", c.Postgres.MaxBackoff.String(), "must be at least postgres.min_backoff ("+c.Postgres.MinBackoff.String()+")")
	}
	if c.Postgres.ReadWait < 0 || c.Postgres.ReadWait > 100*time.Millisecond {
		bad("postgres.read_wait", c.Postgres.ReadWait.String(), "must be between 0 and 100ms")
	}
	if len(c.Kafka.Brokers) == 0 {
		bad("kafka.brokers", "", "at least one broker is required")
	}
	for _, b := range c.Kafka.Brokers {
		if reason := brokerProblem(b); reason != "" {
			bad("kafka.brokers", b, reason)
		}
	}
	if c.Kafka.TopicPartitions == 0 || c.Kafka.TopicPartitions < -1 {
		bad("kafka.topic_partitions", fmt.Sprint(c.Kafka.TopicPartitions), "must be positive or -1 for the broker default")
	}
	if c.Kafka.TopicReplicationFactor == 0 || c.Kafka.TopicReplicationFactor < -1 {
		bad("kafka.topic_replication_factor", fmt.Sprint(c.Kafka.TopicReplicationFactor), "must be positive or -1 for the broker default")
	}
	if c.Kafka.BatchMaxBytes < 1024 {
		bad("kafka.batch_max_bytes", fmt.Sprint(c.Kafka.BatchMaxBytes), "must be at least 1024")
	}
	switch c.Kafka.SASL.Mechanism {
	case "":
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		if c.Kafka.SASL.Username == "" {
			bad("kafka.sasl.username", "", "required with kafka.sasl.mechanism "+c.Kafka.SASL.Mechanism)
		}
	default:
		bad("kafka.sasl.mechanism", c.Kafka.SASL.Mechanism, "must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, or empty")
	}
	if (c.Kafka.TLS.CertFile == "") != (c.Kafka.TLS.KeyFile == "") {
		bad("kafka.tls.cert_file", c.Kafka.TLS.CertFile, "kafka.tls.cert_file and kafka.tls.key_file go together")
	}
	if !c.Kafka.TLS.Enabled && (c.Kafka.TLS.CAFile != "" || c.Kafka.TLS.CertFile != "" || c.Kafka.TLS.ServerName != "") {
		bad("kafka.tls.enabled", "false", "TLS files or server_name are set but TLS is off; set kafka.tls.enabled=true")
	}
	if c.Kafka.Linger < 0 {
		bad("kafka.linger", c.Kafka.Linger.String(), "must not be negative")
	}
	if _, err := router.New(c.Router, c.Converter); err != nil {
		errs = append(errs, fmt.Errorf("config router: %w", boundedError{err}))
	}
	if c.Relay.MaxInFlightRecords < 1 {
		bad("relay.max_in_flight_records", fmt.Sprint(c.Relay.MaxInFlightRecords), "must be at least 1")
	}
	if c.Relay.MaxInFlightBytes < 1024 {
		bad("relay.max_in_flight_bytes", fmt.Sprint(c.Relay.MaxInFlightBytes), "must be at least 1024")
	}
	if c.Relay.MaxProcs < 0 {
		bad("relay.max_procs", fmt.Sprint(c.Relay.MaxProcs), "must not be negative")
	}
	if c.Relay.ShutdownTimeout < 0 {
		bad("relay.shutdown_timeout", c.Relay.ShutdownTimeout.String(), "must not be negative")
	}
	dlq := false
	for _, class := range router.OnErrorClasses() {
		switch p, _ := c.Relay.OnError.Policy(class); p {
		case PolicyDLQ:
			dlq = true
		case PolicyStop, PolicyLog:
		default:
			bad("relay.on_error."+class.String(), p, "must be dlq, stop or log")
		}
	}
	if dlq && !validTopic(c.Relay.DeadLetterTopic) {
		bad("relay.dead_letter_topic", c.Relay.DeadLetterTopic, "not a valid Kafka topic name")
	}
	if c.Relay.MaxTopics < 1 {
		bad("relay.max_topics", fmt.Sprint(c.Relay.MaxTopics), "must be at least 1")
	}
	if _, err := c.Relay.TopicRegexp(); err != nil {
		bad("relay.topic_pattern", c.Relay.TopicPattern, "not a regular expression: "+err.Error())
	}
	if c.Relay.HeartbeatInterval < 0 || (c.Relay.HeartbeatInterval > 0 && c.Relay.HeartbeatInterval < 100*time.Millisecond) {
		bad("relay.heartbeat_interval", c.Relay.HeartbeatInterval.String(), "must be 0 (off) or at least 100ms")
	}
	switch c.Relay.Delivery {
	case AtLeastOnce:
	case ExactlyOnce:
		if !validTopic(c.Relay.CheckpointTopic) {
			bad("relay.checkpoint_topic", c.Relay.CheckpointTopic, "not a valid Kafka topic name")
		}
		if c.Kafka.TransactionalID != "" && len(c.Kafka.TransactionalID) > 249 {
			bad("kafka.transactional_id", c.Kafka.TransactionalID, "longer than 249 characters")
		}
		if c.Kafka.TransactionTimeout < time.Second || c.Kafka.TransactionTimeout > 15*time.Minute {
			bad("kafka.transaction_timeout", c.Kafka.TransactionTimeout.String(), "must be between 1s and 15m (Kafka's default transaction.max.timeout.ms)")
		}
	default:
		bad("relay.delivery", c.Relay.Delivery, "must be at_least_once or exactly_once")
	}
	if c.HTTP.Listen != "" {
		if _, _, err := net.SplitHostPort(c.HTTP.Listen); err != nil {
			bad("http.listen", c.HTTP.Listen, "must be host:port (e.g. 127.0.0.1:9814), or empty for no listener")
		}
	}
	if c.Outbox.TimeColumn == "" {
		bad("outbox.time_column", c.Outbox.TimeColumn, "must name the outbox's timestamptz column")
	}
	if iv := c.Outbox.PartitionInterval; iv < time.Hour || iv%time.Hour != 0 {
		bad("outbox.partition_interval", iv.String(), "must be a whole number of hours, at least 1h")
	}
	if c.Outbox.PartitionsAhead < 1 {
		bad("outbox.partitions_ahead", fmt.Sprint(c.Outbox.PartitionsAhead), "must be at least 1")
	}
	if r := c.Outbox.Retention; r < 0 || (r > 0 && r < time.Minute) {
		bad("outbox.retention", r.String(), "must be 0 (keep every row) or at least 1m")
	}
	if c.Outbox.PruneInterval < time.Second {
		bad("outbox.prune_interval", c.Outbox.PruneInterval.String(), "must be at least 1s")
	}
	switch c.Outbox.OnSlotLoss {
	case SlotLossStop:
	case SlotLossHeal:
	default:
		bad("outbox.on_slot_loss", c.Outbox.OnSlotLoss, "must be stop or heal")
	}
	if c.Outbox.PruneBatch < 1 {
		bad("outbox.prune_batch", fmt.Sprint(c.Outbox.PruneBatch), "must be at least 1")
	}
	if c.Outbox.PruneStatementTimeout < 100*time.Millisecond {
		bad("outbox.prune_statement_timeout", c.Outbox.PruneStatementTimeout.String(), "must be at least 100ms")
	}
	switch c.Snapshot.Mode {
	case SnapshotNever:
	case SnapshotInitial:
		if c.Relay.ExactlyOnce() {
			bad("snapshot.mode", c.Snapshot.Mode, "needs relay.delivery=at_least_once: the snapshot's records are not in Kafka transactions (set snapshot.mode=never, or backfill with `walrelay snapshot` before switching to exactly_once)")
		}
	default:
		bad("snapshot.mode", c.Snapshot.Mode, "must be never or initial")
	}
	if c.Snapshot.ChunkRows < 1 || c.Snapshot.ChunkRows > 1_000_000 {
		bad("snapshot.chunk_rows", fmt.Sprint(c.Snapshot.ChunkRows), "must be between 1 and 1000000")
	}
	if c.Snapshot.ProgressInterval < 100*time.Millisecond {
		bad("snapshot.progress_interval", c.Snapshot.ProgressInterval.String(), "must be at least 100ms")
	}
	if p := c.Outbox.MessagePrefix; strings.HasPrefix(p, "walrelay.") {
		bad("outbox.message_prefix", p, "prefixes starting with \"walrelay.\" are walrelay's own (heartbeats): pick another, e.g. outbox")
	}
	if c.Metrics.SlotPollInterval < 100*time.Millisecond {
		bad("metrics.slot_poll_interval", c.Metrics.SlotPollInterval.String(), "must be at least 100ms")
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", c.Log.Level, "must be debug, info, warn or error")
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		bad("log.format", c.Log.Format, "must be text or json")
	}
	if len(errs) == 0 {
		return nil
	}
	return &ValidationError{Errs: errs}
}

// brokerProblem says what is wrong with a seed broker address, or "".
func brokerProblem(b string) string {
	host, port, err := net.SplitHostPort(b)
	if err != nil || host == "" {
		return "brokers are host:port"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "the port must be a number from 1 to 65535"
	}
	return ""
}

var topicRe = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

func validTopic(t string) bool { return topicRe.MatchString(t) && t != "." && t != ".." }
