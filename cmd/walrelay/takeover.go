package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/dbzoffset"
	"github.com/walrelay/walrelay/internal/kafkaconf"
	"github.com/walrelay/walrelay/internal/operator"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/relay"
)

// takeoverReadTimeout bounds reading the offsets topic.
const takeoverReadTimeout = 2 * time.Minute

func debeziumTakeoverCommand(stdout, stderr io.Writer) *cobra.Command {
	var connector, prefix, topic string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "takeover --connector NAME",
		Short: "Take over a stopped Debezium connector's slot and relay from where it stopped",
		Long: `Reads the Debezium Postgres connector's last committed offset from Kafka
Connect's offsets topic (key ["NAME",{"server":"TOPIC_PREFIX"}]), checks that
nothing holds the slot (postgres.slot: stop the connector first), moves the slot
to the offset's lsn_commit so Postgres skips every transaction the connector
had committed there, and then runs the relay like 'walrelay run', passing over,
in the transaction the connector had left open, the rows it had published
(up to lsn, and lsn_events_processed rows at it): what Debezium's own restart
would skip. Running it again (after a crash) is safe: the slot never moves
backwards, and nothing is passed over once the relay has confirmed past that
transaction. Events Debezium published after its last offset commit are
published again (see docs/cli.md, "Taking over from Debezium").

--dry-run prints the offset and the pending events the takeover would skip,
and changes nothing. The offsets topic is read with the kafka.* settings.` + "\n" + exitCodesHelp,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd.Flags())
			if err != nil {
				return err
			}
			if connector == "" {
				return cli.UsageError{Err: fmt.Errorf("--connector is required: the Debezium connector's name, the first element of its offsets key")}
			}
			if topic == "" {
				return cli.UsageError{Err: fmt.Errorf("--offsets-topic is empty: name the Connect worker's offset.storage.topic")}
			}
			log := newLogger(cfg.Log, stderr)
			t, err := planTakeover(cmd.Context(), cfg, topic, connector, prefix)
			if err != nil {
				return err
			}
			if dryRun {
				return t.print(cmd.Context(), stdout, cfg)
			}
			if err := t.advance(cmd.Context(), cfg, log); err != nil {
				return err
			}
			var opts []relay.Option
			if o := t.pos.Open; o != nil {
				opts = append(opts, relay.SkipPublished(*o))
			}
			log.Info("starting walrelay after the Debezium connector", "version", version, "postgres", config.Redact(cfg.Postgres.DSN),
				"slot", cfg.Postgres.Slot, "brokers", cfg.Kafka.Brokers)
			return runRelay(cmd.Context(), cfg, log, opts...)
		},
	}
	cmd.Flags().StringVar(&connector, "connector", "", "the Debezium connector's name (required)")
	cmd.Flags().StringVar(&prefix, "topic-prefix", "", "the connector's topic.prefix (database.server.name before Debezium 2.0); needed only when its offsets name several")
	cmd.Flags().StringVar(&topic, "offsets-topic", "connect-offsets", "Kafka Connect's offsets topic (the worker's offset.storage.topic; Debezium's container image uses my_connect_offsets)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the offset and what would be skipped; change nothing")
	config.BindFlags(cmd.Flags())
	return cmd
}

// takeover is what a takeover starts from.
type takeover struct {
	topic string
	rec   dbzoffset.Record
	pos   dbzoffset.Position
	slot  postgres.Slot
	from  pglogrepl.LSN // the slot's confirmed_flush_lsn
}

