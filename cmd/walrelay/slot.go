package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/operator"
	"github.com/walrelay/walrelay/internal/postgres"
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

// slotRecord is walrelay's record of a slot (internal/slotrecord) as slot
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
	if err := locateRecord(ctx, conn, cfg, slot); err != nil {
		return &slotRecord{Retention: "unknown: " + err.Error()}
	}
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

// slotRecords is walrelay's record of its slots: in the schema of
// postgres.table's first table.
func slotRecords(cfg config.Config) slotrecord.Table {
	return slotrecord.Table{Schema: cfg.Postgres.RecordSchema()}
}

// locateRecord refuses (a *slotrecord.MisplacedError) a record of slot
// left in the schema of a table postgres.table lists after the first (the
// list was reordered): where the commands read and write it, it would
// read as missing, and a slot be created or adopted without the proof it
// holds. conn is where the record lives (the primary).
func locateRecord(ctx context.Context, conn *pgx.Conn, cfg config.Config, slot string) error {
	return slotrecord.Locate(ctx, conn, cfg.Postgres.RecordSchema(), cfg.Postgres.Schemas(), slot)
}

// outboxTables is postgres.table's tables as schema.name.
func outboxTables(cfg config.Config) []string {
	var out []string
	for _, t := range cfg.Postgres.Tables() {
		out = append(out, t.String())
	}
	return out
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
