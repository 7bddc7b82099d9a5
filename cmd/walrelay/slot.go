package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/operator"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/router"
	"github.com/walrelay/walrelay/internal/slotrecord"
)

func slotCommand(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "slot",
		Short: "List, inspect, create, drop, peek at, advance, adopt and heal replication slots",
		Long: `Operates on logical replication slots with the same configuration as
'walrelay run' (postgres.dsn, postgres.publications, the router options).` + "\n" + exitCodesHelp,
		Args: usageArgs(cobra.NoArgs),
		RunE: needsSubcommand,
	}
	cmd.AddCommand(
		slotListCommand(stdout),
		slotInspectCommand(stdout),
		slotCreateCommand(stdout),
		slotDropCommand(stdout, stderr),
		slotPeekCommand(stdout),
		slotAdvanceCommand(stdout, stderr),
		slotAdoptCommand(stdout),
		slotHealCommand(stdout, stderr),
	)
	return cmd
}

// adminCommand builds a leaf command with the config flags and -o; run
// gets the loaded config and the output format.
func adminCommand(use, short, long string, args cobra.PositionalArgs, run func(ctx context.Context, cmd *cobra.Command, cfg config.Config, format string, args []string) error) *cobra.Command {
	var format *string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long + "\n" + exitCodesHelp,
		Args:  usageArgs(args),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(*format); err != nil {
				return err
			}
			cfg, err := loadConfig(cmd.Flags())
			if err != nil {
				return err
			}
			return run(cmd.Context(), cmd, cfg, *format, args)
		},
	}
	format = addOutputFlag(cmd)
	config.BindFlags(cmd.Flags())
	return cmd
}

func slotListCommand(stdout io.Writer) *cobra.Command {
	return adminCommand("list", "List the server's replication slots with their lag and holder",
		`Prints every replication slot: plugin, database, whether it is active, the
holder's pid and client address, restart_lsn and confirmed_flush_lsn with the
bytes from each to pg_current_wal_lsn(), wal_status, safe_wal_size and whether
it is temporary.`, cobra.NoArgs,
		func(ctx context.Context, _ *cobra.Command, cfg config.Config, format string, _ []string) error {
			return queryAndPrint(ctx, cfg.Postgres.DSN, stdout, format,
				func(conn *pgx.Conn) (slotList, error) {
					slots, err := postgres.ListSlots(ctx, conn)
					return slotList{slots}, err
				},
				printSlots)
		})
}

// slotList is what slot list prints.
type slotList struct {
	Slots []postgres.Slot `json:"slots"`
}

// printSlots prints the slots as a table.
func printSlots(stdout io.Writer, list slotList) error {
	slots := list.Slots
	tw := newTable(stdout)
	fmt.Fprintln(tw, "NAME\tPLUGIN\tDATABASE\tACTIVE\tPID\tCLIENT\tRESTART_LSN\tRESTART_LAG\tCONFIRMED_FLUSH_LSN\tCONFIRMED_LAG\tWAL_STATUS\tSAFE_WAL_SIZE\tTEMPORARY")
	for _, s := range slots {
		pid := "-"
		if s.ActivePID != 0 {
			pid = strconv.Itoa(int(s.ActivePID))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, dash(s.Plugin), dash(s.Database), yesNo(s.Active), pid,
			dash(s.ClientAddr), dash(s.RestartLSN), lagText(s.RestartLagBytes), dash(s.ConfirmedFlushLSN), lagText(s.ConfirmedFlushLagBytes),
			dash(s.WALStatus), safeSize(s.SafeWALSizeBytes), yesNo(s.Temporary))
	}
	if len(slots) == 0 {
		fmt.Fprintln(tw, "(no replication slots)")
	}
	return tw.Flush()
}

// yesNoNull is yes or no, or "-" for a column the server does not have
// (failover and synced before PostgreSQL 17).
func yesNoNull(b *bool) string {
	if b == nil {
		return "-"
	}
	return yesNo(*b)
}

