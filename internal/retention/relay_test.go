package retention_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/retention"
	"github.com/walrelay/walrelay/internal/testenv"
)

// With a real relay and a broker that refuses produce for 30s, retention
// removes the old rows Kafka acknowledged before the refusal and nothing
// of the transactions committed during it: every row of those is still in
// the table while the broker refuses, is read back from the broker once
// it accepts, and only then removed.
func TestPruneWhileBrokerRefusesDeletesNothingUnconfirmed(t *testing.T) {
	t.Parallel()
	d := plainOutbox(t)
	broker := testenv.Kafka(t)
	if broker.Cluster == nil {
		t.Fatal("needs the in-process kfake broker for fault injection")
	}
	cfg := config.Default()
	cfg.Postgres.DSN, cfg.Postgres.Slot = d.dsn, d.slot
	cfg.Postgres.StatusInterval = 100 * time.Millisecond
	cfg.Postgres.MinBackoff, cfg.Postgres.MaxBackoff = 50*time.Millisecond, time.Second
	cfg.Kafka.Brokers = broker.Addrs()
	cfg.Kafka.TopicPartitions = 2
	cfg.Relay.ShutdownTimeout = 5 * time.Second
	logs := &testenv.SyncBuffer{}
	r, err := relay.New(cfg, slog.New(slog.NewTextHandler(logs, nil)), metrics.New(prometheus.NewRegistry(), "test", d.slot))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("relay: %v", err)
		}
		if t.Failed() {
			t.Logf("relay log:\n%s", logs.String())
		}
	})

	// 40 old rows in 4 transactions, published and confirmed.
	for i := range 4 {
		insertOld(t, d, fmt.Sprintf("acked%d", i), 10)
	}
	broker.ReadAll(t, []string{"outbox.event.order"}, 40, 30*time.Second)
	testenv.WaitCaughtUp(t, d.dsn, d.slot, 30*time.Second)

	p, reg := pruner(t, d, func(c *retention.Config) { c.Batch = 15 })
	cycle(t, p) // the fence the acknowledged rows are removed by

	fault := broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotEnoughReplicas, Count: -1})
	refusedAt := time.Now()
	for i := range 3 {
		insertOld(t, d, fmt.Sprintf("refused%d", i), 5)
	}
	// Passes every second for 30s while the broker refuses.
	var removed int64
	for time.Since(refusedAt) < 30*time.Second {
		res := cycle(t, p)
		removed += res.Rows
		left := ids(t, d)
		refused := 0
		for _, id := range left {
			if len(id) > 7 && id[:7] == "refused" {
				refused++
			}
		}
		if refused != 15 {
			t.Fatalf("after %v of refused produce, %d of the 15 refused rows are left (%q)", time.Since(refusedAt).Round(time.Second), refused, left)
		}
		time.Sleep(time.Second)
	}
	if removed != 40 {
		t.Errorf("removed %d rows while the broker refused, want the 40 acknowledged ones", removed)
	}
	if got := testenv.MetricValue(t, reg, "walrelay_outbox_rows_pruned_total", outboxLabel); got != 40 {
		t.Errorf("walrelay_outbox_rows_pruned_total = %v, want 40 (batches of 15)", got)
	}

	fault.Remove()
	recs := broker.ReadAll(t, []string{"outbox.event.order"}, 55, 60*time.Second)
	keys := map[string]bool{}
	for _, rec := range recs {
		keys[string(rec.Key)] = true
	}
	for i := range 3 {
		for j := 1; j <= 5; j++ {
			if k := fmt.Sprintf("refused%d-%d", i, j); !keys[k] {
				t.Errorf("event %s is not on the topic once the broker accepts", k)
			}
		}
	}
	testenv.WaitCaughtUp(t, d.dsn, d.slot, 30*time.Second)
	cycle(t, p) // a fence after the refused rows' commits...
	deadline := time.Now().Add(30 * time.Second)
	for len(ids(t, d)) > 0 { // ...confirmed by the relay, which then removes them
		if time.Now().After(deadline) {
			t.Fatalf("rows left 30s after the relay caught up: %q", ids(t, d))
		}
		time.Sleep(200 * time.Millisecond)
		cycle(t, p)
	}
}
