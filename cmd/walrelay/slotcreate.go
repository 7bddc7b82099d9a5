// walrelay slot create, heal and adopt: the subcommands that make a slot
// walrelay's own, with its record (internal/slotrecord).

package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/slotrecord"
)

func slotCreateCommand(stdout io.Writer) *cobra.Command {
	var replace, acceptGap bool
	var failoverNote string // why postgres.slot_failover=auto left failover off
	cmd := adminCommand("create NAME", "Create a logical replication slot with plugin pgoutput",
		`Creates a logical slot for walrelay (plugin pgoutput) in the database of
postgres.dsn, and records it in walrelay's record of its slots
(walrelay_slot_positions in the schema of postgres.table's first table, created
when missing; a record of the slot in another listed table's schema is
refused). The
slot keeps WAL from now on until a relay confirms it: drop slots nobody reads.
Needs the REPLICATION attribute.

A slot of this name that walrelay confirmed through before (it was dropped, or
lost and dropped) is refused: a new slot starts at the current WAL, after the
rows the old one had not delivered. Two ways on: walrelay slot heal (or
outbox.on_slot_loss: heal) creates it again and republishes those rows from the
outbox table; or --accept-gap (an explicit decision: the rows committed after
the record and not published stay unpublished) creates it anyway, reports the
gap (the record's position, the new slot's, and how many outbox rows after the
record's last covered fence may be in it) and marks the record replaced, so
that retention stays stopped; then start walrelay run, run walrelay verify
--republish over the time since the record, and walrelay slot adopt NAME.
--replace is the same as --accept-gap.

With postgres.slot_failover (auto by default) the slot is a failover slot on
a PostgreSQL 17+ primary: Postgres copies it to standbys running with
sync_replication_slots=on, so it survives a failover (docs/deploy.md,
Failover slots). postgres.slot_failover=true refuses a server that cannot
have one; false never makes one.`, cobra.ExactArgs(1),
		func(ctx context.Context, _ *cobra.Command, cfg config.Config, format string, args []string) error {
			if err := slotArg(args[0]); err != nil {
				return err
			}
			return queryAndPrint(ctx, cfg.Postgres.DSN, stdout, format,
				func(conn *pgx.Conn) (createdSlot, error) {
					if err := refuseOldServer(conn, "slot create"); err != nil {
						return createdSlot{}, err
					}
					// postgres.slot_failover=true on a server that cannot
					// have a failover slot (a standby included) is refused
					// before anything is created.
					failover, why, err := postgres.SlotFailover(ctx, conn, cfg.Postgres.SlotFailover)
					if err != nil {
						return createdSlot{}, fmt.Errorf("%w (nothing was created)", err)
					}
					failoverNote = why
					accept := replace || acceptGap
					if cfg.Postgres.PrimaryDSN != "" {
						s, err := createOnStandby(ctx, cfg, conn, args[0], accept)
						return createdSlot{Slot: s}, err
					}
					if err := locateRecord(ctx, conn, cfg, args[0]); err != nil {
						return createdSlot{}, fmt.Errorf("%w (nothing was created)", err)
					}
					var gap *slotGap
					if accept {
						// The gap, read before the new slot exists.
						st, err := slotrecord.Read(ctx, conn, slotRecords(cfg), args[0])
						if err == nil && st.Record != nil && !st.SlotExists {
							gap = &slotGap{RecordLSN: st.Record.Confirmed.String(), Rows: -1}
							if n, bounded, err := slotrecord.GapRows(ctx, conn, outboxTables(cfg), st); err == nil {
								gap.Rows, gap.Bounded = n, bounded
							}
						}
					}
					s, _, err := postgres.CreateRecordedSlot(ctx, conn, slotRecords(cfg), args[0], accept, failover)
					if gap != nil {
						gap.SlotLSN = s.ConfirmedFlushLSN
					}
					return createdSlot{Slot: s, Gap: gap}, err
				},
				func(w io.Writer, c createdSlot) error {
					s := c.Slot
					fmt.Fprintf(w, "created slot %s (pgoutput, database %s) at %s%s\n", s.Name, s.Database, s.ConfirmedFlushLSN, failoverText(s))
					if failoverNote != "" {
						fmt.Fprintf(w, "not a failover slot: %s\n", failoverNote)
					}
					if g := c.Gap; g != nil {
						rows := "the outbox rows in it cannot be counted (the record holds no fence usable on this server)"
						switch {
						case g.Rows >= 0 && g.Bounded:
							rows = fmt.Sprintf("at most %d outbox rows committed in it (those after the record's last covered fence; some were published)", g.Rows)
						case g.Rows >= 0:
							rows = fmt.Sprintf("no fence bounds it: the outbox holds %d rows, any of which may be in it", g.Rows)
						}
						fmt.Fprintf(w, "gap accepted: walrelay's record was at %s, the new slot starts at %s; %s. They are not relayed: walrelay verify --republish finds and republishes them while they are in the table\n", g.RecordLSN, g.SlotLSN, rows)
					}
					if replace || acceptGap {
						fmt.Fprintf(w, "retention stays stopped until you run walrelay verify --republish and walrelay slot adopt %s\n", s.Name)
					}
					return nil
				})
		})
	cmd.Flags().BoolVar(&acceptGap, "accept-gap", false, "create a slot walrelay confirmed through before, accepting that the rows committed since its record and not published are not relayed (the gap is reported; retention stays stopped until walrelay slot adopt)")
	cmd.Flags().BoolVar(&replace, "replace", false, "the same as --accept-gap")
	return cmd
}