// failoverText is ", a failover slot" for a failover slot, for the line
// slot create prints.
func failoverText(s postgres.Slot) string {
	if s.Failover != nil && *s.Failover {
		return ", a failover slot"
	}
	return ""
}

func safeSize(n *int64) string {
	if n == nil {
		return "unlimited"
	}
	return postgres.HumanBytes(*n)
}

// printSlot prints one slot as "field  value" lines.
func printSlot(w io.Writer, s postgres.Slot, problem string) error {
	tw := newTable(w)
	pid := "-"
	if s.ActivePID != 0 {
		pid = strconv.Itoa(int(s.ActivePID))
	}
	lag := func(lsn string, n *int64) string {
		if n == nil {
			return dash(lsn)
		}
		return fmt.Sprintf("%s  (%s behind current_lsn: %d bytes)", lsn, postgres.HumanBytes(*n), *n)
	}
	for _, kv := range [][2]string{
		{"slot", s.Name},
		{"plugin", dash(s.Plugin)},
		{"slot_type", s.SlotType},
		{"database", dash(s.Database)},
		{"active", yesNo(s.Active)},
		{"active_pid", pid},
		{"client_addr", dash(s.ClientAddr)},
		{"client_application", dash(s.ClientApplication)},
		{"restart_lsn", lag(s.RestartLSN, s.RestartLagBytes)},
		{"confirmed_flush_lsn", lag(s.ConfirmedFlushLSN, s.ConfirmedFlushLagBytes)},
		{"current_lsn", s.CurrentLSN},
		{"wal_status", dash(s.WALStatus)},
		{"safe_wal_size", safeSize(s.SafeWALSizeBytes)},
		{"temporary", yesNo(s.Temporary)},
		{"failover", yesNoNull(s.Failover)},
		{"synced", yesNoNull(s.Synced)},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", kv[0], kv[1])
	}
	if problem != "" {
		fmt.Fprintf(tw, "note\t%s\n", problem)
	}
	return tw.Flush()
}

func slotInspectCommand(stdout io.Writer) *cobra.Command {
	return adminCommand("inspect NAME", "Show one replication slot in detail",
		`Prints one slot: plugin, database, active, the holder's pid and client
address, restart_lsn and confirmed_flush_lsn with the bytes from each to
pg_current_wal_lsn(), wal_status, safe_wal_size, temporary, and (PostgreSQL
17+) failover and synced: whether Postgres copies the slot to standbys, and
whether this is such a copy on a standby. A slot walrelay cannot use (another
plugin or database) is shown with a note saying why.`, cobra.ExactArgs(1),
		func(ctx context.Context, _ *cobra.Command, cfg config.Config, format string, args []string) error {
			if err := slotArg(args[0]); err != nil {
				return err
			}
			return queryAndPrint(ctx, cfg.Postgres.DSN, stdout, format,
				func(conn *pgx.Conn) (inspectedSlot, error) {
					s, err := postgres.InspectSlot(ctx, conn, args[0])
					if err != nil {
						return inspectedSlot{}, err
					}
					db, err := postgres.CurrentDatabase(ctx, conn)
					if err != nil {
						return inspectedSlot{}, err
					}
					return inspectedSlot{Slot: s, Problem: s.Problem(db), Record: recordOf(ctx, conn, cfg, args[0])}, nil
				},
				func(w io.Writer, s inspectedSlot) error {
					if err := printSlot(w, s.Slot, s.Problem); err != nil {
						return err
					}
					return printRecord(w, s.Record)
				})
		})
}

// inspectedSlot is what slot inspect prints: the slot, why walrelay
// cannot use it, if it cannot, and walrelay's record of it.
type inspectedSlot struct {
	postgres.Slot
	Problem string      `json:"problem,omitempty"`
	Record  *slotRecord `json:"walrelay_record,omitempty"`
}

