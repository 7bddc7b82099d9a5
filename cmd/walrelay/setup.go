package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/pkg/admin"
	"github.com/walrelay/walrelay/pkg/config"
	"github.com/walrelay/walrelay/pkg/setup"
)

func setupCommand(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "setup",
		Short: "Create the outbox table, publication and slot (idempotent)",
		Long: `Creates what is missing of postgres.table (from sql/001_outbox_table.sql),
the first of postgres.publications (INSERTs only) and postgres.slot (pgoutput),
and reports what it created and what already existed. The role needs to be
able to create tables and publications and to have REPLICATION.

With outbox.partitioned=true the table is created partitioned by range of
created_at (sql/outbox_partitioned.sql), with the partition holding now and
outbox.partitions_ahead more (outbox.partition_interval wide), and the
publication publishes through the partition root.

With snapshot.mode=initial a missing slot is left to walrelay run, which
creates it once it has published the rows already in the outbox (a slot
created here would mean walrelay run never snapshots).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd.Flags())
			if err != nil {
				return err
			}
			schema, table, _ := config.SplitTable(cfg.Postgres.Table) // validated
			conn, err := connect(cmd.Context(), cfg.Postgres.DSN)
			if err != nil {
				return err
			}
			defer conn.Close(cmd.Context())
			if err := refuseOldServer(conn, "setup"); err != nil {
				return err
			}
			names := setup.Names{
				Schema: schema, Table: table,
				Publication: cfg.Postgres.Publications[0],
				Slot:        cfg.Postgres.Slot,
				LeaveSlot:   cfg.Snapshot.Initial(),
			}
			if cfg.Outbox.Partitioned {
				names.Partitions = &setup.Partitions{Column: cfg.Outbox.TimeColumn, Interval: cfg.Outbox.PartitionInterval, Ahead: cfg.Outbox.PartitionsAhead}
			}
			steps, err := setup.Run(cmd.Context(), conn, names)
			for _, s := range steps {
				fmt.Fprintln(stdout, s)
			}
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "55000" {
				// wal_level below logical: check's cause and fix.
				return admin.ExplainSlotError(cmd.Context(), conn, cfg.Postgres.Slot, err)
			}
			if errors.As(err, &pgErr) && pgErr.Code == "42501" {
				return fmt.Errorf("%w (walrelay setup needs CREATE on the schema and the database, ownership of the table, and REPLICATION: see docs/deploy.md, or have a DBA run sql/001-003 by hand)", err)
			}
			return err
		},
	}
	config.BindFlags(cmd.Flags())
	_ = stderr
	return cmd
}
