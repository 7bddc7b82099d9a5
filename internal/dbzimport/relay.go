package dbzimport

import (
	"strconv"
	"strings"
	"time"
)

// relay maps the options with a relay.* or postgres.* equivalent besides
// the connection.
func (im *importer) relay() {
	if v, ok := im.get("heartbeat.interval.ms"); ok {
		ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch {
		case err != nil || ms < 0:
			im.drop("heartbeat.interval.ms", "not a number of milliseconds")
		case ms == 0:
			im.ignore("heartbeat.interval.ms", "0 turns heartbeats off, as walrelay's default relay.heartbeat_interval does")
		case ms < 100:
			im.drop("heartbeat.interval.ms", "walrelay's relay.heartbeat_interval is 0 (off) or at least 100ms")
		default:
			im.set("relay.heartbeat_interval", (time.Duration(ms) * time.Millisecond).String(),
				"heartbeat.interval.ms. walrelay's heartbeat is a pg_logical_emit_message in the slot's database, so the slot moves while the outbox is idle; it sends no heartbeat records to Kafka (Debezium sends them to __debezium-heartbeat.<topic.prefix>).")
		}
	}
	for _, opt := range []string{"heartbeat.action.query"} {
		if _, ok := im.conf[opt]; ok {
			im.drop(opt, "walrelay's heartbeat is its own pg_logical_emit_message (relay.heartbeat_interval); it runs no query of yours")
		}
	}
	for _, opt := range []string{"topic.heartbeat.prefix", "heartbeat.topics.prefix"} {
		if _, ok := im.conf[opt]; ok {
			im.drop(opt, "walrelay sends no heartbeat records to Kafka")
		}
	}
	if v, ok := im.get("status.update.interval.ms"); ok {
		ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if d := time.Duration(ms) * time.Millisecond; err == nil && d >= 10*time.Millisecond && d <= time.Minute {
			im.set("postgres.status_interval", d.String(), "status.update.interval.ms.")
		} else {
			im.drop("status.update.interval.ms", "walrelay's postgres.status_interval is between 10ms and 1m")
		}
	}
	if v, ok := im.conf["snapshot.mode"]; ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "no_data", "never", "schema_only":
			im.ignore("snapshot.mode", "walrelay takes no snapshot either: it relays what is inserted after its slot's position")
		default:
			im.drop("snapshot.mode", "walrelay takes no snapshot: it relays the rows inserted after its slot's position, never the rows already in the outbox (Debezium snapshots only when it has no offset, so a takeover of its slot is not affected)")
		}
	}
}
