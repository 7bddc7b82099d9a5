// Package metrics defines walrelay's Prometheus metrics, on a registry
// walrelay creates (never the global one).
//
// In: a prometheus.Registerer. Out: the collectors the relay updates on
// its hot path (counters and histograms, cached per label value), and
// registration of gauges that read live state (in-flight, LSNs, slot lag)
// only when scraped. franz-go's client metrics are added by the publisher
// through the kprom plugin, prefixed walrelay_kafka_.
//
// Metrics (all prefixed walrelay_):
//
//	build_info{version}                              1
//	slot_lag_bytes{slot,position}                    bytes from the slot's confirmed_flush_lsn (position="confirmed_flush") or restart_lsn (position="restart") to pg_current_wal_lsn() (a standby's pg_last_wal_replay_lsn()), polled
//	slot_wal_status{slot,status}                     1 for the slot's wal_status (reserved, extended, unreserved, lost), 0 for the others
//	slot_safe_wal_size_bytes{slot}                   bytes of WAL that can still be written before the slot is lost; +Inf when max_slot_wal_keep_size is unlimited
//	slot_active{slot}                                1 when some process streams from the slot
//	slot_held{slot}                                  1 when this instance streams from the slot
//	slot_poll_errors_total{slot}                     failed polls of pg_replication_slots
//	slot_stall_seconds{slot}                         seconds since the slot's confirmed_flush_lsn last advanced while the server's WAL was ahead of it (0 when caught up; the same on every instance)
//	confirmed_lsn_bytes                              the LSN confirmed to Postgres, as a byte position
//	received_lsn_bytes                               the newest WAL position received
//	events_published_total{topic}                    records acknowledged by the broker (dead letters included, on their topic)
//	rows_rejected_total{class,policy}                rows the router rejected, by error class and the policy applied
//	publish_errors_total{kind}                       records the producer gave up on (kind=produce) and rejected rows (kind=<class>)
//	in_flight_records, in_flight_bytes               produced, not yet acknowledged
//	oldest_unpublished_event_age_seconds             seconds since the commit of the oldest transaction with an event read and not acknowledged by Kafka (0 when none)
//	commit_read_latency_seconds                      histogram: transaction commit timestamp to walrelay reading its BEGIN from the slot
//	produce_ack_latency_seconds                      histogram: handing a record to the producer to the broker's ack
//	end_to_end_latency_seconds                       histogram: transaction commit timestamp to the broker's ack
//	transactions_total                               transactions read from the slot
//	delivery_mode{mode}                              1, for relay.delivery (at_least_once or exactly_once)
//	kafka_transactions_total{result}                 exactly_once: Kafka transactions committed, aborted, and of unknown outcome
//	checkpoint_lsn_bytes                             exactly_once: the position the last committed Kafka transaction checkpointed
//	reconnects_total                                 streaming sessions lost and re-established (a standby's attempts on a held slot do not count)
//	heartbeats_sent_total, heartbeats_received_total heartbeat messages emitted (relay.heartbeat_interval) and seen back in the stream
//	kafka_admin_retries_total                        transient failures while preparing a topic (metadata, creation, configs), retried
//	records_retried_alone_total                      records sent again one at a time after the broker refused their batch as a whole
//	kafka_topics_one_at_a_time                       topics produced one record at a time (their batches are refused; limit unknown)
//	order_at_risk_total                              records that reached the broker ahead of an earlier refused record of their partition
//	kafka_data_loss_total                            partitions that lost records the broker had acknowledged (franz-go's detection)
//	outbox_rows_pruned_total{table}                  outbox rows retention deleted (outbox.retention; only rows the slot confirmed)
//	outbox_partitions_dropped_total{table}           partitions of a partitioned outbox retention dropped
//	outbox_oldest_row_age_seconds{table}             now() minus the oldest outbox.time_column in the outbox, measured by each retention pass
//	outbox_table_size_bytes{table}                   pg_total_relation_size of the outbox and all its partitions, measured by each retention pass
//	retention_blocked{reason}                        1 for the reason retention's last pass refused to prune (no_record, slot_jumped, slot_missing, slot_lost), 0 for the others
//	slot_jumped{slot}                                1 while the slot was found replaced or moved past walrelay's record of it, until walrelay slot adopt
//
// Registered only when a converter uses a schema registry (SchemaRegistry):
//
//	schema_registry_requests_total{op,code}          requests to the registry by operation (register, lookup, latest, version, config, mode) and HTTP status (none: no answer)
//	schema_registry_request_duration_seconds{op}     histogram: each request's duration
//	schema_registry_errors_total{class}              failed requests: unavailable (waited out), auth (401/403, waited out), rejected (schema_rejected)
//	schema_registry_cache_hits_total                 schema ids and schemas answered from the cache
//	schema_registry_cache_misses_total               ... that needed the registry
//	schema_registry_waiting                          1 while the stream waits for the registry (unavailable or refusing the credentials)
//
// events_published_total has at most relay.max_topics + 1 series (the
// dead-letter topic). The four outbox_ metrics have one series per table
// of postgres.table (table="schema.name"), created at 0 by OutboxTables.
//
// It does not serve HTTP (internal/server) or poll Postgres (internal/slotmon does).
package metrics

