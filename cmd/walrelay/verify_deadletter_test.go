package main

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/walrelay/walrelay/internal/deadletter"
	"github.com/walrelay/walrelay/internal/testenv"
)

// TestVerifyDeadLettered: a row too large for the broker
// (message.max.bytes 20000) is dead-lettered by the relay
// (record_too_large, policy dlq, the default); verify then reports it as
// dead-lettered with its class, not missing, and exits 0; --republish
// sends nothing.
func TestVerifyDeadLettered(t *testing.T) {
	e := &e2e{
		dsn:    testenv.Postgres(t).NewDatabase(t),
		broker: testenv.Kafka(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": "20000"})),
		prefix: testenv.UniqueName(t, "dlv"),
	}
	e.env = childEnv(
		"WALRELAY_POSTGRES_DSN="+e.dsn,
		"WALRELAY_KAFKA_BROKERS="+strings.Join(e.broker.Addrs(), ","),
		"WALRELAY_KAFKA_TOPIC_PARTITIONS=4",
		"WALRELAY_POSTGRES_STATUS_INTERVAL=100ms",
		"WALRELAY_RELAY_SHUTDOWN_TIMEOUT=10s",
		"WALRELAY_LOG_FORMAT=json",
		"WALRELAY_ROUTER_ROUTE_TOPIC_REPLACEMENT="+e.prefix+".${routedByValue}",
	)
	e.setup(t, "created")
	ids := insertEvents(t, e.dsn, "order", "customer")
	big := testenv.QueryValue[string](t, e.dsn, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
		VALUES ('order', 'agg-big', 'Happened', jsonb_build_object('pad', repeat('x', 50000))) RETURNING id::text`)
	startChild(t, e.env, "run")
	e.broker.ReadAll(t, e.topics(), len(ids), 60*time.Second)
	dl := e.broker.ReadAll(t, []string{"walrelay.deadletter"}, 1, 60*time.Second)
	if got := testenv.Header(dl[0], deadletter.HeaderOutboxID); got != big {
		t.Fatalf("dead letter of %q, want the big row %s", got, big)
	}
	testenv.WaitCaughtUp(t, e.dsn, "walrelay", 30*time.Second)

	out := wantOK(t, e.env, "verify", "--until", "0s")
	for _, want := range []string{"missing: 0\n", "dead-lettered: 1 ", "  " + big + " record_too_large\n", "ok: nothing missing\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("verify output lacks %q:\n%s", want, out)
		}
	}
	got := decodeJSON[struct {
		Missing      []string `json:"missing"`
		DeadLettered []struct {
			ID, Class string
		} `json:"dead_lettered"`
		DeadLetteredCount int `json:"dead_lettered_count"`
	}](t, wantOK(t, e.env, "verify", "--until", "0s", "-o", "json"))
	if len(got.Missing) != 0 || got.DeadLetteredCount != 1 || len(got.DeadLettered) != 1 || got.DeadLettered[0].ID != big || got.DeadLettered[0].Class != "record_too_large" {
		t.Errorf("verify -o json: missing %v dead_lettered %+v (count %d), want none missing and %s record_too_large", got.Missing, got.DeadLettered, got.DeadLetteredCount, big)
	}
	out = wantOK(t, e.env, "verify", "--until", "0s", "--republish")
	if !strings.Contains(out, "republished: 0 sent") {
		t.Errorf("verify --republish sent something:\n%s", out)
	}
}
