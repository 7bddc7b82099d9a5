// Package config is walrelay's one configuration struct: its fields, their
// defaults, how they are read and how they are validated.
//
// In: an optional YAML file, WALRELAY_* environment variables and command
// line flags, applied in that order over the defaults (a flag beats the
// environment, which beats the file). Out: a validated Config, or an error
// naming the bad field, its value and where that value came from.
//
// Every field has a YAML key, an environment variable and a flag derived
// from the same path: router."route.topic.replacement" is the YAML key
// route.topic.replacement under router:, the variable
// WALRELAY_ROUTER_ROUTE_TOPIC_REPLACEMENT and the flag
// --router.route.topic.replacement. Fields() lists them all with their
// defaults and help, which is what the README's table is generated from.
//
// Secrets (the password in postgres.dsn) never appear in errors or in
// String(): see Redact.
//
// It does not connect to anything.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/pkg/router"
)

// Config is everything walrelay run needs.
type Config struct {
	Postgres Postgres      `yaml:"postgres"`
	Kafka    Kafka         `yaml:"kafka"`
	Router   router.Config `yaml:"router"`
	Relay    Relay         `yaml:"relay"`
	HTTP     HTTP          `yaml:"http"`
	Metrics  Metrics       `yaml:"metrics"`
	Log      Log           `yaml:"log"`
}

// Postgres is where events come from.
type Postgres struct {
	DSN            string        `yaml:"dsn" help:"Postgres connection string (URL or key=value); the role needs REPLICATION and SELECT on the outbox" secret:"true"`
	Slot           string        `yaml:"slot" help:"logical replication slot (plugin pgoutput) to stream from"`
	Publications   StringList    `yaml:"publications" help:"pgoutput publications to stream (comma-separated)"`
	Table          string        `yaml:"table" help:"outbox table, schema-qualified; used by setup and the startup column check"`
	CreateSlot     bool          `yaml:"create_slot" help:"create the slot at startup if it does not exist"`
	StatusInterval time.Duration `yaml:"status_interval" help:"longest time between two reports of the confirmed LSN to Postgres; a confirmed LSN that moved is reported within 100ms"`
	MinBackoff     time.Duration `yaml:"min_backoff" help:"first delay before reconnecting after a lost connection"`
	MaxBackoff     time.Duration `yaml:"max_backoff" help:"longest delay between reconnect attempts"`
	ReadWait       time.Duration `yaml:"read_wait" help:"after a read from the slot that got little, wait up to this long for 64 KiB to arrive before the next, so messages come in batches (adds at most this latency; 0: off)"`
}

// Kafka is where events go.
type Kafka struct {
	Brokers                StringList    `yaml:"brokers" help:"seed brokers, host:port (comma-separated)"`
	ClientID               string        `yaml:"client_id" help:"Kafka client id"`
	CreateTopics           bool          `yaml:"create_topics" help:"create a routed topic with kadm the first time it is used"`
	TopicPartitions        int32         `yaml:"topic_partitions" help:"partitions of created topics (-1: broker default)"`
	TopicReplicationFactor int16         `yaml:"topic_replication_factor" help:"replication factor of created topics (-1: broker default)"`
	TopicConfigs           StringMap     `yaml:"topic_configs" help:"configs of created topics, key=value (comma-separated)"`
	Linger                 time.Duration `yaml:"linger" help:"how long a partition waits to fill a batch; 0 sends at once (more, smaller requests)"`
	BatchMaxBytes          int32         `yaml:"batch_max_bytes" help:"largest record batch sent to a partition"`
	ClientMetrics          bool          `yaml:"client_metrics" help:"send client metrics to brokers that subscribe to them (KIP-714); walrelay's own metrics are on /metrics either way"`
	TLS                    KafkaTLS      `yaml:"tls"`
	SASL                   KafkaSASL     `yaml:"sasl"`
}

// KafkaTLS configures TLS to the brokers.
type KafkaTLS struct {
	Enabled    bool   `yaml:"enabled" help:"connect to the brokers with TLS"`
	CAFile     string `yaml:"ca_file" help:"PEM file of the CAs that verify the brokers (empty: the system's)"`
	CertFile   string `yaml:"cert_file" help:"PEM client certificate, for brokers that require one"`
	KeyFile    string `yaml:"key_file" help:"PEM key of the client certificate"`
	ServerName string `yaml:"server_name" help:"name expected in the brokers' certificates (empty: the host dialed)"`
}

// KafkaSASL configures SASL authentication to the brokers.
type KafkaSASL struct {
	Mechanism string `yaml:"mechanism" help:"PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (empty: no SASL)"`
	Username  string `yaml:"username" help:"SASL user"`
	Password  string `yaml:"password" help:"SASL password (prefer WALRELAY_KAFKA_SASL_PASSWORD or ..._FILE)" secret:"true"`
}

