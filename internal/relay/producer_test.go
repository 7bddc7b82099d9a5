package relay_test

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/deadletter"
	"github.com/walrelay/walrelay/internal/testenv"
)

// A partition placement the topic lacks (the partition column says 7 of a
// 4-partition topic) is a payload_invalid row, handled by policy; one in
// range goes to its partition.
func TestRelayPartitionOutOfRange(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Router.AdditionalPlacement = "part:partition" })
	testenv.Exec(t, f.dsn, `ALTER TABLE outbox ADD COLUMN part int`)
	run := f.start(t)
	execTx(t, f.dsn,
		`INSERT INTO outbox (aggregatetype, aggregateid, type, payload, part) VALUES ('placed', 'a', 'T', '{"n": 1}', 7)`,
		`INSERT INTO outbox (aggregatetype, aggregateid, type, payload, part) VALUES ('placed', 'b', 'T', '{"n": 2}', 2)`)
	got := f.broker.ReadAll(t, []string{"outbox.event.placed"}, 1, 30*time.Second)
	if string(got[0].Key) != "b" || got[0].Partition != 2 {
		t.Errorf("record %s on partition %d, want b on 2", got[0].Key, got[0].Partition)
	}
	dl := f.broker.ReadAll(t, []string{f.cfg.Relay.DeadLetterTopic}, 1, 30*time.Second)
	if class, _ := header(dl[0], deadletter.HeaderErrorClass); class != "payload_invalid" {
		t.Errorf("dead letter class %q, want payload_invalid", class)
	}
	f.waitCaughtUp(t, 15*time.Second)
	if run.exited() {
		t.Fatalf("relay stopped: %v", run.err)
	}
	if err := run.stop(); err != nil {
		t.Fatalf("relay stopped with error: %v", err)
	}
}

// franz-go is not silent: its warnings reach walrelay's log (here, no
// broker listening), marked as the Kafka client's.
func TestRelayLogsKafkaClientWarnings(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	f := newFixture(t, func(c *config.Config) { c.Kafka.Brokers = config.StringList{addr} })
	run := f.start(t)
	f.logs.waitLog(t, "unable to open connection to broker", map[string]string{"component": "kafka-client", "level": "WARN"}, 30*time.Second)
	if err := run.stop(); err != nil {
		t.Fatalf("relay stopped with error: %v", err)
	}
}

// Data loss franz-go detects (the broker answers OUT_OF_ORDER_SEQUENCE_NUMBER:
// records it had acknowledged are gone) is logged and counted in
// walrelay_kafka_data_loss_total; the record itself is produced again.
func TestRelayCountsKafkaDataLoss(t *testing.T) {
	f := newFixture(t, nil)
	if f.broker.Cluster == nil {
		t.Skip("needs kfake for its faults")
	}
	f.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "outbox.event.lossy", Err: kerr.OutOfOrderSequenceNumber})
	run := f.start(t)
	execTx(t, f.dsn, insertEvent("lossy", "a"))
	f.broker.ReadAll(t, []string{"outbox.event.lossy"}, 1, 30*time.Second)
	f.logs.waitLog(t, "kafka lost records it had acknowledged", map[string]string{"topic": "outbox.event.lossy", "level": "ERROR"}, 30*time.Second)
	waitMetric(t, f.reg, "walrelay_kafka_data_loss_total", nil, "1", func(v float64) bool { return v == 1 })
	if err := run.stop(); err != nil {
		t.Fatalf("relay stopped with error: %v", err)
	}
}

// A shutdown whose relay.shutdown_timeout expires with records in flight
// (the broker keeps answering NOT_ENOUGH_REPLICAS, retried without end) is
// not an incident: one WARN with the count and the LSNs that Postgres
// sends again, no error per record, a clean exit, nothing confirmed past
// them.
func TestRelayShutdownTimeoutIsOneWarning(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Relay.ShutdownTimeout = time.Second })
	if f.broker.Cluster == nil {
		t.Skip("needs kfake for its faults")
	}
	f.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "outbox.event.stuck", Err: kerr.NotEnoughReplicas, Count: -1})
	f.createProbe(t)
	run := f.start(t)
	var stmts []string
	for i := range 50 {
		stmts = append(stmts, insertEvent("stuck", fmt.Sprint("s-", i)))
	}
	xid := execTx(t, f.dsn, stmts...)
	end := f.txEnd(t, xid)
	waitMetric(t, f.reg, "walrelay_in_flight_records", nil, "50", func(v float64) bool { return v == 50 })
	if err := run.stop(); err != nil {
		t.Fatalf("Run = %v, want a clean stop", err)
	}
	lines := f.logs.lines("closed the kafka client with records not yet acknowledged")
	if len(lines) != 1 || lines[0]["level"] != "WARN" || lines[0]["records"] != float64(50) {
		t.Fatalf("log lines about the abandoned records: %v, want one WARN with records=50", lines)
	}
	for _, k := range []string{"first_lsn", "last_lsn", "confirmed_lsn"} {
		if lines[0][k] == nil {
			t.Errorf("the warning has no %s: %v", k, lines[0])
		}
	}
	for _, msg := range []string{"kafka gave up on a record", "kafka refused"} {
		if n := len(f.logs.lines(msg)); n != 0 {
			t.Errorf("%d lines %q after a timed-out shutdown", n, msg)
		}
	}
	if confirmed, _ := f.slot(t); confirmed >= end {
		t.Errorf("confirmed_flush_lsn %s passed the abandoned transaction's end %s", confirmed, end)
	}
}
