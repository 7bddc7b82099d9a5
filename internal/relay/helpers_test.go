package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/testenv"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/setup"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// fixture is one test's database (with walrelay's schema), broker and
// relay configuration.
type fixture struct {
	dsn    string
	broker *testenv.Broker
	cfg    config.Config
	logs   *logBuffer
	// metrics and reg are the last started relay's metrics and registry.
	metrics *metrics.Metrics
	reg     *prometheus.Registry
}

// newFixture creates a database with the outbox table, publication and
// slot, a kfake broker (with kafkaOpts), and a config pointing at both.
// mutate may adjust the config before the relay is created.
func newFixture(t *testing.T, mutate func(*config.Config), kafkaOpts ...kfake.Opt) *fixture {
	t.Helper()
	return newFixtureWith(t, nil, mutate, kafkaOpts...)
}

// newFixtureWith is newFixture with the outbox partitioned by parts (nil:
// a plain table).
func newFixtureWith(t *testing.T, parts *setup.Partitions, mutate func(*config.Config), kafkaOpts ...kfake.Opt) *fixture {
	t.Helper()
	return newFixtureOn(t, testenv.Postgres(t).NewDatabase(t), parts, mutate, kafkaOpts...)
}

// newFixtureOn is newFixtureWith on the database dsn (a private
// cluster's, for tests that restart or configure the server).
func newFixtureOn(t *testing.T, dsn string, parts *setup.Partitions, mutate func(*config.Config), kafkaOpts ...kfake.Opt) *fixture {
	t.Helper()
	conn := testenv.Connect(t, dsn)
	if _, err := setup.Run(t.Context(), conn, setup.Names{Schema: "public", Table: "outbox", Publication: "walrelay_outbox", Slot: "walrelay", Partitions: parts}); err != nil {
		t.Fatalf("setup: %v", err)
	}
	cfg := config.Default()
	cfg.Postgres.DSN = dsn
	cfg.Postgres.StatusInterval = 100 * time.Millisecond
	cfg.Postgres.MinBackoff = 50 * time.Millisecond
	cfg.Postgres.MaxBackoff = time.Second
	cfg.Metrics.SlotPollInterval = 200 * time.Millisecond
	f := &fixture{dsn: dsn, broker: testenv.Kafka(t, kafkaOpts...), cfg: cfg, logs: &logBuffer{}}
	f.cfg.Kafka.Brokers = f.broker.Addrs()
	f.cfg.Kafka.TopicPartitions = 4
	f.cfg.Relay.ShutdownTimeout = 10 * time.Second
	if mutate != nil {
		mutate(&f.cfg)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("relay log:\n%s", f.logs.String())
		}
	})
	return f
}

// running is a relay started by fixture.start.
type running struct {
	relay  *relay.Relay
	cancel context.CancelFunc
	done   chan struct{}
	err    error // Run's result, set before done is closed
}

// start runs the relay in the background. It is stopped at cleanup if the
// test did not stop it.
func (f *fixture) start(t *testing.T, opts ...relay.Option) *running {
	t.Helper()
	f.reg = prometheus.NewRegistry() // each relay gets its own
	f.metrics = metrics.New(f.reg, "test", f.cfg.Postgres.Slot)
	return runRelay(t, f.cfg, f.logs, f.metrics, opts...)
}

