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
// defaults and help, which is what docs/configuration.md's table is generated from.
//
// Secrets (the password in postgres.dsn) never appear in errors or in
// String(): see Redact.
//
// It does not connect to anything.
package config

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/walrelay/walrelay/internal/router"
)

// Config is everything walrelay run needs.
type Config struct {
	Postgres  Postgres          `yaml:"postgres"`
	Kafka     Kafka             `yaml:"kafka"`
	Router    router.Config     `yaml:"router"`
	Converter router.Converters `yaml:"converter"`
	Relay     Relay             `yaml:"relay"`
	Outbox    Outbox            `yaml:"outbox"`
	Snapshot  Snapshot          `yaml:"snapshot"`
	HTTP      HTTP              `yaml:"http"`
	Metrics   Metrics           `yaml:"metrics"`
	Log       Log               `yaml:"log"`
}

// Postgres is where events come from.
type Postgres struct {
	DSN            string        `yaml:"dsn" help:"Postgres connection string (URL or key=value); the role needs REPLICATION and SELECT on the outbox" secret:"true"`
	PrimaryDSN     string        `yaml:"primary_dsn" help:"decoding from a standby (Postgres 16+): the primary's connection string, where the outbox objects live and walrelay writes (heartbeats, its slot record, retention, setup), while postgres.dsn is the hot standby holding the slot (empty: postgres.dsn is the primary)" secret:"true"`
	Slot           string        `yaml:"slot" help:"logical replication slot (plugin pgoutput) to stream from"`
	Publications   StringList    `yaml:"publications" help:"pgoutput publications to stream (comma-separated)"`
	Table          StringList    `yaml:"table" help:"outbox tables, schema-qualified (comma-separated; one router for all): setup creates them and adds them to the publication; run checks them at startup, creates their partitions, prunes them (outbox.retention) and copies them (snapshot.mode=initial); check, verify and snapshot read them. The first table's schema holds walrelay_slot_positions. Run streams the tables postgres.publications publish"`
	CreateSlot     bool          `yaml:"create_slot" help:"create the slot at startup if it does not exist and walrelay never confirmed through a slot of that name (see walrelay slot create --replace)"`
	SlotFailover   string        `yaml:"slot_failover" help:"auto, true or false: make the slot a failover slot (PostgreSQL 17+), which Postgres copies to standbys running with sync_replication_slots=on so that it survives a failover; setup, slot create and run (create_slot) create it with FAILOVER and setup and run switch an existing slot on (ALTER_REPLICATION_SLOT). auto: where the server can (a 17+ primary); true: and refuse a server that cannot; false: never. As Debezium's slot.failover (docs/deploy.md, Failover slots)"`
	StatusInterval time.Duration `yaml:"status_interval" help:"longest time between two reports of the confirmed LSN to Postgres; a confirmed LSN that moved is reported within 100ms"`
	MinBackoff     time.Duration `yaml:"min_backoff" help:"first delay before reconnecting after a lost connection"`
	MaxBackoff     time.Duration `yaml:"max_backoff" help:"longest delay between reconnect attempts"`
	ReadWait       time.Duration `yaml:"read_wait" help:"after a read from the slot that got little, wait up to this long for 64 KiB to arrive before the next, so messages come in batches (adds at most this latency; 0: off)"`
}

// Primary is the connection string of the server walrelay writes to: the
// outbox objects, heartbeats and walrelay's slot record live there.
// PrimaryDSN when set (decoding from a standby: DSN is then the hot
// standby holding the slot), DSN otherwise.
func (p Postgres) Primary() string {
	if p.PrimaryDSN != "" {
		return p.PrimaryDSN
	}
	return p.DSN
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
	TransactionalID        string        `yaml:"transactional_id" help:"relay.delivery=exactly_once: the producer's transactional.id, which fences an older process with the same id and keys the checkpoint record (empty: walrelay-<database>-<slot>-<system_identifier>, the Postgres cluster's system identifier telling apart clusters with the same database and slot names)"`
	TransactionTimeout     time.Duration `yaml:"transaction_timeout" help:"relay.delivery=exactly_once: transaction.timeout.ms asked of the broker (at most its transaction.max.timeout.ms); a Kafka transaction takes no new records after a quarter of it"`
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
	Delivery           string        `yaml:"delivery" help:"at_least_once, or exactly_once: records and a checkpoint go into Kafka transactions, and read_committed consumers see each event once across crashes and takeovers (docs/exactly-once.md)"`
	CheckpointTopic    string        `yaml:"checkpoint_topic" help:"relay.delivery=exactly_once: the compacted topic holding the position each Kafka transaction committed (created with one partition if missing)"`
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
	SchemaRejected      string `yaml:"schema_rejected" help:"the schema registry refuses the record's Avro schema (incompatible, invalid, read-only subject, or not registered when converter auto.register.schemas is false); a registry that is down is waited for, never this: dlq, stop or log"`
}

