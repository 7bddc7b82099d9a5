package relay_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/setup"
	"github.com/walrelay/walrelay/internal/testenv"
)

// TestExactlyOnceClustersWithTheSameNames: two Postgres clusters, each
// with a database app and the default slot walrelay, relay exactly-once
// into one Kafka cluster at the same time. Their derived transactional
// ids differ by the system identifier, so neither fences the other, each
// resumes from its own checkpoint after a restart, and a read_committed
// consumer gets every row of each once. (With walrelay-<database>-<slot>
// the second start fenced the first, which stopped with PRODUCER_FENCED,
// and read the other cluster's checkpoint: "another WAL history".)
func TestExactlyOnceClustersWithTheSameNames(t *testing.T) {
	broker := testenv.Kafka(t)
	type side struct {
		name string
		dsn  string
		sys  string
		cfg  config.Config
		logs *logBuffer
		run  *running
		rows int
	}
	var sides []*side
	for _, name := range []string{"a", "b"} {
		c := testenv.PrivateCluster(t, localpg.Options{})
		testenv.Exec(t, c.DSN(""), `CREATE DATABASE app`)
		dsn := c.DSN("app")
		if _, err := setup.Run(t.Context(), testenv.Connect(t, dsn), setup.Names{Schema: "public", Table: "outbox", Publication: "walrelay_outbox", Slot: "walrelay"}); err != nil {
			t.Fatalf("setup: %v", err)
		}
		cfg := config.Default()
		cfg.Postgres.DSN = dsn
		cfg.Postgres.StatusInterval = 100 * time.Millisecond
		cfg.Postgres.MinBackoff = 50 * time.Millisecond
		cfg.Postgres.MaxBackoff = time.Second
		cfg.Kafka.Brokers = broker.Addrs()
		cfg.Kafka.TopicPartitions = 4
		cfg.Relay.ShutdownTimeout = 10 * time.Second
		cfg.Relay.Delivery = config.ExactlyOnce
		s := &side{name: name, dsn: dsn, cfg: cfg, logs: &logBuffer{},
			sys: testenv.QueryValue[string](t, dsn, `SELECT system_identifier::text FROM pg_control_system()`)}
		sides = append(sides, s)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("relay %s log:\n%s", s.name, s.logs.String())
			}
		})
	}
	if sides[0].sys == sides[1].sys {
		t.Fatalf("both clusters have system identifier %s; the test proves nothing", sides[0].sys)
	}

	// insert commits n rows on each side, interleaved, with aggregate ids
	// naming the side.
	insert := func(n int) {
		for range n {
			for _, s := range sides {
				insertRow(t, s.dsn, "order", fmt.Sprintf("%s-%d", s.name, s.rows), `{"n": 1}`)
				s.rows++
			}
		}
	}
	// check reads every record as a read_committed consumer and wants
	// each side's rows there once, both relays still running.
	check := func(round string) {
		t.Helper()
		want := sides[0].rows + sides[1].rows
		recs := broker.As(kgo.FetchIsolationLevel(kgo.ReadCommitted())).ReadAll(t, []string{"outbox.event.order"}, want, 60*time.Second)
		recs = append(recs, broker.As(kgo.FetchIsolationLevel(kgo.ReadCommitted())).ReadAll(t, []string{"outbox.event.order"}, 0, 500*time.Millisecond)[len(recs):]...)
		seen := map[string]int{}
		for _, r := range recs {
			seen[string(r.Key)]++
		}
		for _, s := range sides {
			for i := range s.rows {
				if n := seen[fmt.Sprintf("%s-%d", s.name, i)]; n != 1 {
					t.Errorf("%s: row %s-%d of cluster %s read %d times, want 1", round, s.name, i, s.name, n)
				}
			}
			if s.run.exited() {
				t.Errorf("%s: the relay of cluster %s stopped: %v", round, s.name, s.run.err)
			}
		}
		if len(recs) != want {
			t.Errorf("%s: %d records, want %d", round, len(recs), want)
		}
	}

	// caughtUp waits until both slots are confirmed to their server's WAL
	// as it is now, and fails at once if a relay stops.
	caughtUp := func() {
		t.Helper()
		for _, s := range sides {
			_, target := testenv.SlotLSNs(t, s.dsn, "walrelay")
			for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				for _, s := range sides {
					if s.run.exited() {
						t.Fatalf("the relay of cluster %s stopped: %v", s.name, s.run.err)
					}
				}
				if confirmed, _ := testenv.SlotLSNs(t, s.dsn, "walrelay"); confirmed >= target {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the slot of cluster %s was not confirmed to %s within 60s", s.name, target)
				}
			}
		}
	}

	for _, s := range sides {
		s.run = runRelay(t, s.cfg, s.logs, nil)
	}
	for _, s := range sides {
		want := s.cfg.TransactionalID("app", s.sys)
		s.logs.waitLog(t, "exactly-once delivery: records go into kafka transactions with a checkpoint", map[string]string{"transactional_id": want}, 30*time.Second)
	}
	insert(10)
	caughtUp()
	check("first run")
	for _, s := range sides {
		if err := s.run.stop(); err != nil {
			t.Errorf("stopping the relay of cluster %s: %v", s.name, err)
		}
	}

	// Restarted, each reads its own checkpoint (after a clean stop the
	// slot is confirmed as far, so it skips nothing).
	for _, s := range sides {
		s.logs = &logBuffer{}
		s.run = runRelay(t, s.cfg, s.logs, nil)
	}
	for _, s := range sides {
		s.logs.waitLog(t, "the checkpoint skips nothing the slot sends: publishing from the slot's position", map[string]string{"checkpoint_system_id": s.sys}, 30*time.Second)
	}
	insert(10)
	caughtUp()
	check("after a restart")
	for _, s := range sides {
		if n := len(s.logs.lines("the checkpoint belongs to another WAL history")); n > 0 {
			t.Errorf("the relay of cluster %s found another cluster's checkpoint under its key", s.name)
		}
		if err := s.run.stop(); err != nil {
			t.Errorf("stopping the relay of cluster %s: %v", s.name, err)
		}
	}
}
