package dbzimport

import (
	"slices"
	"strings"
)

// ignoredAlways are options that change nothing walrelay does or sends,
// whatever their value, with the reason.
var ignoredAlways = map[string]string{
	"tasks.max":                           "the Postgres connector runs one task whatever this says; walrelay is one process per slot",
	"config.action.reload":                "a Kafka Connect setting for restarting the connector; walrelay reads its configuration at start",
	"tombstones.on.delete":                "the EventRouter drops delete events and tombstones (EventRouterDelegate), and walrelay ignores DELETEs of the outbox",
	"message.key.columns":                 "the EventRouter replaces the record key with table.field.event.key",
	"slot.max.retries":                    "walrelay retries a busy or lost slot without a limit, waiting postgres.min_backoff to postgres.max_backoff",
	"slot.retry.delay.ms":                 "walrelay retries a busy or lost slot waiting postgres.min_backoff to postgres.max_backoff",
	"retriable.restart.connector.wait.ms": "walrelay reconnects waiting postgres.min_backoff to postgres.max_backoff",
	"max.batch.size":                      "the size of Debezium's internal batches; walrelay bounds what is in flight with relay.max_in_flight_records and relay.max_in_flight_bytes",
	"max.queue.size":                      "the size of Debezium's internal queue; walrelay bounds what is in flight with relay.max_in_flight_records and relay.max_in_flight_bytes",
	"max.queue.size.in.bytes":             "the size of Debezium's internal queue; walrelay bounds what is in flight with relay.max_in_flight_records and relay.max_in_flight_bytes",
	"poll.interval.ms":                    "how long Debezium's task waits for its queue; walrelay produces each row as it is decoded (kafka.linger batches them)",
	"include.schema.changes":              "the Postgres connector emits no schema change events",
	"schema.refresh.mode":                 "walrelay reads each relation's columns from pgoutput's Relation messages",
	"snapshot.delay.ms":                   "walrelay takes no snapshot",
	"offset.mismatch.strategy":            "walrelay starts from its slot's confirmed position (see `walrelay debezium takeover` for the connector's offsets)",
}

// defaultOnly are options that change what Debezium sends unless they have
// their default value, which is what walrelay's router follows.
var defaultOnly = map[string]string{
	"decimal.handling.mode":                  "precise",
	"time.precision.mode":                    "adaptive",
	"binary.handling.mode":                   "bytes",
	"hstore.handling.mode":                   "json",
	"interval.handling.mode":                 "numeric",
	"money.fraction.digits":                  "2",
	"include.unknown.datatypes":              "false",
	"provide.transaction.metadata":           "false",
	"slot.drop.on.stop":                      "false",
	"flush.lsn.source":                       "true",
	"publish.via.partition.root":             "false",
	"schema.name.adjustment.mode":            "none",
	"field.name.adjustment.mode":             "none",
	"event.processing.failure.handling.mode": "fail",
}

// droppedReasons gives the reason for options walrelay has no equivalent
// of, when there is more to say than that.
var droppedReasons = map[string]string{
	"slot.drop.on.stop":                      "walrelay never drops its slot when it stops (`walrelay slot drop` does, on request)",
	"flush.lsn.source":                       "walrelay always confirms to its slot what Kafka acknowledged",
	"provide.transaction.metadata":           "walrelay sends no transaction metadata records",
	"publish.via.partition.root":             "walrelay reads the publication as it is; set publish_via_partition_root on it yourself",
	"event.processing.failure.handling.mode": "walrelay decides per class of row it cannot publish with relay.on_error.* (dead-letter topic, stop or log)",
	"skipped.operations":                     "walrelay relays INSERTs of the outbox and ignores the other operations, as the EventRouter does",
	"exactly.once.support":                   "walrelay's producer is idempotent but not transactional: delivery is at-least-once, and consumers dedupe on the id header",
	"transaction.boundary":                   "walrelay's producer is idempotent but not transactional: delivery is at-least-once, and consumers dedupe on the id header",
	"replica.identity.autoset.values":        "walrelay changes no table's replica identity (an insert-only outbox needs none)",
	"slot.stream.params":                     "walrelay starts pgoutput with its own parameters",
	"lsn.flush.timeout.ms":                   "walrelay confirms what Kafka acknowledged without a timeout",
	"lsn.flush.timeout.action":               "walrelay confirms what Kafka acknowledged without a timeout",
	"lsn.flush.mode":                         "walrelay always confirms to its slot what Kafka acknowledged",
	"xmin.fetch.interval.ms":                 "walrelay does not read the slot's xmin",
	"read.only":                              "walrelay's heartbeat (relay.heartbeat_interval) writes to the database; leave it at 0 on a read-only connection",
}

// rest handles every option not handled yet.
func (im *importer) rest() {
	keys := make([]string, 0, len(im.conf))
	for k := range im.conf {
		if !im.used[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := strings.ToLower(strings.TrimSpace(im.conf[k]))
		switch {
		case ignoredAlways[k] != "":
			im.ignore(k, ignoredAlways[k])
		case defaultOnly[k] != "" && v == defaultOnly[k]:
			im.ignore(k, "Debezium's default")
		case k == "skipped.operations" && !strings.Contains(v, "c"):
			im.ignore(k, droppedReasons[k])
		case droppedReasons[k] != "":
			im.drop(k, droppedReasons[k])
		case defaultOnly[k] != "":
			im.drop(k, "it changes how Debezium represents values in the events; walrelay's router follows Debezium's default ("+defaultOnly[k]+")")
		case strings.HasPrefix(k, "snapshot.") || strings.HasPrefix(k, "incremental.snapshot."):
			im.ignore(k, "walrelay takes no snapshot")
		case strings.HasPrefix(k, "errors."):
			im.drop(k, "Kafka Connect's (or Debezium's) error handling; walrelay decides per class of row it cannot publish with relay.on_error.* (dead-letter topic relay.dead_letter_topic, stop or log) and retries Postgres and Kafka without a limit")
		case strings.HasPrefix(k, "consumer.override.") || strings.HasPrefix(k, "admin.override."):
			im.drop(k, "a Kafka client setting walrelay does not take (its Kafka client is configured with kafka.*)")
		case strings.HasPrefix(k, "transaction.boundary"):
			im.drop(k, droppedReasons["transaction.boundary"])
		case strings.HasPrefix(k, "column.") || strings.HasPrefix(k, "datatype."):
			im.drop(k, "it changes the columns Debezium's events carry; walrelay's router reads the columns its options name, as they are")
		default:
			im.drop(k, "walrelay has no equivalent of this option")
		}
	}
}