// slotRecord is walrelay's record of a slot (pkg/slotrecord) as slot
// inspect shows it, and whether it proves the slot's position to
// retention (Retention: "ok", or the refusal).
type slotRecord struct {
	ConfirmedLSN  string     `json:"confirmed_lsn,omitempty"`
	CreatedLSN    string     `json:"created_lsn,omitempty"`
	UpdatedAt     *time.Time `json:"updated_at,omitempty"`
	Note          string     `json:"note,omitempty"`
	JumpedAt      *time.Time `json:"jumped_at,omitempty"`
	Jump          string     `json:"jump,omitempty"`
	JumpedFromLSN string     `json:"jumped_from_lsn,omitempty"`
	AdoptedAt     *time.Time `json:"adopted_at,omitempty"`
	AdoptedBy     string     `json:"adopted_by,omitempty"`
	// JumpAccepted: slot create --accept-gap accepted the jump (walrelay
	// run relays on). CoveredFenceLSN is the newest fence the record
	// covers (a heal republishes the rows after it); Timeline the WAL
	// timeline the relay last recorded on.
	JumpAccepted    bool   `json:"jump_accepted,omitempty"`
	CoveredFenceLSN string `json:"covered_fence_lsn,omitempty"`
	Timeline        uint32 `json:"timeline,omitempty"`
	Retention       string `json:"retention"`
}

// recordOf reads walrelay's record of slot; a record that cannot be read
// (the role may not) says so in Retention.
func recordOf(ctx context.Context, conn *pgx.Conn, cfg config.Config, slot string) *slotRecord {
	st, err := slotrecord.Read(ctx, conn, slotRecords(cfg), slot)
	if err != nil {
		return &slotRecord{Retention: "unknown: " + err.Error()}
	}
	out := &slotRecord{Retention: "ok: prunes by this slot's position"}
	if _, err := st.Unproven(); err != nil {
		out.Retention = "refuses: " + err.Error()
	}
	if r := st.Record; r != nil {
		at := r.UpdatedAt
		out.ConfirmedLSN, out.UpdatedAt, out.Note, out.JumpedAt, out.Jump, out.AdoptedAt, out.AdoptedBy =
			r.Confirmed.String(), &at, r.Note, r.JumpedAt, r.Jump, r.AdoptedAt, r.AdoptedBy
		if r.Created != 0 {
			out.CreatedLSN = r.Created.String()
		}
		if r.JumpedAt != nil {
			out.JumpedFromLSN = r.JumpedFrom.String()
		}
		out.JumpAccepted, out.Timeline = r.Accepted, r.Timeline
		if f := st.HealFence(); f != nil {
			out.CoveredFenceLSN = f.LSN.String()
		}
	}
	return out
}

// printRecord prints walrelay's record of the slot below the slot.
func printRecord(w io.Writer, r *slotRecord) error {
	if r == nil {
		return nil
	}
	tw := newTable(w)
	if r.ConfirmedLSN != "" {
		fmt.Fprintf(tw, "walrelay_record\tconfirmed_lsn %s, updated %s\n", r.ConfirmedLSN, r.UpdatedAt.UTC().Format(time.RFC3339))
		if r.Note != "" {
			fmt.Fprintf(tw, "record_note\t%s\n", r.Note)
		}
		if r.JumpedAt != nil {
			fmt.Fprintf(tw, "jumped\t%s: %s (record was at %s)\n", r.JumpedAt.UTC().Format(time.RFC3339), r.Jump, r.JumpedFromLSN)
			if r.JumpAccepted {
				fmt.Fprintf(tw, "jump_accepted\tyes (walrelay slot create --accept-gap): walrelay run relays on\n")
			}
		}
		if r.CoveredFenceLSN != "" {
			fmt.Fprintf(tw, "covered_fence\t%s (a heal republishes the outbox rows after it)\n", r.CoveredFenceLSN)
		}
		if r.AdoptedAt != nil {
			fmt.Fprintf(tw, "adopted\t%s by %s\n", r.AdoptedAt.UTC().Format(time.RFC3339), r.AdoptedBy)
		}
	}
	fmt.Fprintf(tw, "retention\t%s\n", r.Retention)
	return tw.Flush()
}