// createOnStandby is slot create when decoding from a standby
// (postgres.primary_dsn): the slot on the standby (conn), asking the
// primary for running-transactions records meanwhile, its record on the
// primary.
func createOnStandby(ctx context.Context, cfg config.Config, conn *pgx.Conn, name string, replace bool) (postgres.Slot, error) {
	primary, err := connect(ctx, cfg.Postgres.PrimaryDSN)
	if err != nil {
		return postgres.Slot{}, err
	}
	defer primary.Close(context.WithoutCancel(ctx))
	if err := locateRecord(ctx, primary, cfg, name); err != nil {
		return postgres.Slot{}, fmt.Errorf("%w (nothing was created)", err)
	}
	s, _, err := postgres.CreateRecordedSlotOnStandby(ctx, primary, conn, slotRecords(cfg), name, replace, func(ctx context.Context) {
		postgres.LogStandbySnapshots(ctx, cfg.Postgres.PrimaryDSN, time.Second, nil)
	})
	return s, err
}

// createdSlot is what slot create prints: the slot and, with
// --accept-gap, the gap accepted.
type createdSlot struct {
	postgres.Slot
	Gap *slotGap `json:"gap,omitempty"`
}

// slotGap is the gap slot create --accept-gap accepted: from the record's
// position to the new slot's start; Rows the outbox rows after the
// record's covered fence (Bounded), or every row (not Bounded); -1 when
// they could not be counted.
type slotGap struct {
	RecordLSN string `json:"record_lsn"`
	SlotLSN   string `json:"slot_lsn"`
	Rows      int64  `json:"rows"`
	Bounded   bool   `json:"bounded_by_fence"`
}

