package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/partition"
	"github.com/walrelay/walrelay/internal/retention"
)

func outboxCommand(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "outbox",
		Short: "Maintain the outbox tables: remove rows past outbox.retention",
		Long: `Operates on the outbox tables (every table of postgres.table) with the same
configuration as 'walrelay run'.` + "\n" + exitCodesHelp,
		Args: usageArgs(cobra.NoArgs),
		RunE: needsSubcommand,
	}
	cmd.AddCommand(outboxPruneCommand(stdout, stderr))
	return cmd
}

func outboxPruneCommand(stdout, stderr io.Writer) *cobra.Command {
	var dryRun bool
	var wait time.Duration
	cmd := adminCommand("prune", "Remove outbox rows older than outbox.retention that the slot confirmed",
		`Removes the outbox rows whose outbox.time_column is older than
outbox.retention, and only rows whose transactions the slot (postgres.slot)
has confirmed, i.e. that Kafka acknowledged: it takes a fence (a snapshot,
then the WAL insert position), waits up to --wait for the slot's
confirmed_flush_lsn to pass it, then deletes in batches of outbox.prune_batch
rows, each statement with outbox.prune_statement_timeout. On a partitioned
outbox it detaches the partitions whose upper bound is older than the
retention, takes a second fence, waits for it too and drops them (never the
DEFAULT partition), and creates the partitions outbox.partitions_ahead
ahead that are missing. With several tables in postgres.table, the same
fences serve every table, each pruned by its own kind (plain or
partitioned), and the summary has a line per table (-o json: "tables",
with "table" the comma-separated list). 'walrelay run' does the same every
outbox.prune_interval.

It refuses a slot that is missing, not a pgoutput slot of this database, or
invalidated, and one whose position walrelay's record of it
(walrelay_slot_positions) does not prove: no record yet, or the slot was
recreated, replaced or moved past the record and nobody ran walrelay slot
adopt since (docs/runbook.md, "The slot was lost, dropped or recreated").
It exits 1 saying why then, and when the slot does not pass the fence
in time (the relay is down, stalled or behind). --dry-run reports what would
go and removes nothing.`, cobra.NoArgs,
		func(ctx context.Context, _ *cobra.Command, cfg config.Config, format string, _ []string) error {
			if cfg.Outbox.Retention <= 0 {
				return cli.UsageError{Err: fmt.Errorf("outbox.retention is 0 (keep every row): set it, e.g. --outbox.retention 168h or WALRELAY_OUTBOX_RETENTION=168h")}
			}
			if wait < 0 {
				return cli.UsageError{Err: fmt.Errorf("--wait %s: want 0 or more", wait)}
			}
			rc := retention.FromConfig(cfg)
			rc.DryRun = dryRun
			p := retention.New(rc, nil, retention.Metrics{})
			defer p.Close(context.WithoutCancel(ctx))
			if format == outputTable && !dryRun {
				var last time.Time
				p.OnProgress = func(pr retention.Progress) {
					if time.Since(last) < time.Second {
						return
					}
					last = time.Now()
					fmt.Fprintf(stderr, "%s: removed %d rows so far in %d batches (%s)\n", pr.Table, pr.Rows, pr.Batches, rate(pr.Rows, pr.Elapsed))
				}
			}
			// Partitions ahead first: their lack fails inserts now, and
			// creating them needs no confirmation.
			var created []string
			if !dryRun {
				parts, err := partition.NewMaintainer(cfg, slog.New(slog.DiscardHandler)).Round(ctx)
				if err != nil {
					return fmt.Errorf("creating the outbox's partitions ahead: %w", err)
				}
				for _, pt := range parts {
					created = append(created, pt.Schema+"."+pt.Name)
				}
				if len(created) > 0 && format == outputTable {
					fmt.Fprintf(stdout, "created partitions ahead: %s\n", strings.Join(created, ", "))
				}
			}
			res, err := p.Once(ctx, wait)
			if err != nil {
				if format == outputTable && (res.Rows > 0 || len(res.Dropped)+len(res.Detached) > 0) {
					printPrune(stdout, res, dryRun)
				}
				return err
			}
			if format == outputJSON {
				return writeJSON(stdout, struct {
					retention.Result
					Created []string `json:"partitions_created"`
					DryRun  bool     `json:"dry_run"`
					Seconds float64  `json:"seconds"`
				}{res, created, dryRun, res.Took.Seconds()})
			}
			printPrune(stdout, res, dryRun)
			return nil
		})
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "report what would be removed; remove nothing")
	cmd.Flags().DurationVar(&wait, "wait", 30*time.Second, "how long to wait for the slot to confirm the fence")
	return cmd
}

// printPrune prints a prune's summary: a line per outbox table (with its
// detached and dropped partitions when partitioned), each with the fence
// and the slot's position.
func printPrune(w io.Writer, res retention.Result, dryRun bool) {
	verb, detached, dropped := "removed", "detached", "dropped"
	if dryRun {
		verb, detached, dropped = "would remove", "would detach", "would drop"
	}
	for _, t := range res.Tables {
		if !t.Partitioned {
			fmt.Fprintf(w, "%s: %s %d rows in %d batches (%s in all, deleting at %s); fence %s, slot confirmed_flush_lsn %s\n",
				t.Table, verb, t.Rows, t.Batches, res.Took.Round(time.Millisecond), rate(t.Rows, t.Deleting), dash(res.FenceLSN), res.ConfirmedLSN)
			continue
		}
		fmt.Fprintf(w, "%s (partitioned): %s %d partition(s), %s %d; fence %s, slot confirmed_flush_lsn %s\n",
			t.Table, detached, len(t.Detached), dropped, len(t.Dropped), dash(res.FenceLSN), res.ConfirmedLSN)
		if len(t.Detached) > 0 {
			fmt.Fprintf(w, "%s: %s\n", detached, strings.Join(t.Detached, ", "))
		}
		if len(t.Dropped) > 0 {
			fmt.Fprintf(w, "%s: %s\n", dropped, strings.Join(t.Dropped, ", "))
		}
	}
}

// rate formats rows per second.
func rate(rows int64, d time.Duration) string {
	if d <= 0 {
		return "- rows/s"
	}
	return fmt.Sprintf("%.0f rows/s", float64(rows)/d.Seconds())
}