func slotCreateCommand(stdout io.Writer) *cobra.Command {
	var replace, acceptGap bool
	var failoverNote string // why postgres.slot_failover=auto left failover off
	cmd := adminCommand("create NAME", "Create a logical replication slot with plugin pgoutput",
		`Creates a logical slot for walrelay (plugin pgoutput) in the database of
postgres.dsn, and records it in walrelay's record of its slots
(walrelay_slot_positions in postgres.table's schema, created when missing). The
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
					var gap *slotGap
					if accept {
						// The gap, read before the new slot exists.
						st, err := slotrecord.Read(ctx, conn, slotRecords(cfg), args[0])
						if err == nil && st.Record != nil && !st.SlotExists {
							gap = &slotGap{RecordLSN: st.Record.Confirmed.String(), Rows: -1}
							if n, bounded, err := slotrecord.GapRows(ctx, conn, cfg.Postgres.Table, st); err == nil {
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
			r, err := relay.New(cfg, newLogger(cfg.Log, stderr), nil)
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

// slotRecords is walrelay's record of its slots: in postgres.table's
// schema.
func slotRecords(cfg config.Config) slotrecord.Table {
	schema, _, _ := config.SplitTable(cfg.Postgres.Table) // validated
	return slotrecord.Table{Schema: schema}
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

func slotDropCommand(stdout, stderr io.Writer) *cobra.Command {
	var yes, force bool
	cmd := adminCommand("drop NAME", "Drop a replication slot (destructive)",
		`Drops a slot of this database. Postgres then frees the WAL it kept, and the
events it had not delivered can no longer be streamed: a relay using it starts
over from a new slot. A slot in use is refused unless --force, which terminates
the process holding it first. Needs --yes when stdin is not a terminal, and
asks (y/N) when it is.`, cobra.ExactArgs(1),
		func(ctx context.Context, _ *cobra.Command, cfg config.Config, format string, args []string) error {
			if err := slotArg(args[0]); err != nil {
				return err
			}
			return withConn(ctx, cfg.Postgres.DSN, func(conn *pgx.Conn) error {
				s, err := postgres.InspectSlot(ctx, conn, args[0])
				if err != nil {
					return err
				}
				if s.Active && !force {
					// Refuse before asking: the answer would not matter.
					_, err := operator.DropSlot(ctx, conn, args[0], false)
					return err
				}
				q := fmt.Sprintf("Drop slot %s (confirmed_flush_lsn %s, %s of WAL kept)?", s.Name, dash(s.ConfirmedFlushLSN), lagText(s.RestartLagBytes))
				if s.Active {
					q = fmt.Sprintf("Terminate pid %d holding slot %s and drop the slot (confirmed_flush_lsn %s)?", s.ActivePID, s.Name, dash(s.ConfirmedFlushLSN))
				}
				if err := confirm(yes, stdinIsTerminal(), os.Stdin, stderr, q, "slot drop"); err != nil {
					return err
				}
				dropped, err := operator.DropSlot(ctx, conn, args[0], force)
				if err != nil {
					return err
				}
				if format == outputJSON {
					return writeJSON(stdout, map[string]any{"dropped": dropped})
				}
				fmt.Fprintf(stdout, "dropped slot %s (it was at confirmed_flush_lsn %s)\n", dropped.Name, dash(dropped.ConfirmedFlushLSN))
				return nil
			})
		})
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	cmd.Flags().BoolVar(&force, "force", false, "terminate the process holding the slot, then drop it")
	return cmd
}

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

// withConn connects to dsn, runs f with the connection and closes it.
func withConn(ctx context.Context, dsn string, f func(*pgx.Conn) error) error {
	conn, err := connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return f(conn)
}

// queryAndPrint connects to dsn, gets a value with get and prints it to w:
// as JSON with -o json, else with text.
func queryAndPrint[T any](ctx context.Context, dsn string, w io.Writer, format string, get func(*pgx.Conn) (T, error), text func(io.Writer, T) error) error {
	return withConn(ctx, dsn, func(conn *pgx.Conn) error {
		v, err := get(conn)
		if err != nil {
			return err
		}
		if format == outputJSON {
			return writeJSON(w, v)
		}
		return text(w, v)
	})
}