import (
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Namespace prefixes every walrelay metric.
const Namespace = "walrelay"

// latencyBuckets cover 0.5ms to ~30s: single-digit milliseconds is the
// target, seconds mean trouble.
var latencyBuckets = prometheus.ExponentialBuckets(0.0005, 2, 17)

// LatencyBuckets returns the buckets of walrelay's latency histograms, for
// the Kafka client's request histogram to share.
func LatencyBuckets() []float64 { return slices.Clone(latencyBuckets) }

// Metrics holds the collectors updated by the relay.
type Metrics struct {
	reg prometheus.Registerer

	RowsRejected      *prometheus.CounterVec
	PublishErrors     *prometheus.CounterVec
	CommitReadLatency prometheus.Histogram
	ProduceAckLatency prometheus.Histogram
	EndToEndLatency   prometheus.Histogram
	Transactions      prometheus.Counter
	SlotPollErrors    prometheus.Counter
	// KafkaTransactions counts Kafka transactions by result (committed,
	// aborted): exactly-once delivery only.
	KafkaTransactions *prometheus.CounterVec
	// Outbox retention (internal/retention, outbox.retention), by table
	// (label table, "schema.name" of postgres.table): rows and partitions
	// removed, and the table's oldest row and size as the last pass
	// measured them (0 until the first pass, or with retention off).
	OutboxRowsPruned        *prometheus.CounterVec
	OutboxPartitionsDropped *prometheus.CounterVec
	OutboxOldestRowAge      *prometheus.GaugeVec
	OutboxTableSize         *prometheus.GaugeVec
	// SlotJumped is 1 while the slot is found replaced or moved past
	// walrelay's record of it (internal/slotrecord) and no operator adopted it;
	// RetentionBlocked is 1 for the reason retention's last pass refused
	// to prune (no_record, slot_jumped, slot_missing, slot_lost), 0 for
	// the others.
	SlotJumped       prometheus.Gauge
	RetentionBlocked *prometheus.GaugeVec

	eventsPublished *prometheus.CounterVec
	mu              sync.Mutex
	byTopic         map[string]prometheus.Counter

	registryOnce sync.Once
	registry     *SchemaRegistry
}

// New creates the metrics and registers them on reg.
func New(reg prometheus.Registerer, version, slot string) *Metrics {
	slotLabel := prometheus.Labels{"slot": slot}
	m := &Metrics{
		reg: reg,
		RowsRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "rows_rejected_total",
			Help: "Outbox rows the router rejected, by error class and the policy applied (dlq, stop, log).",
		}, []string{"class", "policy"}),
		PublishErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "publish_errors_total",
			Help: "Events that could not be published as routed: kind=produce for records the producer gave up on, or the router's error class.",
		}, []string{"kind"}),
		CommitReadLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "commit_read_latency_seconds",
			Help:    "Time from a transaction's commit timestamp to walrelay reading its BEGIN from the slot: Postgres decoding and sending it, and walrelay's wait to read.",
			Buckets: latencyBuckets,
		}),
		ProduceAckLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "produce_ack_latency_seconds",
			Help:    "Time from handing a record to the producer to the broker's acknowledgement.",
			Buckets: latencyBuckets,
		}),
		EndToEndLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "end_to_end_latency_seconds",
			Help:    "Time from the transaction's commit timestamp to the broker's acknowledgement of its record.",
			Buckets: latencyBuckets,
		}),
		Transactions: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "transactions_total",
			Help: "Transactions read from the replication slot.",
		}),
		SlotPollErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "slot_poll_errors_total",
			Help: "Failed polls of pg_replication_slots.", ConstLabels: slotLabel,
		}),
		KafkaTransactions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "kafka_transactions_total",
			Help: "Kafka transactions of exactly-once delivery, by result: committed, aborted (each aborted one's records are produced again in the next), or unknown (a commit answered with an error: the relay starts again and its checkpoint read resolves it).",
		}, []string{"result"}),
		OutboxRowsPruned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "outbox_rows_pruned_total",
			Help: "Outbox rows deleted by retention (outbox.retention), each of a transaction the slot had confirmed, by outbox table.",
		}, []string{"table"}),
		OutboxPartitionsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "outbox_partitions_dropped_total",
			Help: "Partitions of a partitioned outbox dropped by retention, each once the slot had confirmed a fence taken after its detach, by outbox table.",
		}, []string{"table"}),
		OutboxOldestRowAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "outbox_oldest_row_age_seconds",
			Help: "Age of the oldest row of the outbox table by outbox.time_column, as the last retention pass measured it (0 when empty or retention is off).",
		}, []string{"table"}),
		OutboxTableSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "outbox_table_size_bytes",
			Help: "pg_total_relation_size of the outbox table and all its partitions, as the last retention pass measured it (0 with retention off).",
		}, []string{"table"}),
		eventsPublished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "events_published_total",
			Help: "Records acknowledged by the broker, by topic.",
		}, []string{"topic"}),
		byTopic: make(map[string]prometheus.Counter),
	}
	m.SlotJumped = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "slot_jumped",
		Help: "1 while the slot was found replaced (recreated, failed over) or moved past the position walrelay recorded before confirming, and no operator ran walrelay verify and walrelay slot adopt since: rows after the record may be unpublished, and retention is stopped.", ConstLabels: slotLabel,
	})
	m.RetentionBlocked = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "retention_blocked",
		Help: "1 for the reason retention's last pass refused to prune (no_record, slot_jumped, slot_missing, slot_lost), 0 for the others: nothing proves the slot's position is one walrelay confirmed.",
	}, []string{"reason"})
	for _, reason := range []string{"no_record", "slot_jumped", "slot_missing", "slot_lost"} {
		m.RetentionBlocked.WithLabelValues(reason) // every series exists from startup, at 0
	}
	reg.MustRegister(m.SlotJumped, m.RetentionBlocked)
	reg.MustRegister(m.RowsRejected, m.PublishErrors, m.CommitReadLatency, m.ProduceAckLatency, m.EndToEndLatency,
		m.Transactions, m.SlotPollErrors, m.KafkaTransactions, m.eventsPublished,
		m.OutboxRowsPruned, m.OutboxPartitionsDropped, m.OutboxOldestRowAge, m.OutboxTableSize)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "build_info", Help: "walrelay's version.",
		ConstLabels: prometheus.Labels{"version": version},
	}, func() float64 { return 1 }))
	return m
}

