// walrelay slot peek and slot advance: the slot's next events, read without
// consuming them, and moving the slot past one.

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/operator"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/router"
)

// peekRequest is a PeekRequest from the config.
func peekRequest(cfg config.Config, slot string) (operator.PeekRequest, error) {
	rt, err := router.New(cfg.Router, cfg.Converter)
	if err != nil {
		return operator.PeekRequest{}, cli.UsageError{Err: fmt.Errorf("config router: %w", err)}
	}
	return operator.PeekRequest{Slot: slot, Publications: cfg.Postgres.Publications, Router: rt, Policies: cfg.Relay.OnError,
		MessagePrefix: cfg.Outbox.MessagePrefix}, nil
}

// printEvents prints outbox events as a table. When some are logical
// messages (the table-less outbox), a SOURCE column tells them from rows:
// the table, or message:<prefix>.
func printEvents(w io.Writer, events []operator.Event) error {
	tw := newTable(w)
	source := slices.ContainsFunc(events, func(ev operator.Event) bool { return ev.Message })
	head := "LSN\tTX_END_LSN\tID\tTOPIC\tKEY\tPAYLOAD"
	if source {
		head += "\tSOURCE"
	}
	fmt.Fprintln(tw, head)
	for _, ev := range events {
		topic := ev.Topic
		if ev.ErrorClass != "" {
			topic = "(cannot publish: " + ev.ErrorClass
			if ev.OnError != "" {
				topic += ", on_error=" + ev.OnError
			}
			topic += ")"
		}
		key := "(null)"
		if ev.Key != nil {
			key = *ev.Key
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s", ev.LSN, ev.TxEndLSN, dash(ev.ID), topic, key, postgres.HumanBytes(int64(ev.PayloadBytes)))
		if source {
			fmt.Fprintf(tw, "\t%s", dash(ev.Table))
		}
		fmt.Fprintln(tw)
	}
	if len(events) == 0 {
		fmt.Fprintln(tw, "(no pending outbox events)")
	}
	return tw.Flush()
}

func slotPeekCommand(stdout io.Writer) *cobra.Command {
	var limit int
	var copySlot bool
	cmd := adminCommand("peek NAME", "Show the outbox events the relay would publish next, without consuming them",
		`Decodes the slot's pending changes with pgoutput and the relay's publications
(pg_logical_slot_peek_binary_changes: nothing is consumed, the slot does not
move) and routes each outbox INSERT with the router config: LSN, the end LSN of
its transaction, outbox id, topic, key and payload size. A row the relay cannot
publish shows its error class and the configured relay.on_error policy. With
outbox.message_prefix set, the table-less outbox's logical messages are events
too, and a SOURCE column says which are messages (message:<prefix>) and which
rows (their table).

Postgres refuses to peek a slot in use: stop the relay, or pass --copy to peek
a temporary copy of it.`, cobra.ExactArgs(1),
		func(ctx context.Context, _ *cobra.Command, cfg config.Config, format string, args []string) error {
			if err := slotArg(args[0]); err != nil {
				return err
			}
			if limit < 1 {
				return cli.UsageError{Err: fmt.Errorf("--limit %d: want at least 1", limit)}
			}
			req, err := peekRequest(cfg, args[0])
			if err != nil {
				return err
			}
			req.Limit, req.Copy = limit, copySlot
			return queryAndPrint(ctx, cfg.Postgres.DSN, stdout, format,
				func(conn *pgx.Conn) (operator.PeekResult, error) { return operator.Peek(ctx, conn, req) },
				printPeek)
		})
	cmd.Flags().IntVar(&limit, "limit", 20, "show at most this many events")
	cmd.Flags().BoolVar(&copySlot, "copy", false, "peek a temporary copy of the slot (works while the relay holds it)")
	return cmd
}

// printPeek prints what slot peek found: a summary line and the events.
func printPeek(w io.Writer, res operator.PeekResult) error {
	from := "slot " + res.Slot.Name
	if res.Copy != "" {
		from += " (a temporary copy)"
	}
	fmt.Fprintf(w, "%s: confirmed_flush_lsn %s, %d pending outbox event(s) shown\n", from, res.Slot.ConfirmedFlushLSN, len(res.Events))
	if err := printEvents(w, res.Events); err != nil {
		return err
	}
	if res.More {
		fmt.Fprintf(w, "(more pending; raise --limit to see them)\n")
	}
	return nil
}

func slotAdvanceCommand(stdout, stderr io.Writer) *cobra.Command {
	var yes bool
	var to, pastEvent string
	cmd := adminCommand("advance NAME (--to LSN | --past-event ID)", "Move a slot forward to skip a poisoned event (destructive)",
		`Moves the slot forward with pg_replication_slot_advance, so the relay skips
what is before the new position. --to LSN moves it to that LSN; --past-event ID
moves it to the end of the transaction holding the outbox event with that id
(found with a peek), so that transaction is skipped and the next one is
published. It first prints exactly which pending outbox events it would skip
(LSN, id, topic, key), then needs --yes when stdin is not a terminal, or asks
(y/N) when it is.

It refuses to move the slot backwards, past pg_current_wal_lsn(), or while a
process holds it (stop the relay first). Skipped events are never published:
republish them by hand if they matter.`, cobra.ExactArgs(1),
		func(ctx context.Context, _ *cobra.Command, cfg config.Config, format string, args []string) error {
			if err := slotArg(args[0]); err != nil {
				return err
			}
			if (to == "") == (pastEvent == "") {
				return cli.UsageError{Err: fmt.Errorf("slot advance needs exactly one of --to LSN or --past-event ID")}
			}
			if cfg.Postgres.PrimaryDSN != "" {
				return errors.New("slot advance does not support decoding from a standby yet (postgres.primary_dsn is set: the slot is on the standby, walrelay's record of it on the primary); nothing was moved")
			}
			peek, err := peekRequest(cfg, args[0])
			if err != nil {
				return err
			}
			req := operator.AdvanceRequest{PeekRequest: peek, PastEvent: pastEvent, Records: slotRecords(cfg)}
			if to != "" {
				lsn, err := lsnArg(to)
				if err != nil {
					return err
				}
				req.To = &lsn
			}
			return withConn(ctx, cfg.Postgres.DSN, func(conn *pgx.Conn) error {
				plan, err := operator.PlanAdvance(ctx, conn, req)
				if err != nil {
					return err
				}
				if format == outputTable {
					fmt.Fprintf(stdout, "slot %s: from %s to %s skips %d outbox event(s):\n", plan.Slot, plan.From, plan.To, len(plan.Skipped))
					if err := printEvents(stdout, plan.Skipped); err != nil {
						return err
					}
				}
				q := fmt.Sprintf("Move slot %s from %s to %s, skipping %d event(s)?", plan.Slot, plan.From, plan.To, len(plan.Skipped))
				if err := confirm(yes, stdinIsTerminal(), os.Stdin, stderr, q, "slot advance"); err != nil {
					return err
				}
				end, err := operator.Advance(ctx, conn, plan)
				if err != nil {
					return err
				}
				if format == outputJSON {
					return writeJSON(stdout, struct {
						operator.AdvancePlan
						ConfirmedFlushLSN string `json:"confirmed_flush_lsn"`
					}{plan, end})
				}
				fmt.Fprintf(stdout, "advanced slot %s to %s\n", plan.Slot, end)
				return nil
			})
		})
	cmd.Flags().StringVar(&to, "to", "", "move the slot to this LSN (form 0/16B3748)")
	cmd.Flags().StringVar(&pastEvent, "past-event", "", "move the slot past the transaction holding the outbox event with this id")
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	return cmd
}