func slotHealCommand(stdout, stderr io.Writer) *cobra.Command {
	return adminCommand("heal", "Heal a missing, lost or jumped slot from the outbox table, then exit",
		`Does what walrelay run does at start with outbox.on_slot_loss: heal, and exits:
when postgres.slot is missing or lost (wal_status lost) after walrelay
confirmed through it, or was moved past walrelay's record, it creates the slot
again (a lost one is dropped first; a jumped one is kept) and, before the slot
exists, publishes from the outbox table the rows walrelay's record does not
prove delivered: those that do not precede the newest fence the record
confirmed (every row when it has none). It waits for Kafka to acknowledge them,
Rows whose event id is already on the topic they route to are skipped
(read from the oldest such row's outbox.time_column minus 5m). It waits for Kafka to
acknowledge the rest, records the heal, and prints what it did. Start walrelay
run afterwards: it streams from the healed slot.

Nothing still in the table is lost; duplicates are left only where the
deduplication cannot find a record (more than 1,000,000 rows after the fence,
no time column, a broker not answering within 2m). Rows deleted from the table (an
application that deletes its outbox row in the same transaction, an operator's
DELETE) cannot be healed. With relay.delivery=exactly_once the rows go into
Kafka transactions of walrelay's transactional producer (fenced first, so the
deduplication reads everything committed), with a checkpoint at the slot's
new position. walrelay run must not be running.`, cobra.NoArgs,
		func(ctx context.Context, _ *cobra.Command, cfg config.Config, format string, _ []string) error {
			cfg.Outbox.OnSlotLoss = config.SlotLossHeal
			r, err := relay.New(cfg, newLogger(cfg.Log, stderr), nil, relay.Version(readBuild().Version))
			if err != nil {
				return err
			}
			res, err := r.Heal(ctx)
			if err != nil {
				return err
			}
			if format == outputJSON {
				return writeJSON(stdout, res)
			}
			verb := "found it"
			if res.Created {
				verb = "created it"
			}
			_, err = fmt.Fprintf(stdout, "healed slot %s (%s): %s at %s; republished %d outbox rows after fence %s (record was at %s); %d more were on Kafka already\n",
				res.Slot, res.What, verb, res.SlotLSN, res.Rows, dash(res.FenceLSN), dash(res.RecordLSN), res.OnKafka)
			return err
		})
}

func slotAdoptCommand(stdout io.Writer) *cobra.Command {
	var by string
	cmd := adminCommand("adopt NAME", "Accept a replaced or moved slot's position as walrelay's own (after walrelay verify)",
		`Records the slot's current confirmed_flush_lsn as the position walrelay
confirmed through it, and clears the mark walrelay put on its record when it
found the slot replaced (recreated, failed over) or moved past the record by
someone else. Retention, stopped since (walrelay_retention_blocked), resumes.

Run it only after walrelay verify --republish over the time since the record
(the error that stopped retention names the window) reported nothing missing:
the rows committed between the record and the slot's position were never
streamed by this slot. It notes who adopted the slot (--by, default the
database role) and when.`, cobra.ExactArgs(1),
		func(ctx context.Context, _ *cobra.Command, cfg config.Config, format string, args []string) error {
			if err := slotArg(args[0]); err != nil {
				return err
			}
			records := slotRecords(cfg)
			if cfg.Postgres.PrimaryDSN != "" {
				// Decoding from a standby: the record on the primary, the
				// slot read on the standby.
				standby, err := connect(ctx, cfg.Postgres.DSN)
				if err != nil {
					return err
				}
				defer standby.Close(context.WithoutCancel(ctx))
				records.Slots = standby
			}
			return withConn(ctx, cfg.Postgres.Primary(), func(conn *pgx.Conn) error {
				if err := locateRecord(ctx, conn, cfg, args[0]); err != nil {
					return err
				}
				before, after, err := postgres.AdoptSlot(ctx, conn, records, args[0], by)
				if err != nil {
					return err
				}
				if format == outputJSON {
					return writeJSON(stdout, map[string]any{"before": before, "after": after})
				}
				was := "no record"
				if r := before.Record; r != nil {
					was = "record at " + r.Confirmed.String()
					if r.JumpedAt != nil {
						was += " (" + r.Jump + ")"
					}
				}
				fmt.Fprintf(stdout, "adopted slot %s at %s (was: %s); retention resumes\n", args[0], after.SlotConfirmed, was)
				return nil
			})
		})
	cmd.Aliases = []string{"acknowledge"}
	cmd.Flags().StringVar(&by, "by", "", "who adopts the slot, noted in the record (default: the database role)")
	return cmd
}
