package relay_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/deadletter"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/testenv"
)

// insertPadded returns an INSERT of an outbox row whose payload is about
// size bytes: {"n": seq, "pad": "xxx..."} (jsonb keeps the shorter key
// first).
func insertPadded(typ, aggregate string, seq, size int) string {
	pad := max(size-len(fmt.Sprintf(`{"n": %d, "pad": ""}`, seq)), 0)
	return fmt.Sprintf(`INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('%s', '%s', 'Happened', '{"n": %d, "pad": "%s"}')`,
		typ, aggregate, seq, strings.Repeat("x", pad))
}

// A topic whose max.message.bytes (4000) is below kafka.batch_max_bytes
// (1 MiB): rows of ~450 bytes, 20 per key, in one transaction reach their
// topic,
// under every relay.on_error policy, whether walrelay learns the topic's
// limit (it created the topic with kafka.topic_configs) or not (an
// existing topic, DescribeConfigs refused: the broker's refusals of whole
// batches are retried record by record). Only a row too large on its own
// gets the policy.
func TestRelayBatchRefusalDeliversRecordsThatFit(t *testing.T) {
	const topic = "outbox.event.limited"
	for _, tc := range []struct {
		name            string
		existingRefused bool // the topic exists with the limit; DescribeConfigs is refused
	}{
		{"limit set by kafka.topic_configs", false},
		{"existing topic, DescribeConfigs refused", true},
	} {
		for _, policy := range []string{config.PolicyDLQ, config.PolicyLog, config.PolicyStop} {
			t.Run(tc.name+"/"+policy, func(t *testing.T) {
				f := newFixture(t, func(c *config.Config) {
					c.Relay.OnError.SetAll(policy)
					c.Kafka.BatchMaxBytes = 1 << 20
					c.Kafka.Linger = 50 * time.Millisecond // every row of the transaction in one batch
					if !tc.existingRefused {
						c.Kafka.TopicConfigs = map[string]string{"max.message.bytes": "4000"}
					}
				})
				if f.broker.Cluster == nil {
					t.Skip("needs kfake for the topic's limit and faults")
				}
				if tc.existingRefused {
					limit := "4000"
					resp, err := kadm.NewClient(f.broker.Client(t)).CreateTopics(t.Context(), 4, 1, map[string]*string{"max.message.bytes": &limit}, topic)
					if err == nil {
						err = resp.Error()
					}
					if err != nil {
						t.Fatalf("creating %s: %v", topic, err)
					}
					f.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.DescribeConfigs}, Resource: topic, Err: kerr.TopicAuthorizationFailed, Count: -1})
				}
				f.createProbe(t)
				run := f.start(t)

				// 20 rows per key, so each key's partition gets batches
				// of ~10 KB.
				var stmts []string
				for i := range 40 {
					stmts = append(stmts, insertPadded("limited", fmt.Sprintf("k-%d", i%2), i, 450))
				}
				execTx(t, f.dsn, stmts...)
				got := f.broker.ReadAll(t, []string{topic}, 40, 30*time.Second)
				last := map[string]int{}
				for _, r := range got {
					var seq int
					if _, err := fmt.Sscanf(string(r.Value), `{"n": %d`, &seq); err != nil {
						t.Fatalf("value %.40s: %v", r.Value, err)
					}
					if prev, ok := last[string(r.Key)]; ok && seq <= prev {
						t.Errorf("key %s: seq %d after %d", r.Key, seq, prev)
					}
					last[string(r.Key)] = seq
				}
				f.waitCaughtUp(t, 15*time.Second)
				// Which mechanism delivered them: batches sized to the
				// learned limit (nothing refused), or the records of the
				// refused batches sent again one at a time.
				retried := testenv.MetricValue(t, f.reg, "walrelay_records_retried_alone_total", nil)
				if tc.existingRefused != (retried > 0) {
					t.Errorf("%v records retried alone; the topic's limit was learned: %t", retried, !tc.existingRefused)
				}
				if lines := f.logs.lines("kafka refused a record"); len(lines) != 0 {
					t.Fatalf("rows that fit the topic were refused: %v", lines[0])
				}
				if policy == config.PolicyDLQ {
					if dl := f.broker.ReadAll(t, []string{f.cfg.Relay.DeadLetterTopic}, 0, time.Second); len(dl) != 0 {
						t.Fatalf("%d dead letters for rows that fit the topic", len(dl))
					}
				}

				// One row too large on its own, and one that fits after it.
				bigXID := execTx(t, f.dsn, insertPadded("limited", "k-big", 100, 5000))
				execTx(t, f.dsn, insertPadded("limited", "k-0", 101, 450))
				bigEnd := f.txEnd(t, bigXID)
				f.logs.waitLog(t, "kafka refused a record", map[string]string{"class": "record_too_large", "policy": policy}, 30*time.Second)
				if policy == config.PolicyStop {
					if err := run.wait(30 * time.Second); !errors.Is(err, relay.ErrStopped) {
						t.Fatalf("Run = %v, want ErrStopped", err)
					}
					if confirmed, _ := f.slot(t); confirmed >= bigEnd {
						t.Errorf("confirmed_flush_lsn %s passed the refused row's transaction end %s", confirmed, bigEnd)
					}
					return
				}
				f.broker.ReadAll(t, []string{topic}, 41, 30*time.Second)
				if policy == config.PolicyDLQ {
					dl := f.broker.ReadAll(t, []string{f.cfg.Relay.DeadLetterTopic}, 1, 30*time.Second)
					if got, _ := header(dl[0], deadletter.HeaderErrorClass); got != "record_too_large" {
						t.Errorf("dead letter class %q, want record_too_large", got)
					}
				}
				f.waitCaughtUp(t, 15*time.Second)
				if err := run.stop(); err != nil {
					t.Fatalf("relay stopped with error: %v", err)
				}
			})
		}
	}
}

