package dbzimport

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// kafka maps topic.creation.* and the producer overrides walrelay has
// settings for. The brokers are the worker's (bootstrap.servers), not in
// the connector config.
func (im *importer) kafka() {
	if v, ok := im.get("producer.override.bootstrap.servers"); ok && !providerRef.MatchString(v) && len(splitList(v)) > 0 {
		im.set("kafka.brokers", strings.Join(splitList(v), ","), "The connector's producer.override.bootstrap.servers.")
	} else {
		if ok {
			im.drop("producer.override.bootstrap.servers", providerReason)
		}
		im.set("kafka.brokers", "localhost:9092", "SET THIS: the brokers are the Kafka Connect worker's bootstrap.servers, which the connector config does not hold (walrelay's default shown).")
	}
	if v, ok := im.get("producer.override.client.id"); ok {
		im.set("kafka.client_id", v, "The connector's producer.override.client.id.")
	}
	if v, ok := im.get("producer.override.linger.ms"); ok {
		if ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32); err == nil && ms >= 0 {
			im.set("kafka.linger", (time.Duration(ms) * time.Millisecond).String(), "The connector's producer.override.linger.ms.")
		} else {
			im.drop("producer.override.linger.ms", "not a number of milliseconds")
		}
	}
	for _, opt := range im.keys("producer.override.") {
		if im.used[opt] {
			continue
		}
		v := strings.ToLower(strings.TrimSpace(im.conf[opt]))
		switch {
		case opt == "producer.override.acks" && (v == "all" || v == "-1"):
			im.ignore(opt, "walrelay always produces with acks=all")
		case opt == "producer.override.enable.idempotence" && v == "true":
			im.ignore(opt, "walrelay's producer is always idempotent")
		default:
			im.drop(opt, "a producer setting walrelay does not take (its Kafka client is configured with kafka.*)")
		}
	}

	topicConfigs := map[string]string{}
	for _, opt := range im.keys("topic.creation.") {
		v := strings.TrimSpace(im.conf[opt])
		rest := strings.TrimPrefix(opt, "topic.creation.")
		switch {
		case opt == "topic.creation.enable":
			im.drop(opt, "a Kafka Connect worker setting; walrelay creates a routed topic the first time it is used when kafka.create_topics is true (its default)")
		case opt == "topic.creation.groups":
			im.drop(opt, "walrelay creates every topic with the same settings: the default group's (topic.creation.default.*)")
		case rest == "default.partitions":
			if n, err := strconv.ParseInt(v, 10, 32); err == nil && (n > 0 || n == -1) {
				im.set("kafka.topic_partitions", n, "topic.creation.default.partitions.")
				im.used[opt] = true
			} else {
				im.drop(opt, "not a partition count (a positive number, or -1 for the broker's default)")
			}
		case rest == "default.replication.factor":
			if n, err := strconv.ParseInt(v, 10, 16); err == nil && (n > 0 || n == -1) {
				im.set("kafka.topic_replication_factor", n, "topic.creation.default.replication.factor.")
				im.used[opt] = true
			} else {
				im.drop(opt, "not a replication factor (a positive number, or -1 for the broker's default)")
			}
		case rest == "default.include" || rest == "default.exclude":
			im.drop(opt, "walrelay creates every routed topic with the default group's settings; it does not filter topics")
		case strings.HasPrefix(rest, "default."):
			topicConfigs[strings.TrimPrefix(rest, "default.")] = v
			im.used[opt] = true
		default:
			group, _, _ := strings.Cut(rest, ".")
			im.drop(opt, fmt.Sprintf("walrelay creates every topic with the default group's settings; group %q's do not apply", group))
		}
	}
	if len(topicConfigs) > 0 {
		keys := make([]string, 0, len(topicConfigs))
		for k := range topicConfigs {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		entries := make([]string, len(keys))
		for i, k := range keys {
			entries[i] = k + "=" + topicConfigs[k]
		}
		im.set("kafka.topic_configs", topicConfigs, "topic.creation.default.* ("+strings.Join(entries, ", ")+").")
	}
}