// Published counts one acknowledged record on topic. Safe for concurrent
// use; the counter for a topic is looked up once.
func (m *Metrics) Published(topic string) prometheus.Counter {
	m.mu.Lock()
	c, ok := m.byTopic[topic]
	if !ok {
		c = m.eventsPublished.WithLabelValues(topic)
		m.byTopic[topic] = c
	}
	m.mu.Unlock()
	return c
}

// OutboxTables creates the four outbox_ series of each table
// ("schema.name", as postgres.table lists it) at 0: they exist from
// startup, with retention off too, and increase() sees a table's first
// prune.
func (m *Metrics) OutboxTables(tables ...string) {
	for _, t := range tables {
		m.OutboxRowsPruned.WithLabelValues(t)
		m.OutboxPartitionsDropped.WithLabelValues(t)
		m.OutboxOldestRowAge.WithLabelValues(t)
		m.OutboxTableSize.WithLabelValues(t)
	}
}

// GaugeFunc registers a gauge computed at scrape time, in place of one
// registered before with the same name and labels (replace).
func (m *Metrics) GaugeFunc(name, help string, labels prometheus.Labels, fn func() float64) {
	m.replace(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Name: name, Help: help, ConstLabels: labels,
	}, fn))
}

// CounterFunc registers a counter read at scrape time, in place of one
// registered before with the same name and labels (replace).
func (m *Metrics) CounterFunc(name, help string, labels prometheus.Labels, fn func() float64) {
	m.replace(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: Namespace, Name: name, Help: help, ConstLabels: labels,
	}, fn))
}