// Policy returns the policy for an error class (one of
// router.OnErrorClasses, whose names are the YAML keys), and false for a
// class relay.on_error has no policy for.
func (p ErrorPolicies) Policy(class router.ErrorClass) (string, bool) {
	switch class {
	case router.ClassRoutingValueMissing:
		return p.RoutingValueMissing, true
	case router.ClassTopicInvalid:
		return p.TopicInvalid, true
	case router.ClassPayloadInvalid:
		return p.PayloadInvalid, true
	case router.ClassRecordTooLarge:
		return p.RecordTooLarge, true
	case router.ClassTopicRejected:
		return p.TopicRejected, true
	case router.ClassSchemaRejected:
		return p.SchemaRejected, true
	}
	return "", false
}

// SetAll sets every class to policy.
func (p *ErrorPolicies) SetAll(policy string) {
	*p = ErrorPolicies{policy, policy, policy, policy, policy, policy}
}

// Outbox is the outbox table's life besides relaying: its partitions and
// the removal of rows the slot has confirmed (docs/DESIGN.md, "The
// outbox's lifecycle").
type Outbox struct {
	TimeColumn            string        `yaml:"time_column" help:"the outbox's event time column (timestamptz, set when the row is inserted): partitions, retention and walrelay verify's windows use it"`
	Partitioned           bool          `yaml:"partitioned" help:"walrelay setup creates the outbox partitioned by range of outbox.time_column, with a publication that publishes through the partition root"`
	PartitionInterval     time.Duration `yaml:"partition_interval" help:"width of each partition of a partitioned outbox, a whole number of hours (24h: daily, from UTC midnight)"`
	PartitionsAhead       int           `yaml:"partitions_ahead" help:"partitions of a partitioned outbox kept created beyond the current one (by walrelay setup, walrelay run and walrelay outbox prune)"`
	Retention             time.Duration `yaml:"retention" help:"remove outbox rows (whole partitions of a partitioned outbox) older than this, and only once the slot has confirmed their transactions (0: keep every row)"`
	PruneInterval         time.Duration `yaml:"prune_interval" help:"how often walrelay run removes rows past outbox.retention and creates partitions ahead"`
	PruneBatch            int           `yaml:"prune_batch" help:"rows removed per DELETE statement when pruning"`
	PruneStatementTimeout time.Duration `yaml:"prune_statement_timeout" help:"statement_timeout of each statement that prunes or creates partitions"`
	// MessagePrefix turns on the table-less outbox: transactional
	// logical decoding messages with this prefix
	// (pg_logical_emit_message(true, prefix, json)) are routed as outbox
	// events, their fields read from the JSON content by the router's
	// column names (docs/DESIGN.md, "A table-less outbox"). Empty: off.
	MessagePrefix string `yaml:"message_prefix" help:"route transactional pg_logical_emit_message(true, <prefix>, <json>) messages with this prefix as outbox events, their fields read from the JSON object by the router's column names (empty: off; PostgreSQL 14+)"`
	// OnSlotLoss is what walrelay run does when it finds the slot it
	// confirmed through missing, lost (wal_status lost) or moved past
	// its record (docs/runbook.md, "A lost slot").
	OnSlotLoss string `yaml:"on_slot_loss" help:"stop, or heal: when walrelay run finds the slot it confirmed through missing, lost or moved past its record, stop with an error saying what happened (stop), or create a new slot and republish from the outbox table the rows after its record's last covered fence, then stream (heal; relay.delivery=at_least_once)"`
}

// outbox.on_slot_loss values.
const (
	SlotLossStop = "stop"
	SlotLossHeal = "heal"
)

// Snapshot is the initial publication of the rows already in the outbox
// when walrelay run creates the slot (docs/DESIGN.md, "Initial
// snapshot"), and what `walrelay snapshot` backfills.
type Snapshot struct {
	Mode             string        `yaml:"mode" help:"never, or initial: when walrelay run creates the slot, first publish the outbox rows already there (read in the slot's exported snapshot), then stream; needs relay.delivery=at_least_once"`
	Where            string        `yaml:"where" help:"SQL boolean expression over the outbox's columns selecting the rows the snapshot publishes, e.g. published_at IS NULL (empty: every row)"`
	ChunkRows        int           `yaml:"chunk_rows" help:"rows the snapshot fetches from its cursor at a time (memory is also bounded by relay.max_in_flight_records and _bytes)"`
	ProgressInterval time.Duration `yaml:"progress_interval" help:"how often the snapshot logs rows done of total, rate and ETA"`
}

// Failover slot choices (postgres.slot_failover). The default is auto: a
// failover slot keeps every committed event across a failover to a standby
// that synchronizes it, costs nothing where no standby does, and is only
// impossible before PostgreSQL 17 (and on a standby), where auto leaves it
// off and says so.
const (
	FailoverAuto  = "auto"  // failover where the server supports it
	FailoverTrue  = "true"  // failover, or refuse the server
	FailoverFalse = "false" // never failover (Debezium's default)
)

