package main

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/testenv"
)

// `walrelay run` with exactly-once delivery exits 1 at once, naming the
// record, when its last checkpoint does not parse (here a version this
// walrelay does not read, as after a downgrade), instead of reading it
// again for ever.
func TestRunExitsOnUnreadableCheckpoint(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	setupOutbox(t, dsn)
	broker := testenv.Kafka(t)
	pc, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	key := cfg.TransactionalID(pc.Database, testenv.QueryValue[string](t, dsn, `SELECT system_identifier::text FROM pg_control_system()`))
	broker.CreateTopic(t, cfg.Relay.CheckpointTopic, 1)
	value := `{"version":2,"lsn":"0/16B3748","system_id":"7312","timeline":1}`
	if err := broker.Client(t).ProduceSync(t.Context(), &kgo.Record{Topic: cfg.Relay.CheckpointTopic, Key: []byte(key), Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	env := childEnv("WALRELAY_POSTGRES_DSN="+dsn, "WALRELAY_KAFKA_BROKERS="+strings.Join(broker.Addrs(), ","), "WALRELAY_RELAY_DELIVERY=exactly_once")
	relay := startChild(t, env, "run")
	if code := relay.wait(t, 30*time.Second); code != 1 {
		t.Errorf("walrelay run exited %d, want 1", code)
	}
	stderr := relay.stderr.String()
	for _, want := range []string{"walrelay: ", "checkpoint unreadable", key, "offset 0", "checkpoint version 2, this walrelay reads 1", "kcat -P"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}
