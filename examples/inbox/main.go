// Command inbox is an example consumer of walrelay's events: it applies
// each event of a topic to its own database exactly once, however often
// Kafka delivers it, with inbox.
//
// Its business effect counts the events of each aggregate (the record
// key) and keeps the last event type (header eventType, which walrelay
// sends with router.table.fields.additional.placement type:header:eventType)
// in table aggregate_events, in the transaction that records the event id
// in the inbox table. Both tables are created if missing.
//
//	go run ./examples/inbox -dsn postgres://app@localhost/app -brokers localhost:9092 \
//	    -group orders-inbox -topic outbox.event.order
//
// Stop it with Ctrl-C: it commits the offsets of what it processed and
// leaves the group. Killed, it reads the uncommitted records again and
// the inbox skips those already applied.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/inbox"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "inbox:", err)
		os.Exit(1)
	}
}

// businessDDL is the example's own table: what its events change.
const businessDDL = `CREATE TABLE IF NOT EXISTS aggregate_events (
    aggregate_id text   PRIMARY KEY,
    events       bigint NOT NULL,
    last_type    text
)`

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("inbox", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := fs.String("dsn", "", "the consumer's own database (required)")
	brokers := fs.String("brokers", "localhost:9092", "Kafka seed brokers, comma-separated")
	group := fs.String("group", "inbox-example", "consumer group")
	topics := fs.String("topic", "outbox.event.order", "topics to consume, comma-separated")
	table := fs.String("table", inbox.DefaultTable, "inbox table")
	typeHeader := fs.String("type-header", "eventType", "header holding the event type (walrelay's router.table.fields.additional.placement type:header:eventType)")
	session := fs.Duration("session-timeout", 45*time.Second, "consumer group session timeout: how long a killed consumer's partitions wait before another member takes them")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dsn == "" {
		return errors.New("-dsn is required: the database to record processed events in")
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))

	pool, err := pgxpool.New(ctx, *dsn)
	if err != nil {
		return fmt.Errorf("connecting to the database: %w", err)
	}
	defer pool.Close()
	in, err := inbox.New(inbox.Config{Table: *table})
	if err != nil {
		return err
	}
	if err := in.Create(ctx, pool); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, businessDDL); err != nil {
		return fmt.Errorf("creating aggregate_events: %w", err)
	}

	count := func(ctx context.Context, tx pgx.Tx, rec *kgo.Record) error {
		typ := ""
		for _, h := range rec.Headers {
			if h.Key == *typeHeader {
				typ = string(h.Value)
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO aggregate_events VALUES ($1, 1, $2)
			ON CONFLICT (aggregate_id) DO UPDATE SET events = aggregate_events.events + 1, last_type = excluded.last_type`,
			string(rec.Key), typ); err != nil {
			return fmt.Errorf("counting the event: %w", err)
		}
		log.Info("applied", "id", in.EventID(rec), "aggregate", string(rec.Key), "type", typ,
			"topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset)
		return nil
	}
	log.Info("consuming", "group", *group, "topics", *topics)
	return in.Consume(ctx, pool, inbox.ConsumerConfig{
		Brokers:    strings.Split(*brokers, ","),
		Group:      *group,
		Topics:     strings.Split(*topics, ","),
		ClientOpts: []kgo.Opt{kgo.SessionTimeout(*session)},
	}, count, log)
}