// Snapshot modes (snapshot.mode).
const (
	SnapshotNever   = "never"   // stream from the slot only
	SnapshotInitial = "initial" // publish existing rows when the slot is created
)

// Initial reports whether snapshot.mode is initial.
func (s Snapshot) Initial() bool { return s.Mode == SnapshotInitial }

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

// Delivery guarantees (relay.delivery).
const (
	AtLeastOnce = "at_least_once" // records acked one by one; duplicates after a crash
	ExactlyOnce = "exactly_once"  // Kafka transactions with a checkpoint record
)

// ExactlyOnce reports whether relay.delivery is exactly_once.
func (r Relay) ExactlyOnce() bool { return r.Delivery == ExactlyOnce }

// TransactionalID is kafka.transactional_id, or, when it is empty, the id
// derived from the slot, its database and the Postgres cluster's system
// identifier (pg_control_system(), IDENTIFY_SYSTEM): every process relaying
// that slot gets the same id, so the newest one fences the others, and two
// clusters whose databases and slots have the same names (app, walrelay)
// relaying into one Kafka cluster get different ids and checkpoint keys. A
// standby promoted by failover keeps the system identifier, and so the id.
func (c Config) TransactionalID(database, systemID string) string {
	if c.Kafka.TransactionalID != "" {
		return c.Kafka.TransactionalID
	}
	return "walrelay-" + database + "-" + c.Postgres.Slot + "-" + systemID
}

// Error policies for rows walrelay cannot publish (DESIGN.md invariant 4).
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
			Table:          StringList{"public.outbox"},
			CreateSlot:     true,
			SlotFailover:   FailoverAuto,
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
			TransactionTimeout:     time.Minute,
		},
		Router:    router.DefaultConfig(),
		Converter: router.DefaultConverters(),
		Relay: Relay{
			MaxInFlightRecords: 2048,
			MaxInFlightBytes:   4 << 20,
			MaxProcs:           1,
			ShutdownTimeout:    30 * time.Second,
			DeadLetterTopic:    "walrelay.deadletter",
			MaxTopics:          1000,
			OnError:            ErrorPolicies{PolicyDLQ, PolicyDLQ, PolicyDLQ, PolicyDLQ, PolicyDLQ, PolicyDLQ},
			Delivery:           AtLeastOnce,
			CheckpointTopic:    "walrelay.checkpoints",
		},
		Outbox: Outbox{
			TimeColumn:            "created_at",
			PartitionInterval:     24 * time.Hour,
			PartitionsAhead:       3,
			PruneInterval:         time.Minute,
			PruneBatch:            10000,
			PruneStatementTimeout: 30 * time.Second,
			OnSlotLoss:            SlotLossStop,
		},
		Snapshot: Snapshot{
			Mode:             SnapshotNever,
			ChunkRows:        1000,
			ProgressInterval: 10 * time.Second,
		},
		HTTP:    HTTP{Listen: "127.0.0.1:9814"},
		Metrics: Metrics{SlotPollInterval: 5 * time.Second},
		Log:     Log{Level: "info", Format: "text"},
	}
}

// TableName is one outbox table of postgres.table, split into its schema
// and name.
type TableName struct {
	Schema, Name string
}

// String is the table as postgres.table writes it: "schema.name".
func (t TableName) String() string { return t.Schema + "." + t.Name }

// Quoted is the table as SQL names it: "schema"."name".
func (t TableName) Quoted() string {
	return `"` + t.Schema + `"."` + t.Name + `"`
}

// Tables splits postgres.table into its tables, in the order listed. It is
// the one place that reads the list: callers get validated names (an entry
// that does not split, which validate refuses, is left out).
func (p Postgres) Tables() []TableName {
	out := make([]TableName, 0, len(p.Table))
	for _, s := range p.Table {
		schema, name, err := SplitTable(s)
		if err != nil {
			continue
		}
		out = append(out, TableName{Schema: schema, Name: name})
	}
	return out
}

// Schemas is the schemas of the listed tables, each once, in list order
// (the first is RecordSchema): where slotrecord.Locate looks for a record
// left behind by a reordered list.
func (p Postgres) Schemas() []string { return SchemasOf(p.Tables()) }

// SchemasOf is the schemas of tables, each once, in their order.
func SchemasOf(tables []TableName) []string {
	var out []string
	for _, t := range tables {
		if !slices.Contains(out, t.Schema) {
			out = append(out, t.Schema)
		}
	}
	return out
}

// RecordSchema is the schema that holds walrelay_slot_positions: the first
// listed table's. The first table fixes it so that a single-table relay keeps
// its record where it always was; reordering the list would move it, which
// slotrecord refuses rather than start without the slot's record.
func (p Postgres) RecordSchema() string {
	if t := p.Tables(); len(t) > 0 {
		return t[0].Schema
	}
	return "public"
}

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
