package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/snapshot"
)

func snapshotCommand(stdout, stderr io.Writer) *cobra.Command {
	var (
		where  string
		tables []string
		dryRun bool
	)
	cmd := adminCommand("snapshot", "Backfill: publish the outbox's rows (filtered) once, read in one snapshot",
		`Publishes the rows of the tables in postgres.publications that match --where
(default: snapshot.where; empty: every row), read in one REPEATABLE READ
snapshot in primary-key order, through the relay's router, converters,
relay.on_error and producer, exactly as walrelay run publishes an INSERT. It
waits until Kafka acknowledged every record, prints the counts and exits 0.
Progress (rows done of total, rate, ETA) goes to stderr every
snapshot.progress_interval.

It is a one-shot backfill for an existing slot (or none): it is not
coordinated with the slot's position. Nothing visible to its snapshot is
missed; a row the slot also sends (one committed after the slot's
confirmed_flush_lsn, while walrelay run streams or before it next does) is
published twice, once by each. Consumers dedupe on the "id" header. Running it
twice publishes every row twice. walrelay run's snapshot.mode=initial, not this
command, is the way to start a new slot without duplicates.

--table restricts it to the tables named (each in a configured publication),
for instance an outbox table added to postgres.table and the publication
while it already had rows: the stream publishes only the rows committed after
it was added.

--dry-run counts the rows it would publish and publishes nothing. It needs
relay.delivery=at_least_once. It holds the snapshot's xmin horizon on the
primary until it has read the last row.`, cobra.NoArgs,
		func(ctx context.Context, cmd *cobra.Command, cfg config.Config, format string, _ []string) error {
			if !cmd.Flags().Changed("where") {
				where = cfg.Snapshot.Where
			}
			log := newLogger(cfg.Log, stderr)
			r, err := relay.New(cfg, log, nil, relay.Version(readBuild().Version))
			if err != nil {
				return err
			}
			report := func(s snapshot.Status) {
				fmt.Fprintf(stderr, "snapshot: %d of %d rows, %.0f rows/s, eta %s\n", s.Done, s.Total, s.Rate, s.ETA)
			}
			res, err := r.Backfill(ctx, where, tables, dryRun, report)
			if err != nil {
				return err
			}
			if format == outputJSON {
				return writeJSON(stdout, res)
			}
			verb := "published and acknowledged"
			if dryRun {
				verb = "would be published (--dry-run)"
			}
			_, err = fmt.Fprintf(stdout, "tables: %v\nwhere: %s\nrows: %d %s in %s\n", res.Tables, dash(res.Where), res.Rows, verb, res.Elapsed.Round(time.Millisecond))
			return err
		})
	f := cmd.Flags()
	f.StringVar(&where, "where", "", "SQL boolean expression over the outbox's columns selecting the rows to publish (default: snapshot.where)")
	f.StringSliceVar(&tables, "table", nil, "publish only these published tables, schema-qualified (repeat or comma-separate; default: every published table)")
	f.BoolVar(&dryRun, "dry-run", false, "count the rows that would be published; publish nothing")
	return cmd
}