// runRelay runs a relay with cfg, logging to logs, in the background. It
// is stopped at cleanup if the test did not stop it.
func runRelay(t *testing.T, cfg config.Config, logs *logBuffer, m *metrics.Metrics, opts ...relay.Option) *running {
	t.Helper()
	r, err := relay.New(cfg, logs.logger(), m, opts...)
	if err != nil {
		t.Fatalf("relay.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &running{relay: r, cancel: cancel, done: make(chan struct{})}
	go func() {
		run.err = r.Run(ctx)
		close(run.done)
	}()
	t.Cleanup(func() { _ = run.stop() })
	return run
}

// stop cancels the relay as SIGTERM would and returns Run's error.
func (r *running) stop() error {
	r.cancel()
	return r.wait(30 * time.Second)
}

// wait returns Run's error once it returned, or an error after timeout.
func (r *running) wait(timeout time.Duration) error {
	select {
	case <-r.done:
		return r.err
	case <-time.After(timeout):
		return errors.New("relay still running after " + timeout.String())
	}
}

// exited reports whether Run has returned.
func (r *running) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// createProbe creates a second slot that only the test reads (peeks), to
// learn transactions' end LSNs exactly as pgoutput reports them.
func (f *fixture) createProbe(t *testing.T) {
	t.Helper()
	testenv.Exec(t, f.dsn, `SELECT pg_create_logical_replication_slot('probe', 'pgoutput')`)
}

// txEnd is the end LSN (pgoutput's Commit TransactionEndLSN, what walrelay
// confirms) of transaction xid, read from the probe slot.
func (f *fixture) txEnd(t *testing.T, xid uint32) pglogrepl.LSN {
	t.Helper()
	lsn := testenv.QueryValue[string](t, f.dsn, `
		SELECT lsn::text FROM pg_logical_slot_peek_binary_changes('probe', NULL, NULL,
			'proto_version', '1', 'publication_names', 'walrelay_outbox')
		WHERE xid::text = $1 AND get_byte(data, 0) = 67 -- 'C'ommit`, fmt.Sprint(xid))
	return mustLSN(t, lsn)
}

// slot returns the slot's confirmed_flush_lsn and the server's current WAL LSN.
func (f *fixture) slot(t *testing.T) (confirmed, current pglogrepl.LSN) {
	t.Helper()
	return testenv.SlotLSNs(t, f.dsn, "walrelay")
}

// waitCaughtUp waits until the slot's confirmed_flush_lsn reaches the
// server's current WAL LSN (read once, now).
func (f *fixture) waitCaughtUp(t *testing.T, timeout time.Duration) {
	t.Helper()
	testenv.WaitCaughtUp(t, f.dsn, "walrelay", timeout)
}

func mustLSN(t *testing.T, s string) pglogrepl.LSN {
	t.Helper()
	return testenv.ParseLSN(t, s)
}

// exec runs statements on dsn in one transaction and returns the
// transaction's xid.
func execTx(t *testing.T, dsn string, stmts ...string) uint32 {
	t.Helper()
	conn := testenv.Connect(t, dsn)
	defer conn.Close(context.Background())
	var xid uint32
	err := pgx.BeginFunc(t.Context(), conn, func(tx pgx.Tx) error {
		for _, s := range stmts {
			if _, err := tx.Exec(t.Context(), s); err != nil {
				return err
			}
		}
		return tx.QueryRow(t.Context(), `SELECT txid_current()::text::bigint`).Scan(&xid)
	})
	if err != nil {
		t.Fatalf("transaction %q: %v", stmts, err)
	}
	return xid
}

// logBuffer captures the relay's JSON log lines.
type logBuffer struct{ testenv.SyncBuffer }

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// lines returns the decoded log lines whose message contains msg.
func (b *logBuffer) lines(msg string) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(b.String(), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && strings.Contains(m["msg"].(string), msg) {
			out = append(out, m)
		}
	}
	return out
}

// waitLog waits until a line with msg and the given attribute values is logged.
func (b *logBuffer) waitLog(t *testing.T, msg string, attrs map[string]string, timeout time.Duration) map[string]any {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
	lines:
		for _, l := range b.lines(msg) {
			for k, v := range attrs {
				if got, _ := l[k].(string); got != v {
					continue lines
				}
			}
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line %q with %v within %s", msg, attrs, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// insertRow inserts an outbox row (aggregatetype nil for NULL) and returns
// its id and transaction id.
func insertRow(t *testing.T, dsn string, aggregatetype any, aggregateid, payload string) (id string, xid uint32) {
	t.Helper()
	return insertRowInto(t, dsn, "outbox", aggregatetype, aggregateid, payload)
}

// insertRowInto is insertRow into table (as SQL names it: outbox,
// billing.outbox).
func insertRowInto(t *testing.T, dsn, table string, aggregatetype any, aggregateid, payload string) (id string, xid uint32) {
	t.Helper()
	conn := testenv.Connect(t, dsn)
	defer conn.Close(t.Context())
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(t.Context(), `INSERT INTO `+table+` (aggregatetype, aggregateid, type, payload) VALUES ($1, $2, 'T', $3) RETURNING id::text`, aggregatetype, aggregateid, payload).Scan(&id); err != nil {
		t.Fatalf("inserting row: %v", err)
	}
	if err := tx.QueryRow(t.Context(), `SELECT txid_current()::text::bigint`).Scan(&xid); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	return id, xid
}

// slowProduce makes the kfake broker take d over every produce request, so
// records stay in flight that long (fixtures with kfake only), until the
// returned flag is cleared.
func (f *fixture) slowProduce(d time.Duration) *atomic.Bool {
	slow := new(atomic.Bool)
	slow.Store(true)
	f.broker.Cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		f.broker.Cluster.KeepControl()
		if slow.Load() {
			time.Sleep(d)
		}
		return nil, nil, false
	})
	return slow
}

// breakMidTransaction terminates the slot's walsender once 2000 records of
// a transaction of rows rows are published to topic, and returns how many
// were published at the break. It fails the test when the whole
// transaction was published before the break (the test would prove
// nothing).
func (f *fixture) breakMidTransaction(t *testing.T, topic string, rows int) float64 {
	t.Helper()
	published := func() float64 {
		v, _ := testenv.FindMetric(t, f.reg, "walrelay_events_published_total", map[string]string{"topic": topic})
		return v
	}
	deadline := time.Now().Add(30 * time.Second)
	for published() < 2000 {
		if time.Now().After(deadline) {
			t.Fatal("the transaction did not start publishing")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := testenv.QueryValue[int64](t, f.dsn, `SELECT count(pg_terminate_backend(active_pid)) FROM pg_replication_slots WHERE slot_name = 'walrelay' AND active_pid IS NOT NULL`); n != 1 {
		t.Fatalf("terminated %d walsenders", n)
	}
	atBreak := published()
	if atBreak >= float64(rows) {
		t.Fatalf("the whole transaction (%v) was published before the break; the test proves nothing", atBreak)
	}
	return atBreak
}