// Relay is how walrelay moves events between the two.
type Relay struct {
	MaxInFlightRecords int           `yaml:"max_in_flight_records" help:"records produced but not yet acknowledged before reading from the slot pauses"`
	MaxInFlightBytes   int64         `yaml:"max_in_flight_bytes" help:"bytes produced but not yet acknowledged before reading from the slot pauses; Go's soft memory limit is set to 4 × this + 16 MiB unless GOMEMLIMIT is set"`
	MaxProcs           int           `yaml:"max_procs" help:"CPUs walrelay runs Go code on at once (GOMAXPROCS; 0: all available). One keeps up with a slot's walsender, which spends more CPU per event than walrelay, and costs the least CPU per event; GOMAXPROCS, when set, wins"`
	ShutdownTimeout    time.Duration `yaml:"shutdown_timeout" help:"on SIGTERM, how long to wait for in-flight records to be acknowledged"`
	DeadLetterTopic    string        `yaml:"dead_letter_topic" help:"topic for rows walrelay cannot publish (policy dlq)"`
	MaxTopics          int           `yaml:"max_topics" help:"most distinct topics rows may be routed to; a row routed to one more is a topic_invalid error (bounds topics created, per-topic state and metric series)"`
	TopicPattern       string        `yaml:"topic_pattern" help:"regular expression a routed topic must match in full, e.g. outbox\\.event\\..+ (empty: any); a row routed elsewhere is a topic_invalid error"`
	OnError            ErrorPolicies `yaml:"on_error"`
	HeartbeatInterval  time.Duration `yaml:"heartbeat_interval" help:"emit a non-transactional pg_logical_emit_message this often so the slot advances while the database is idle (0: off)"`
}

// ErrorPolicies says, per class of row walrelay cannot publish, whether to
// send it to the dead-letter topic (dlq), stop the relay (stop) or skip it
// with an error log and a counter (log). Every one is logged with its LSN
// and outbox id.
type ErrorPolicies struct {
	RoutingValueMissing string `yaml:"routing_value_missing" help:"the route.by.field value is NULL or empty: dlq, stop or log"`
	TopicInvalid        string `yaml:"topic_invalid" help:"the routed topic name is one Kafka rejects, does not match relay.topic_pattern or is past relay.max_topics: dlq, stop or log"`
	PayloadInvalid      string `yaml:"payload_invalid" help:"a value the router must parse cannot be parsed, or Kafka cannot take it (a timestamp outside 1970-2262 or refused by the broker, a partition the topic lacks): dlq, stop or log"`
	RecordTooLarge      string `yaml:"record_too_large" help:"the record alone exceeds kafka.batch_max_bytes or the topic's max.message.bytes (MESSAGE_TOO_LARGE for the record sent alone): dlq, stop or log"`
	TopicRejected       string `yaml:"topic_rejected" help:"the broker refuses the topic (a missing ACL, a policy, a topic that does not exist and cannot be created): dlq, stop or log"`
}

// Policy returns the policy for an error class name (router and relay
// class names), and false for an unknown class.
func (p ErrorPolicies) Policy(class string) (string, bool) {
	switch class {
	case "routing_value_missing":
		return p.RoutingValueMissing, true
	case "topic_invalid":
		return p.TopicInvalid, true
	case "payload_invalid":
		return p.PayloadInvalid, true
	case "record_too_large":
		return p.RecordTooLarge, true
	case "topic_rejected":
		return p.TopicRejected, true
	}
	return "", false
}

// SetAll sets every class to policy.
func (p *ErrorPolicies) SetAll(policy string) {
	*p = ErrorPolicies{policy, policy, policy, policy, policy}
}

// HTTP is the listener for /metrics, /healthz, /readyz and /status.
type HTTP struct {
	Listen string `yaml:"listen" help:"address for /metrics, /healthz, /readyz and /status (empty: no listener); loopback by default"`
	Pprof  bool   `yaml:"pprof" help:"also serve Go's profiler under /debug/pprof/ (keep the listener on loopback)"`
}

// Metrics configures what walrelay measures besides its own work.
type Metrics struct {
	SlotPollInterval time.Duration `yaml:"slot_poll_interval" help:"how often pg_replication_slots is polled for lag, wal_status and the slot's holder"`
}

// Log configures logging.
type Log struct {
	Level  string `yaml:"level" help:"debug, info, warn or error"`
	Format string `yaml:"format" help:"text or json"`
}

// TopicRegexp compiles TopicPattern to match a whole topic name; nil when
// the pattern is empty.
func (r Relay) TopicRegexp() (*regexp.Regexp, error) {
	if r.TopicPattern == "" {
		return nil, nil
	}
	return regexp.Compile(`^(?:` + r.TopicPattern + `)$`)
}