// A broker that refuses a record's timestamp (Kafka 4's
// log.message.timestamp.after.max.ms answers INVALID_TIMESTAMP for the
// batch holding it) refuses that record alone: payload_invalid, handled by
// policy; the others of its batch are delivered.
func TestRelayBrokerRefusesTimestamp(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Kafka.Linger = 50 * time.Millisecond })
	if f.broker.Cluster == nil {
		t.Skip("needs kfake for its faults")
	}
	const topic = "outbox.event.stamped"
	marker := []byte(`"future"`)
	f.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.InvalidTimestamp, Count: -1,
		When: func(req kmsg.Request) bool { return producesBytes(req, marker) }})
	run := f.start(t)
	execTx(t, f.dsn,
		insertEvent("stamped", "a"),
		`INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('stamped', 'a', 'T', '{"at": "future"}')`,
		insertEvent("stamped", "a"))
	got := f.broker.ReadAll(t, []string{topic}, 2, 30*time.Second)
	for _, r := range got {
		if bytes.Contains(r.Value, marker) {
			t.Fatalf("the refused record reached its topic: %s", r.Value)
		}
	}
	dl := f.broker.ReadAll(t, []string{f.cfg.Relay.DeadLetterTopic}, 1, 30*time.Second)
	if got, _ := header(dl[0], deadletter.HeaderErrorClass); got != "payload_invalid" {
		t.Errorf("dead letter class %q, want payload_invalid", got)
	}
	if !bytes.Contains(dl[0].Value, marker) {
		t.Errorf("dead letter value %s is not the refused record's", dl[0].Value)
	}
	f.waitCaughtUp(t, 15*time.Second)
	if err := run.stop(); err != nil {
		t.Fatalf("relay stopped with error: %v", err)
	}
}

// A timestamp column after 2262-04-11 cannot be a franz-go record
// timestamp (it computes milliseconds through UnixNano, which wraps): the
// row is payload_invalid, never published with a wrong timestamp. One
// within range is published with its exact millisecond.
func TestRelayTimestampOutOfRange(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Router.FieldEventTimestamp = "created_at" })
	run := f.start(t)
	execTx(t, f.dsn,
		`INSERT INTO outbox (aggregatetype, aggregateid, type, payload, created_at) VALUES ('when', 'far', 'T', '{}', '2420-09-07 13:03:45.338+00')`,
		`INSERT INTO outbox (aggregatetype, aggregateid, type, payload, created_at) VALUES ('when', 'near', 'T', '{}', '2262-04-11 23:47:16.854+00')`)
	got := f.broker.ReadAll(t, []string{"outbox.event.when"}, 1, 30*time.Second)
	if string(got[0].Key) != "near" || got[0].Timestamp.UnixMilli() != 9223372036854 {
		t.Errorf("record %s at %d ms, want near at 9223372036854", got[0].Key, got[0].Timestamp.UnixMilli())
	}
	dl := f.broker.ReadAll(t, []string{f.cfg.Relay.DeadLetterTopic}, 1, 30*time.Second)
	if got, _ := header(dl[0], deadletter.HeaderErrorClass); got != "payload_invalid" {
		t.Errorf("dead letter class %q, want payload_invalid", got)
	}
	if more := f.broker.ReadAll(t, []string{"outbox.event.when"}, 0, time.Second); len(more) != 1 {
		t.Errorf("%d records on the topic, want only the one in range", len(more))
	}
	f.waitCaughtUp(t, 15*time.Second)
	if err := run.stop(); err != nil {
		t.Fatalf("relay stopped with error: %v", err)
	}
}

// producesBytes reports whether a produce request carries b in a batch
// other than a dead letter's. (Produce v13 names topics by id, so a batch's
// topic is told by its contents.)
func producesBytes(req kmsg.Request, b []byte) bool {
	for _, rt := range req.(*kmsg.ProduceRequest).Topics {
		for _, rp := range rt.Partitions {
			if bytes.Contains(rp.Records, b) && !bytes.Contains(rp.Records, []byte(deadletter.HeaderErrorClass)) {
				return true
			}
		}
	}
	return false
}
