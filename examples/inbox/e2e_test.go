package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/setup"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
)

// TestOutboxToInbox is the whole path: an application writes orders and
// their events with outbox (one transaction rolled back), walrelay
// relays them, and the example consumer, on a database of its own,
// applies each event once. The consumer's inbox holds exactly the ids
// Emit returned for the committed transactions.
func TestOutboxToInbox(t *testing.T) {
	pg := testenv.Postgres(t)
	appDSN, consumerDSN := pg.NewDatabase(t), pg.NewDatabase(t)
	slot := testenv.UniqueName(t, "s")
	conn := testenv.Connect(t, appDSN)
	if _, err := setup.Run(t.Context(), conn, setup.Names{Schema: "public", Table: "outbox", Publication: "walrelay_outbox", Slot: slot}); err != nil {
		t.Fatalf("setup: %v", err)
	}
	testenv.Exec(t, appDSN, `CREATE TABLE orders (id text PRIMARY KEY, status text NOT NULL)`)
	broker := testenv.Kafka(t)

	cfg := config.Default()
	cfg.Postgres.DSN, cfg.Postgres.Slot = appDSN, slot
	cfg.Kafka.Brokers, cfg.Kafka.TopicPartitions = broker.Addrs(), 3
	cfg.HTTP.Listen = ""
	cfg.Router.AdditionalPlacement = "type:header:eventType" // the example counts by it
	var relayLog testenv.SyncBuffer
	r, err := relay.New(cfg, slog.New(slog.NewTextHandler(&relayLog, nil)), metrics.New(prometheus.NewRegistry(), "test", slot))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	relayDone := make(chan error, 1)
	go func() { relayDone <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-relayDone; err != nil || t.Failed() {
			t.Logf("relay: %v; its log:\n%s", err, relayLog.String())
		}
	})

	// The application: each order and its events in one transaction.
	w, err := outbox.New(outbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	write := func(order string, commit bool, types ...string) {
		tx, err := conn.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(context.Background()) }()
		if _, err := tx.Exec(t.Context(), `INSERT INTO orders VALUES ($1, 'created') ON CONFLICT (id) DO UPDATE SET status = 'paid'`, order); err != nil {
			t.Fatal(err)
		}
		var written []string
		for _, typ := range types {
			id, err := w.Emit(t.Context(), tx, outbox.Event{AggregateType: "order", AggregateID: order, Type: typ,
				Payload: fmt.Appendf(nil, `{"orderId": %q}`, order)})
			if err != nil {
				t.Fatal(err)
			}
			written = append(written, id)
		}
		if commit {
			if err := tx.Commit(t.Context()); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, written...)
		}
	}
	for i := range 8 {
		write(fmt.Sprintf("o-%d", i), true, "OrderCreated")
		write(fmt.Sprintf("o-%d", i), true, "OrderPaid", "InvoiceRequested")
	}
	write("o-rolled-back", false, "OrderCreated")

	// The consumer, on its own database.
	var consumerLog testenv.SyncBuffer
	consumerDone := make(chan error, 1)
	go func() {
		consumerDone <- run(ctx, []string{"-dsn", consumerDSN, "-brokers", strings.Join(broker.Addrs(), ","), "-group", "billing", "-topic", topic}, &consumerLog)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for testenv.QueryValue[int64](t, consumerDSN, `SELECT count(*) FROM (SELECT 1 FROM pg_tables WHERE tablename = 'aggregate_events') t`) == 0 ||
		testenv.QueryValue[int64](t, consumerDSN, `SELECT coalesce(sum(events), 0)::bigint FROM aggregate_events`) < int64(len(ids)) ||
		!committedAll(t, kadm.NewClient(broker.Client(t)), "billing") {
		select {
		case err := <-consumerDone:
			t.Fatalf("the consumer stopped: %v; its log:\n%s", err, consumerLog.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the consumer did not apply %d events within 30s; its log:\n%s", len(ids), consumerLog.String())
		}
	}
	counts := testenv.QueryValue[string](t, consumerDSN, `SELECT string_agg(aggregate_id || '=' || events || ':' || last_type, ' ' ORDER BY aggregate_id) FROM aggregate_events`)
	var want []string
	for i := range 8 {
		want = append(want, fmt.Sprintf("o-%d=3:InvoiceRequested", i))
	}
	if counts != strings.Join(want, " ") {
		t.Errorf("consumer's counts: %s\nwant (each order's 3 events once, in commit order): %s", counts, strings.Join(want, " "))
	}
	rows, err := testenv.Connect(t, consumerDSN).Query(t.Context(), `SELECT id FROM inbox ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	if !slices.Equal(got, ids) {
		t.Errorf("inbox ids = %v\nwant the ids Emit returned for committed transactions: %v", got, ids)
	}
	cancel()
	if err := <-consumerDone; err != nil {
		t.Errorf("consumer: %v", err)
	}
}
