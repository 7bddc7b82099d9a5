package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/setup"
)

func setupCommand(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "setup",
		Short: "Create the outbox table, publication and slot (idempotent)",
		Long: `Creates what is missing of the tables of postgres.table (each from
sql/001_outbox_table.sql), the first of postgres.publications (INSERTs only,
for every listed table) and postgres.slot (pgoutput), and reports what it
created and what already existed. The role needs to be able to create tables
and publications and to have REPLICATION. walrelay's record of its slots
(walrelay_slot_positions) goes in the schema of the first listed table.

A table listed later is added to the existing publication (ALTER PUBLICATION
... ADD TABLE, one line per table; the role must own the table): a running
walrelay run streams its rows from then on, and the other tables' rows are not
affected. setup first waits, at most 10s, for the transactions writing the
table to end (LOCK TABLE ... IN SHARE MODE, in the ALTER's transaction; new
writers of that table wait meanwhile), so that none has rows written before
the addition that the stream would not carry; if they do not end, that table
is not added and setup fails naming them: run it again. What the table held
before is not streamed: setup warns with their count and window (walrelay
verify --republish over it, or walrelay snapshot, publishes them), and of a
server of a minor release that can lose rows written across the addition.

With outbox.partitioned=true the table is created partitioned by range of
created_at (sql/outbox_partitioned.sql), with the partition holding now and
outbox.partitions_ahead more (outbox.partition_interval wide), and the
publication publishes through the partition root.

With postgres.primary_dsn (decoding from a standby, Postgres 16+), the table,
the publication and walrelay's slot records are created on the primary it
names, and the slot on the hot standby postgres.dsn names, once the standby has
replayed the publication; walrelay asks the primary for running-transactions
records (pg_log_standby_snapshot) meanwhile, without which the creation waits.
A standby as postgres.dsn without postgres.primary_dsn is refused.

With snapshot.mode=initial a missing slot is left to walrelay run, which
creates it once it has published the rows already in the outbox (a slot
created here would mean walrelay run never snapshots).

With postgres.slot_failover (auto by default) on a PostgreSQL 17+ primary
the slot is created as a failover slot, and an existing slot without
failover is switched on (docs/deploy.md, Failover slots); true refuses a
server that cannot have one, false leaves failover alone.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd.Flags())
			if err != nil {
				return err
			}
			conn, err := connect(cmd.Context(), cfg.Postgres.Primary())
			if err != nil {
				return err
			}
			defer conn.Close(cmd.Context())
			if err := refuseOldServer(conn, "setup"); err != nil {
				return err
			}
			standby, err := setupStandby(cmd.Context(), cfg, conn)
			if err != nil {
				return err
			}
			slotConn := conn
			if standby != nil {
				defer standby.Conn.Close(cmd.Context())
				slotConn = standby.Conn
			}
			// postgres.slot_failover=true on a server that cannot have
			// a failover slot (a standby the slot is decoded on
			// included) is refused before anything is created. (auto
			// where the server cannot leaves the slot as before:
			// walrelay check and run say why.)
			failover, _, err := postgres.SlotFailover(cmd.Context(), slotConn, cfg.Postgres.SlotFailover)
			if err != nil {
				return fmt.Errorf("%w (nothing was created)", err)
			}
			names := setup.Names{
				Tables:      cfg.Postgres.Tables(),
				Publication: cfg.Postgres.Publications[0],
				Slot:        cfg.Postgres.Slot,
				TimeColumn:  cfg.Outbox.TimeColumn,
				LeaveSlot:   cfg.Snapshot.Initial(),
				Standby:     standby,
				Failover:    failover,
			}
			if cfg.Outbox.Partitioned {
				names.Partitions = &setup.Partitions{Column: cfg.Outbox.TimeColumn, Interval: cfg.Outbox.PartitionInterval, Ahead: cfg.Outbox.PartitionsAhead}
			}
			steps, err := setup.Run(cmd.Context(), conn, names)
			for _, s := range steps {
				fmt.Fprintln(stdout, s)
			}
			var pgErr *pgconn.PgError
			var addErr *setup.AddTableError
			if errors.As(err, &addErr) && errors.As(err, &pgErr) && pgErr.Code == "42501" {
				return fmt.Errorf("%w (the role must own the table to add it to the publication, and the publication: run walrelay setup as their owner, or have it run BEGIN; LOCK TABLE %s IN SHARE MODE; ALTER PUBLICATION %s ADD TABLE %s; COMMIT: the lock waits for the transactions writing the table, whose earlier rows would not be streamed)",
					err, addErr.Quoted, pgx.Identifier{addErr.Publication}.Sanitize(), addErr.Quoted)
			}
			if errors.As(err, &pgErr) && pgErr.Code == "55000" {
				// wal_level below logical: check's cause and fix.
				return postgres.ExplainSlotError(cmd.Context(), conn, cfg.Postgres.Slot, err)
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

// setupStandby is, with postgres.primary_dsn (decoding from a standby),
// the hot standby postgres.dsn names, where setup creates the slot; nil
// without it. It refuses, before anything is created, a postgres.dsn that
// is not a standby of the primary, a standby older than 16, and a standby
// as postgres.dsn without postgres.primary_dsn (setup would fail there
// with CREATE TABLE in a read-only transaction).
func setupStandby(ctx context.Context, cfg config.Config, primary *pgx.Conn) (*setup.Standby, error) {
	if cfg.Postgres.PrimaryDSN == "" {
		standby, err := postgres.StandbyDecoding(ctx, primary)
		switch {
		case err != nil:
			return nil, fmt.Errorf("setup: %w (nothing was created)", err)
		case standby:
			return nil, errors.New("setup: postgres.dsn is a hot standby, where nothing can be created: set postgres.primary_dsn to its primary (the outbox objects are created there, the slot on the standby; docs/deploy.md, \"Decoding from a standby\") (nothing was created)")
		}
		return nil, nil
	}
	if standby, err := postgres.StandbyDecoding(ctx, primary); err != nil || standby {
		return nil, errors.New("setup: postgres.primary_dsn is in recovery: point it at the primary (nothing was created)")
	}
	conn, err := connect(ctx, cfg.Postgres.DSN)
	if err != nil {
		return nil, err
	}
	standby, err := postgres.StandbyDecoding(ctx, conn)
	if err == nil && !standby {
		err = errors.New("postgres.primary_dsn is set but postgres.dsn is not a hot standby: point postgres.dsn at the standby, or empty postgres.primary_dsn")
	}
	if err == nil {
		var a, b string
		err = primary.QueryRow(ctx, `SELECT system_identifier::text FROM pg_control_system()`).Scan(&a)
		if err == nil {
			err = conn.QueryRow(ctx, `SELECT system_identifier::text FROM pg_control_system()`).Scan(&b)
		}
		if err == nil && a != b {
			err = fmt.Errorf("postgres.dsn (system %s) is not a standby of postgres.primary_dsn (system %s)", b, a)
		}
	}
	if err != nil {
		_ = conn.Close(ctx)
		return nil, fmt.Errorf("setup: %w (nothing was created)", err)
	}
	return &setup.Standby{Conn: conn, Nudge: func(ctx context.Context) {
		postgres.LogStandbySnapshots(ctx, cfg.Postgres.PrimaryDSN, time.Second, nil)
	}}, nil
}
