package retention_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/reconcile"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/retention"
	"github.com/walrelay/walrelay/internal/slotrecord"
	"github.com/walrelay/walrelay/internal/testenv"
)

// startRelay runs a relay with cfg until the test ends (or stop is
// called) and returns stop, which returns Run's error.
func startRelay(t *testing.T, cfg config.Config, logs *testenv.SyncBuffer) (stop func() error, done <-chan error) {
	t.Helper()
	r, err := relay.New(cfg, slog.New(slog.NewTextHandler(logs, nil)), metrics.New(prometheus.NewRegistry(), "test", cfg.Postgres.Slot))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	go func() { ch <- r.Run(ctx) }()
	var stopped bool
	var result error
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			result = <-ch
		}
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return stop, ch
}

// The reproduction: rows aged 2h the relay never published, the
// slot dropped and created again at the current WAL (the old runbook's
// remedy, as an operator or postgres.create_slot did it), a relay on the
// new slot (stopped on it, then relaying once the gap is accepted): retention must not delete the rows (it did: every fence is
// covered at once by the new slot), it says why and sets
// walrelay_retention_blocked; walrelay verify reports the 5 rows missing
// and republishes them; after walrelay slot adopt, pruning resumes and
// deletes them (now on Kafka).
func TestRecreatedSlotKeepsUnpublishedRows(t *testing.T) {
	t.Parallel()
	d := plainOutbox(t)
	broker := testenv.Kafka(t)
	cfg := config.Default()
	cfg.Postgres.DSN, cfg.Postgres.Slot = d.dsn, d.slot
	cfg.Postgres.StatusInterval = 100 * time.Millisecond
	cfg.Kafka.Brokers = broker.Addrs()
	cfg.Kafka.TopicPartitions = 1
	cfg.Relay.ShutdownTimeout = 5 * time.Second
	logs := &testenv.SyncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("relay log:\n%s", logs.String())
		}
	})

	insertOld(t, d, "never", 5) // in the slot, never relayed
	testenv.Exec(t, d.dsn, `SELECT pg_drop_replication_slot($1)`, d.slot)
	testenv.Exec(t, d.dsn, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, d.slot)
	// walrelay run stops on the slot past its record (issue 33 item 4);
	// the operator accepts the gap (slot create --accept-gap), and the
	// relay relays on from the new slot, retention still stopped.
	r, err := relay.New(cfg, slog.New(slog.NewTextHandler(logs, nil)), metrics.New(prometheus.NewRegistry(), "test", cfg.Postgres.Slot))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := r.Run(ctx); !errors.Is(err, slotrecord.ErrJumped) {
		t.Fatalf("relay on the recreated slot: %v, want ErrJumped", err)
	}
	if _, _, err := postgres.CreateRecordedSlot(t.Context(), testenv.Connect(t, d.dsn), slotrecord.Table{Schema: "public"}, d.slot, true, false); err != nil {
		t.Fatalf("slot create --accept-gap on the recreated slot: %v", err)
	}
	startRelay(t, cfg, logs)
	// The relay publishes what it reads from the new slot.
	insertOld(t, d, "after", 2)
	broker.ReadAll(t, []string{"outbox.event.order"}, 2, 30*time.Second)

	p, reg := pruner(t, d, nil)
	var removed int64
	var lastErr error
	for range 2 {
		res, err := p.Cycle(t.Context())
		removed += res.Rows
		lastErr = err
		time.Sleep(300 * time.Millisecond)
	}
	if removed != 0 {
		t.Fatalf("two prune cycles after the slot was recreated removed %d rows, want 0 (the 5 old ones were never published)", removed)
	}
	if !errors.Is(lastErr, retention.ErrSlotJumped) {
		t.Fatalf("prune cycle: %v, want ErrSlotJumped", lastErr)
	}
	t.Logf("retention said: %v", lastErr)
	if got := testenv.MetricValue(t, reg, "walrelay_retention_blocked", map[string]string{"reason": "slot_jumped"}); got != 1 {
		t.Errorf("walrelay_retention_blocked{reason=slot_jumped} = %v, want 1", got)
	}
	if _, err := p.Once(t.Context(), time.Second); !errors.Is(err, retention.ErrSlotJumped) {
		t.Errorf("walrelay outbox prune: %v, want ErrSlotJumped", err)
	}

	// walrelay verify on the recreated slot finds the 5 never published.
	opts := reconcile.Options{Since: time.Now().Add(-3 * time.Hour), Until: time.Now().Add(time.Minute), Wait: 30 * time.Second}
	rep, err := reconcile.Run(t.Context(), cfg, opts, nil)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if len(rep.Missing) != 5 || rep.SlotState != slotrecord.ReasonSlotJumped {
		t.Fatalf("verify: %d missing, slot state %q (%s); want the 5 never-published rows and slot_jumped", len(rep.Missing), rep.SlotState, rep.SlotProblem)
	}
	opts.Republish = true
	if rep, err = reconcile.Run(t.Context(), cfg, opts, nil); err != nil || rep.Republished == nil || rep.Republished.Acknowledged != 5 {
		t.Fatalf("verify --republish: %+v, %v; want 5 acknowledged", rep.Republished, err)
	}

	// Adopted, retention resumes: every old row is on Kafka now.
	if _, _, err := postgres.AdoptSlot(t.Context(), testenv.Connect(t, d.dsn), slotrecord.Table{Schema: "public"}, d.slot, "test"); err != nil {
		t.Fatalf("adopt: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(ids(t, d)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("rows left 30s after the slot was adopted: %q", ids(t, d))
		}
		if _, err := p.Cycle(t.Context()); err != nil {
			t.Fatalf("prune after adopt: %v", err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if got := testenv.MetricValue(t, reg, "walrelay_retention_blocked", map[string]string{"reason": "slot_jumped"}); got != 0 {
		t.Errorf("walrelay_retention_blocked{reason=slot_jumped} = %v after adopt, want 0", got)
	}
	keys := map[string]bool{}
	for _, rec := range broker.ReadAll(t, []string{"outbox.event.order"}, 7, 30*time.Second) {
		keys[string(rec.Key)] = true
	}
	var got []string
	for k := range keys {
		got = append(got, k)
	}
	slices.Sort(got)
	if want := []string{"after-1", "after-2", "never-1", "never-2", "never-3", "never-4", "never-5"}; !slices.Equal(got, want) {
		t.Errorf("on Kafka: %q, want %q", got, want)
	}
}