// replace registers c, unregistering first a collector registered with
// the same descriptor: a relay started again in-process (relay.Run, with
// exactly-once delivery, after a commit of unknown outcome or a fence)
// registers its scrape-time metrics anew, read from its own state, on the
// registry the process serves. Any other registration error panics, as
// MustRegister does.
func (m *Metrics) replace(c prometheus.Collector) {
	err := m.reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		m.reg.Unregister(are.ExistingCollector)
		err = m.reg.Register(c)
	}
	if err != nil {
		panic(err)
	}
}

// Registerer is the registry the metrics live on (for kprom).
func (m *Metrics) Registerer() prometheus.Registerer { return m.reg }

// SchemaRegistry is the schema registry client's metrics; it implements
// internal/schemareg's Hooks.
type SchemaRegistry struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	errors   *prometheus.CounterVec
	hits     prometheus.Counter
	misses   prometheus.Counter
	waiting  prometheus.Gauge
}

// SchemaRegistry returns the schema registry client's metrics, registering
// them on the first call: a relay whose converters use no registry has none
// of these series.
func (m *Metrics) SchemaRegistry() *SchemaRegistry {
	m.registryOnce.Do(func() {
		r := &SchemaRegistry{
			requests: prometheus.NewCounterVec(prometheus.CounterOpts{
				Namespace: Namespace, Name: "schema_registry_requests_total",
				Help: "Requests to the schema registry, by operation (register, lookup, latest, version, config, mode) and HTTP status (none: no answer).",
			}, []string{"op", "code"}),
			duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
				Namespace: Namespace, Name: "schema_registry_request_duration_seconds",
				Help:    "Duration of each request to the schema registry, by operation.",
				Buckets: latencyBuckets,
			}, []string{"op"}),
			errors: prometheus.NewCounterVec(prometheus.CounterOpts{
				Namespace: Namespace, Name: "schema_registry_errors_total",
				Help: "Failed schema registry requests by class: unavailable and auth are waited out (the stream waits), rejected goes by relay.on_error.schema_rejected.",
			}, []string{"class"}),
			hits: prometheus.NewCounter(prometheus.CounterOpts{
				Namespace: Namespace, Name: "schema_registry_cache_hits_total",
				Help: "Schema ids and registered schemas answered from walrelay's cache.",
			}),
			misses: prometheus.NewCounter(prometheus.CounterOpts{
				Namespace: Namespace, Name: "schema_registry_cache_misses_total",
				Help: "Schema ids and registered schemas that needed the schema registry.",
			}),
			waiting: prometheus.NewGauge(prometheus.GaugeOpts{
				Namespace: Namespace, Name: "schema_registry_waiting",
				Help: "1 while the stream waits for the schema registry (unavailable, or refusing the credentials); Postgres keeps the WAL meanwhile.",
			}),
		}
		for _, class := range []string{"unavailable", "auth", "rejected"} {
			r.errors.WithLabelValues(class) // every class exists from the first use, at 0
		}
		m.reg.MustRegister(r.requests, r.duration, r.errors, r.hits, r.misses, r.waiting)
		m.registry = r
	})
	return m.registry
}

// Request counts one request and observes its duration.
func (r *SchemaRegistry) Request(op string, status int, d time.Duration) {
	code := "none"
	if status != 0 {
		code = strconv.Itoa(status)
	}
	r.requests.WithLabelValues(op, code).Inc()
	r.duration.WithLabelValues(op).Observe(d.Seconds())
}

// CacheHit counts a cached answer.
func (r *SchemaRegistry) CacheHit() { r.hits.Inc() }

// CacheMiss counts an answer that needed the registry.
func (r *SchemaRegistry) CacheMiss() { r.misses.Inc() }

// Waiting sets the waiting gauge.
func (r *SchemaRegistry) Waiting(w bool) {
	if w {
		r.waiting.Set(1)
	} else {
		r.waiting.Set(0)
	}
}

// Error counts a failed request by class.
func (r *SchemaRegistry) Error(class string) { r.errors.WithLabelValues(class).Inc() }