// planTakeover reads the connector's offset and checks the slot: it
// exists, is walrelay's (pgoutput, this database) and nobody holds it.
func planTakeover(ctx context.Context, cfg config.Config, topic, connector, prefix string) (*takeover, error) {
	opts, err := kafkaconf.ClientOpts(cfg.Kafka, kafkaconf.Options{DialTimeout: kafkaconf.ShortDial})
	if err != nil {
		return nil, cli.UsageError{Err: err}
	}
	readCtx, cancel := context.WithTimeout(ctx, takeoverReadTimeout)
	defer cancel()
	t := &takeover{topic: topic}
	if t.rec, err = dbzoffset.Read(readCtx, topic, connector, prefix, opts...); err != nil {
		return nil, fmt.Errorf("reading the connector's offset: %w", err)
	}
	if t.pos, err = t.rec.Offset.Position(); err != nil {
		return nil, fmt.Errorf("offset of %s: %w", t.rec.Key, err)
	}
	err = withConn(ctx, cfg.Postgres.DSN, func(conn *pgx.Conn) error {
		if t.slot, err = postgres.InspectSlot(ctx, conn, cfg.Postgres.Slot); err != nil {
			return err
		}
		db, err := postgres.CurrentDatabase(ctx, conn)
		if err != nil {
			return err
		}
		if p := t.slot.Problem(db); p != "" {
			return fmt.Errorf("%w: %s", postgres.ErrSlotMismatch, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if t.slot.Active {
		who := ""
		if t.slot.ClientApplication != "" {
			who = " (" + t.slot.ClientApplication + ")"
		}
		return nil, fmt.Errorf("%w: slot %q is held by pid %d%s: stop the Debezium connector first (PUT /connectors/%s/stop), wait until the slot is inactive (walrelay slot inspect %s), then run the takeover again",
			postgres.ErrSlotActive, t.slot.Name, t.slot.ActivePID, who, connector, t.slot.Name)
	}
	if t.from, err = pglogrepl.ParseLSN(t.slot.ConfirmedFlushLSN); err != nil {
		return nil, fmt.Errorf("reading confirmed_flush_lsn %q of slot %q: %w", t.slot.ConfirmedFlushLSN, t.slot.Name, err)
	}
	return t, nil
}

// advance moves the slot to the offset's lsn_commit, unless it is there or
// past it already (a takeover run again): Postgres then skips every
// transaction committed at or before it.
func (t *takeover) advance(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	attrs := []any{"connector", t.rec.Key.Connector, "topic_prefix", t.rec.Key.Server, "offsets_topic", t.topic,
		"partition", t.rec.Partition, "offset", t.rec.At, "value", string(t.rec.Value)}
	log.Info("read the Debezium connector's last committed offset", attrs...)
	through := t.pos.Through
	if through <= t.from {
		log.Info("the slot is at or past the connector's lsn_commit already; not moving it",
			"slot", t.slot.Name, "confirmed_flush_lsn", t.from.String(), "lsn_commit", through.String())
		return nil
	}
	req, err := peekRequest(cfg, t.slot.Name)
	if err != nil {
		return err
	}
	return withConn(ctx, cfg.Postgres.DSN, func(conn *pgx.Conn) error {
		plan, err := operator.PlanAdvance(ctx, conn, operator.AdvanceRequest{PeekRequest: req, To: &through, Records: slotRecords(cfg), Note: "walrelay debezium takeover"})
		if err != nil {
			return fmt.Errorf("moving slot %q to the connector's lsn_commit: %w", t.slot.Name, err)
		}
		end, err := operator.Advance(ctx, conn, plan)
		if err != nil {
			return fmt.Errorf("moving slot %q to the connector's lsn_commit: %w", t.slot.Name, err)
		}
		log.Info("moved the slot past the transactions the connector had committed", "slot", t.slot.Name,
			"from", plan.From, "to", end, "outbox_events_skipped", len(plan.Skipped))
		return nil
	})
}

// dryRunPeekLimit bounds the pending events --dry-run decodes.
const dryRunPeekLimit = 100000

// print is --dry-run: the offset, the slot, and the pending outbox events
// the takeover would skip, by the rules the takeover applies (the
// transactions Postgres skips once the slot is at lsn_commit, then the
// rows passed over in the transaction the connector left open, if it is
// the first one after).
func (t *takeover) print(ctx context.Context, w io.Writer, cfg config.Config) error {
	r := t.rec
	fmt.Fprintf(w, "offset of %s in %s (partition %d, offset %d, written %s):\n  %s\n", r.Key, t.topic, r.Partition, r.At, r.Time.UTC().Format(time.RFC3339), r.Value)
	fmt.Fprintf(w, "slot %s: confirmed_flush_lsn %s, not in use\n", t.slot.Name, t.from)
	if t.pos.Through > t.from {
		fmt.Fprintf(w, "skip: transactions committed at or before lsn_commit %s (the slot moves from %s to %s)\n", t.pos.Through, t.from, t.pos.Through)
	} else {
		fmt.Fprintf(w, "skip: no whole transaction (the slot is at or past lsn_commit %s already)\n", t.pos.Through)
	}
	if o := t.pos.Open; o != nil {
		fmt.Fprintf(w, "skip: in transaction %d, if it comes first, the rows before %s and the first %d at it\n", o.Xid, o.LSN, o.Events)
	}
	req, err := peekRequest(cfg, t.slot.Name)
	if err != nil {
		return err
	}
	req.Limit = dryRunPeekLimit
	var res operator.PeekResult
	err = withConn(ctx, cfg.Postgres.DSN, func(conn *pgx.Conn) error {
		res, err = operator.Peek(ctx, conn, req)
		return err
	})
	if err != nil {
		return err
	}
	skipped, err := t.skipped(res.Events)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%d of %d pending outbox event(s) would be skipped:\n", len(skipped), len(res.Events))
	if err := printEvents(w, skipped); err != nil {
		return err
	}
	if res.More {
		fmt.Fprintf(w, "(only the first %d pending events were decoded)\n", dryRunPeekLimit)
	}
	return nil
}

// skipped returns the pending events (in commit order) a takeover skips:
// those of transactions ending at or before lsn_commit (Postgres skips a
// transaction whose commit record starts before the slot's position; a
// commit record ends at or before lsn_commit exactly when it starts before
// it, since lsn_commit is the end of one), then in the first transaction
// after, if it is the open one, what relay.SkipPublished passes over.
func (t *takeover) skipped(events []operator.Event) ([]operator.Event, error) {
	var out []operator.Event
	first := pglogrepl.LSN(0) // end of the first transaction after lsn_commit
	at := 0
	for _, ev := range events {
		end, err := pglogrepl.ParseLSN(ev.TxEndLSN)
		if err != nil {
			return nil, err
		}
		lsn, err := pglogrepl.ParseLSN(ev.LSN)
		if err != nil {
			return nil, err
		}
		if end <= t.pos.Through {
			out = append(out, ev)
			continue
		}
		if first == 0 {
			first = end
		}
		o := t.pos.Open
		if end != first || o == nil || ev.XID != o.Xid || lsn > o.LSN {
			break
		}
		if lsn == o.LSN {
			if at++; at > o.Events {
				break
			}
		}
		out = append(out, ev)
	}
	if out == nil {
		out = []operator.Event{}
	}
	return out, nil
}
