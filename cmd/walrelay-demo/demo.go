// Command walrelay-demo runs walrelay end to end on a private Postgres and
// an in-process Kafka-protocol broker: what `make demo` runs. It starts a
// throwaway Postgres cluster (from the local PostgreSQL installation) and
// franz-go's kfake, creates the schema, runs the relay, writes sample
// orders in real transactions, prints what lands on each topic, shuts down
// cleanly and removes everything it created.
//
// It is a command of its own so that the daemon's binary does not carry a
// Kafka broker, whose code would make walrelay's binary and its resident
// size larger (docs/benchmarks.md, "Profile findings").
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/pkg/config"
	"github.com/walrelay/walrelay/pkg/localpg"
	"github.com/walrelay/walrelay/pkg/outbox"
	"github.com/walrelay/walrelay/pkg/relay"
	"github.com/walrelay/walrelay/pkg/setup"
	sqlfiles "github.com/walrelay/walrelay/sql"
)

func main() {
	if len(os.Args) > 1 {
		os.Exit(cli.ExitCode("walrelay-demo", cli.UsageError{Err: fmt.Errorf("walrelay-demo takes no arguments (got %q)", os.Args[1:])}, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := demo(ctx, os.Stdout, os.Stderr)
	stop()
	os.Exit(cli.ExitCode("walrelay-demo", err, os.Stderr))
}

func demo(ctx context.Context, stdout, stderr io.Writer) error {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	step := func(format string, args ...any) { fmt.Fprintf(stdout, "==> "+format+"\n", args...) }

	step("starting a private Postgres cluster")
	pg, err := localpg.Start(ctx, localpg.Options{Logger: log})
	if err != nil {
		return fmt.Errorf("starting postgres: %w", err)
	}
	defer pg.Close()

	step("starting an in-process Kafka broker (kfake)")
	broker, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return fmt.Errorf("starting kafka broker: %w", err)
	}
	defer broker.Close()

	cfg := config.Default()
	cfg.Postgres.DSN = pg.DSN("postgres")
	cfg.Kafka.Brokers = broker.ListenAddrs()
	cfg.Kafka.TopicPartitions = 3
	cfg.Relay.ShutdownTimeout = 10 * time.Second
	cfg.HTTP.Listen = "" // the demo serves no metrics
	// The table-less outbox: events emitted with pg_logical_emit_message
	// under this prefix are routed like outbox rows.
	cfg.Outbox.MessagePrefix = messagePrefix

	conn, err := pgx.Connect(ctx, cfg.Postgres.DSN)
	if err != nil {
		return fmt.Errorf("connecting to postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	step("walrelay setup")
	steps, err := setup.Run(ctx, conn, setup.Names{Schema: "public", Table: "outbox", Publication: cfg.Postgres.Publications[0], Slot: cfg.Postgres.Slot})
	if err != nil {
		return err
	}
	for _, s := range steps {
		fmt.Fprintln(stdout, "    "+s.String())
	}

	r, err := relay.New(cfg, log, nil)
	if err != nil {
		return err
	}
	relayCtx, stopRelay := context.WithCancel(ctx)
	defer stopRelay()
	var g errgroup.Group
	g.Go(func() error { return r.Run(relayCtx) })

	step("writing sample orders in real transactions: sql/example_transactions.sql, outbox.Emit as outbox rows, and outbox.Emit as logical messages (the table-less outbox, outbox.message_prefix=%q)", messagePrefix)
	want, err := writeSampleOrders(ctx, conn)
	if err != nil {
		stopRelay()
		return errors.Join(err, g.Wait())
	}

	step("reading what landed on Kafka")
	records, err := consume(ctx, cfg.Kafka.Brokers, []string{"outbox.event.order", "outbox.event.customer"}, want)
	for _, rec := range records {
		fmt.Fprintf(stdout, "    topic=%s partition=%d offset=%d key=%s headers=%s\n      value=%s\n",
			rec.Topic, rec.Partition, rec.Offset, rec.Key, formatHeaders(rec.Headers), rec.Value)
	}
	if err != nil {
		stopRelay()
		return errors.Join(err, g.Wait())
	}

	step("stopping the relay (as on SIGTERM)")
	stopRelay()
	if err := g.Wait(); err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	var confirmed, current string
	if err := conn.QueryRow(ctx, `SELECT confirmed_flush_lsn::text, pg_current_wal_lsn()::text FROM pg_replication_slots WHERE slot_name = $1`, cfg.Postgres.Slot).Scan(&confirmed, &current); err != nil {
		return fmt.Errorf("reading slot: %w", err)
	}
	step("done: %d events relayed; slot %q confirmed_flush_lsn=%s (server WAL at %s)", len(records), cfg.Postgres.Slot, confirmed, current)
	return nil
}

// messagePrefix is the demo's outbox.message_prefix.
const messagePrefix = "outbox"

// writeSampleOrders runs the example SQL, then writes more orders, each in
// its own transaction with its events written by pkg/outbox: the first
// orders' as outbox rows, the last ones' as logical messages, which no
// table holds. A rolled-back order's events are never published. It
// returns how many events the committed transactions publish.
func writeSampleOrders(ctx context.Context, conn *pgx.Conn) (int, error) {
	if _, err := conn.Exec(ctx, sqlfiles.ExampleTransactions); err != nil {
		return 0, fmt.Errorf("running example transactions: %w", err)
	}
	rows, err := outbox.New(outbox.Config{}) // public.outbox, Debezium's column names
	if err != nil {
		return 0, err
	}
	messages, err := outbox.New(outbox.Config{Style: outbox.StyleMessage, Prefix: messagePrefix})
	if err != nil {
		return 0, err
	}
	events := 2
	for i, o := range []struct {
		customer string
		w        *outbox.Writer
		commit   bool
	}{{"c-7", rows, true}, {"c-8", rows, true}, {"c-7", messages, true}, {"c-9", messages, false}, {"c-8", messages, true}} {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			var id int64
			if err := tx.QueryRow(ctx, `INSERT INTO orders (customer_id, total_cents) VALUES ($1, $2) RETURNING id`, o.customer, 1000*(i+1)).Scan(&id); err != nil {
				return err
			}
			for _, ev := range []outbox.Event{
				{AggregateType: "order", AggregateID: fmt.Sprint(id), Type: "OrderCreated",
					Payload: fmt.Appendf(nil, `{"orderId":%d,"customerId":%q,"style":%q}`, id, o.customer, o.w.Style())},
				{AggregateType: "customer", AggregateID: o.customer, Type: "CustomerOrdered",
					Payload: fmt.Appendf(nil, `{"customerId":%q,"orders":%d,"style":%q}`, o.customer, i+1, o.w.Style())},
			} {
				if _, err := o.w.Emit(ctx, tx, ev); err != nil {
					return err
				}
			}
			if !o.commit {
				return errRolledBack
			}
			return nil
		})
		switch {
		case errors.Is(err, errRolledBack):
			continue // its events were never committed: nothing is published
		case err != nil:
			return 0, fmt.Errorf("writing order for %s: %w", o.customer, err)
		}
		events += 2
	}
	return events, nil
}

// errRolledBack rolls a sample order back.
var errRolledBack = errors.New("order rolled back")

// consume reads want records from topics, from the start.
func consume(ctx context.Context, brokers, topics []string, want int) ([]*kgo.Record, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, fmt.Errorf("creating consumer: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < want {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out, fmt.Errorf("read %d of %d events before timing out", len(out), want)
		}
		fetches.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out, nil
}

func formatHeaders(hs []kgo.RecordHeader) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = h.Key + "=" + string(h.Value)
	}
	return "[" + strings.Join(parts, " ") + "]"
}