// Error policies for rows walrelay cannot publish (GUIDE invariant 4).
const (
	PolicyDLQ  = "dlq"  // publish the row to the dead-letter topic
	PolicyStop = "stop" // stop the relay without confirming the row
	PolicyLog  = "log"  // log it with its LSN and id, count it, and move on
)

// Default returns the defaults: a local Postgres and Kafka, Debezium's
// router defaults, and caps that keep memory in the tens of megabytes.
func Default() Config {
	return Config{
		Postgres: Postgres{
			DSN:            "postgres://walrelay@localhost:5432/postgres",
			Slot:           "walrelay",
			Publications:   []string{"walrelay_outbox"},
			Table:          "public.outbox",
			CreateSlot:     true,
			StatusInterval: time.Second,
			MinBackoff:     250 * time.Millisecond,
			MaxBackoff:     30 * time.Second,
			ReadWait:       time.Millisecond,
		},
		Kafka: Kafka{
			Brokers:                []string{"localhost:9092"},
			ClientID:               "walrelay",
			CreateTopics:           true,
			TopicPartitions:        -1,
			TopicReplicationFactor: -1,
			TopicConfigs:           map[string]string{},
			Linger:                 5 * time.Millisecond,
			BatchMaxBytes:          1 << 20,
		},
		Router: router.DefaultConfig(),
		Relay: Relay{
			MaxInFlightRecords: 4096,
			MaxInFlightBytes:   4 << 20,
			MaxProcs:           1,
			ShutdownTimeout:    30 * time.Second,
			DeadLetterTopic:    "walrelay.deadletter",
			MaxTopics:          1000,
			OnError:            ErrorPolicies{PolicyDLQ, PolicyDLQ, PolicyDLQ, PolicyDLQ, PolicyDLQ},
		},
		HTTP:    HTTP{Listen: "127.0.0.1:9814"},
		Metrics: Metrics{SlotPollInterval: 5 * time.Second},
		Log:     Log{Level: "info", Format: "text"},
	}
}

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
// be debug, info, warn or error`.
func (e *FieldError) Error() string {
	if e.Source != "" {
		return fmt.Sprintf("config %s=%q (from %s): %s", e.Field, e.Value, e.Source, e.Reason)
	}
	return fmt.Sprintf("config %s=%q: %s", e.Field, e.Value, e.Reason)
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
	if _, _, err := SplitTable(c.Postgres.Table); err != nil {
		bad("postgres.table", c.Postgres.Table, err.Error())
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
		if !strings.Contains(b, ":") {
			bad("kafka.brokers", b, "brokers are host:port")
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
	if _, err := router.New(c.Router); err != nil {
		errs = append(errs, fmt.Errorf("config router: %w", err))
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
	for _, class := range []string{"routing_value_missing", "topic_invalid", "payload_invalid", "record_too_large", "topic_rejected"} {
		switch p, _ := c.Relay.OnError.Policy(class); p {
		case PolicyDLQ:
			dlq = true
		case PolicyStop, PolicyLog:
		default:
			bad("relay.on_error."+class, p, "must be dlq, stop or log")
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
	if c.HTTP.Listen != "" {
		if _, _, err := net.SplitHostPort(c.HTTP.Listen); err != nil {
			bad("http.listen", c.HTTP.Listen, "must be host:port (e.g. 127.0.0.1:9814), or empty for no listener")
		}
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

var topicRe = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

func validTopic(t string) bool { return topicRe.MatchString(t) && t != "." && t != ".." }

// SplitTable splits "schema.table" (or "table", meaning public) into its
// parts. Names are taken as written (case-sensitive), without quotes.
func SplitTable(s string) (schema, table string, err error) {
	schema, table, ok := strings.Cut(s, ".")
	if !ok {
		schema, table = "public", s
	}
	if schema == "" || table == "" || strings.ContainsAny(table, ".\"") || strings.Contains(schema, `"`) {
		return "", "", errors.New(`must be "schema.table" or "table"`)
	}
	return schema, table, nil
}

// Redacted returns c with every secret replaced, for printing.
func (c Config) Redacted() Config {
	c.Postgres.DSN = Redact(c.Postgres.DSN)
	if c.Kafka.SASL.Password != "" {
		c.Kafka.SASL.Password = "xxxxx"
	}
	return c
}

// Redact returns dsn with any password replaced by "xxxxx", in URL and in
// key=value form. It is what walrelay prints wherever a DSN appears.
func Redact(dsn string) string {
	if !strings.Contains(dsn, "://") {
		return passwordKV.ReplaceAllString(dsn, "${1}xxxxx")
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "<unparsable URL, redacted>"
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

var passwordKV = regexp.MustCompile(`(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S*)`)
