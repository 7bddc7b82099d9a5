package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/operator"
)

// errCheckFailed is returned when a check item failed (exit status 1); the
// items already say what and how to fix it.
var errCheckFailed = errors.New("check failed: fix the items marked fail above")

func checkCommand(stdout io.Writer) *cobra.Command {
	return adminCommand("check", "Preflight: is Postgres and Kafka ready for walrelay run?",
		`Checks, with the configuration 'walrelay run' would use, and prints each item
as ok, warn or fail with the fix: server version; the managed service, when
the server shows one (Amazon RDS or Aurora, Cloud SQL, Azure Database for
PostgreSQL: then the fixes name its parameter, CLI command and grant);
wal_level=logical; headroom in max_replication_slots and max_wal_senders; the
role's REPLICATION attribute (on RDS, or membership in rds_replication) and
SELECT on the outbox; the outbox's partitions (a plain table, or how many
partitions up to which bound: fail when none holds now and there is no DEFAULT
partition, warn when fewer than outbox.partitions_ahead lie ahead); each
publication exists, contains the outbox table, publishes inserts, and
publishes a partitioned outbox through its root; the outbox columns match the
router config and include outbox.time_column. With several tables in
postgres.table, each table gets its own items; a listed table no publication
contains fails, a published table the list leaves out is a warning, and the
slot record item fails when the record is in the schema of a listed table
other than the first (the list was reordered); the slot
exists with plugin pgoutput in this database, or can be created;
max_slot_wal_keep_size (warn when unlimited); Kafka brokers reachable and the
routed topics (from the outbox's rows, plus the dead-letter topic) present or
creatable. With relay.delivery=exactly_once, two more: kafka transactions (the
brokers support them, and the principal may describe and write the
transactional id, which the item names) and checkpoint topic (it exists and
may be written, with a warning unless compacted, or it can be created). With
an avro converter, the schema registry: reachable, the credentials accepted
(a 401/403 told apart from a registry that is down), its mode, and for each
routed topic's subject (<topic>-key/-value, TopicNameStrategy) its
compatibility level, mode (READONLY or IMPORT fail) and latest version (a
subject without one fails when walrelay must find it there:
auto.register.schemas false or avro.schema registry). It changes nothing, and never initializes the transactional id, which would
fence a running relay. Exits 1 when any item fails.`, cobra.NoArgs,
		func(ctx context.Context, _ *cobra.Command, cfg config.Config, format string, _ []string) error {
			items := operator.Check(ctx, cfg)
			failed := operator.Failed(items)
			if format == outputJSON {
				if err := writeJSON(stdout, map[string]any{"ok": !failed, "items": items}); err != nil {
					return err
				}
			} else {
				tw := newTable(stdout)
				for _, it := range items {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", it.Status, it.Name, it.Detail)
					if it.Fix != "" {
						fmt.Fprintf(tw, "\t\tfix: %s\n", it.Fix)
					}
				}
				if err := tw.Flush(); err != nil {
					return err
				}
			}
			if failed {
				return errCheckFailed
			}
			return nil
		})
}
