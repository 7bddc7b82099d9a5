package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/reconcile"
)

// verify's soft memory limit (unless GOMEMLIMIT is set): a base for the
// clients and buffers, and twice an id's 32 bytes per --max-ids.
const (
	verifyMemoryBase = 48 << 20
	verifyBytesPerID = 64
)

// verifyListMax is how many ids of each list the table output shows.
const verifyListMax = 20

func verifyCommand(stdout, stderr io.Writer) *cobra.Command {
	var (
		since, until string
		margin       time.Duration
		republish    bool
		maxIDs       int
		stmtTimeout  time.Duration
		wait         time.Duration
	)
	cmd := adminCommand("verify", "Reconcile: find outbox events missing from their topics (and republish them)",
		`Reads the outbox rows whose outbox.time_column is in the window [--since,
--until) and the records of the topics they route to (with the relay's router
and converters), and reports every event that is in the table and not on its
topic (missing), on a topic with a timestamp in the window and not in the table
(unknown, informational), or on its topic more than once (duplicates,
informational). Rows the router refuses are listed as unroutable (the relay
dead-letters them per relay.on_error).

With several tables in postgres.table, every table is read (in one snapshot),
each row routed as the relay routes its table's rows, and a record is unknown
only when its id is in none of them. Records are matched by event id alone: an
id that rows of two tables share is listed under duplicates when it has a
record, and neither row is called missing.

It reads relay.dead_letter_topic too: a row not on its topic (or unroutable)
with a dead letter there is dead-lettered, with the dead letter's error class
(informational: not missing, never republished; the dead letter holds the row,
to fix and insert again: docs/runbook.md). A row the relay skipped under
relay.on_error.<class>=log is on no topic and in no dead letter: verify lists a
row whose record is over kafka.batch_max_bytes as skipped (record_too_large;
the relay's own check), and cannot tell the others (a topic's lower
max.message.bytes, topic_rejected) from missing ones, which it says when such a
policy is set.

A row is called missing only when postgres.slot confirmed its transaction
(Kafka acknowledged it): before reading, verify takes a fence (a snapshot and
the WAL position after it) and waits up to --wait for the slot to pass it. A
row not on its topic whose transaction the fence does not cover may not be on
Kafka yet: it is listed as unconfirmed (informational, never republished).
When the slot does not pass the fence in time (the relay is down, stalled or
behind), verify says so on stderr and calls nothing missing: the rows not on
their topics are not checked, and it exits 3.

A lost slot (wal_status lost), or a missing one walrelay confirmed through
(its record in walrelay_slot_positions), streams nothing: nothing is in
flight, so every row before the fence not on its topic is missing. A slot
replaced or moved past walrelay's record is verified as usual, and the report
says so (slot_state): run verify --republish over the time since the record,
then walrelay slot adopt.

--since and --until take an RFC 3339 time or a duration back from now
(default: the last hour, up to 10s before now). Records are read from the
first offset whose timestamp is at or after since - --margin (a record's
timestamp is its transaction's commit time, after the row's time) to the end
of each partition, without a consumer group.

--republish produces the missing rows again through the same router and
converters, with header walrelay.republished: true and the row's time column as
record timestamp. Consumers dedupe on the "id" header.

It writes nothing to Postgres's tables (one REPEATABLE READ READ ONLY
transaction, FETCH pages, every statement under --statement-timeout; the fence
takes a transaction id, so its commit is one WAL record) and is safe to run
from cron.
Memory is bounded by --max-ids (32 bytes per record held; more records are
read in several passes). Progress goes to stderr.

Exit status: 0 nothing missing (or, with --republish, every missing event
republished and acknowledged); 1 events missing (the report says which) or a
runtime failure; 2 bad usage; 3 not checked: the slot did not confirm the
fence within --wait and some rows are not on their topics, so they may be
missing or still in flight (run verify again once walrelay status shows the
relay streaming).`, cobra.NoArgs,
		func(ctx context.Context, _ *cobra.Command, cfg config.Config, format string, _ []string) error {
			now := time.Now()
			from, err := windowBound("--since", since, now)
			if err != nil {
				return err
			}
			to, err := windowBound("--until", until, now)
			if err != nil {
				return err
			}
			if !from.Before(to) {
				return cli.UsageError{Err: fmt.Errorf("--since %s is not before --until %s", from.Format(time.RFC3339), to.Format(time.RFC3339))}
			}
			if margin < 0 {
				return cli.UsageError{Err: fmt.Errorf("--margin %s: must not be negative", margin)}
			}
			if wait < 0 {
				return cli.UsageError{Err: fmt.Errorf("--wait %s: must not be negative", wait)}
			}
			if maxIDs < 1 {
				return cli.UsageError{Err: fmt.Errorf("--max-ids %d: must be at least 1 (records held in memory at once)", maxIDs)}
			}
			log := newLogger(cfg.Log, stderr)
			if os.Getenv("GOMEMLIMIT") == "" {
				// A soft limit from --max-ids: the GC works harder
				// near it instead of letting garbage (fetched
				// records, fetched rows) double the held ids.
				debug.SetMemoryLimit(verifyMemoryBase + verifyBytesPerID*int64(max(maxIDs, 1)))
			}
			rep, err := reconcile.Run(ctx, cfg, reconcile.Options{
				Since: from, Until: to, Margin: margin, Republish: republish,
				MaxIDs: maxIDs, StatementTimeout: stmtTimeout, Wait: wait,
			}, log)
			if err != nil {
				return err
			}
			if format == outputJSON {
				err = writeJSON(stdout, verifyJSON{Report: rep, MissingCount: len(rep.Missing), UnconfirmedCount: len(rep.Unconfirmed), UnknownCount: len(rep.Unknown), DuplicateCount: len(rep.Duplicates), NotCheckedCount: notChecked(rep)})
			} else {
				err = printVerify(stdout, rep)
			}
			if err != nil {
				return err
			}
			return verifyOutcome(rep)
		})
	// Its own exit statuses replace the operator commands' general ones.
	cmd.Long = strings.TrimSuffix(cmd.Long, "\n"+exitCodesHelp)
	f := cmd.Flags()
	f.StringVar(&since, "since", "1h", "start of the window of outbox.time_column: an RFC 3339 time, or a duration back from now")
	f.StringVar(&until, "until", "10s", "end of the window (exclusive): an RFC 3339 time, or a duration back from now")
	f.DurationVar(&margin, "margin", reconcile.DefaultMargin, "record timestamps read beyond each end of the window (a record's timestamp is its transaction's commit time)")
	f.BoolVar(&republish, "republish", false, "produce the missing events again (header walrelay.republished: true, the row's time as timestamp)")
	f.IntVar(&maxIDs, "max-ids", reconcile.DefaultMaxIDs, "records held in memory at once (32 bytes each); more are read in several passes")
	f.DurationVar(&wait, "wait", 30*time.Second, "how long to wait for postgres.slot to confirm verify's fence (rows it does not cover are unconfirmed, not missing)")
	f.DurationVar(&stmtTimeout, "statement-timeout", reconcile.DefaultStatementTimeout, "statement_timeout of each statement verify runs on Postgres")
	return cmd
}

// windowBound parses a --since or --until value: an RFC 3339 time, or a
// duration back from now.
func windowBound(flag, s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, cli.UsageError{Err: fmt.Errorf("%s %q: want an RFC 3339 time (2026-01-02T15:04:05Z) or a non-negative duration back from now (1h)", flag, s)}
	}
	return now.Add(-d), nil
}

// verifyJSON is verify's -o json: the report with the counts.
type verifyJSON struct {
	*reconcile.Report
	MissingCount     int `json:"missing_count"`
	UnconfirmedCount int `json:"unconfirmed_count"`
	UnknownCount     int `json:"unknown_count"`
	DuplicateCount   int `json:"duplicate_count"`
	NotCheckedCount  int `json:"not_checked_count"` // rows verify could not check (exit 3)
}

// errMissing is verify's exit status 1: the report already says which
// events are missing.
var errMissing = errors.New("events missing")

// errNotChecked is verify's exit status 3: the slot did not confirm the
// fence, and rows not on their topics may be missing or in flight.
var errNotChecked = errors.New("rows not checked")

// exitNotChecked is verify's exit status when rows could not be checked.
const exitNotChecked = 3

// notChecked is how many rows verify could not check: the rows not on
// their topics when the slot did not confirm the fence (all unconfirmed
// then). Rows after a fence the slot confirmed are unconfirmed too, but
// only because they are newer than the check.
func notChecked(rep *reconcile.Report) int {
	if rep.FenceConfirmed {
		return 0
	}
	return len(rep.Unconfirmed)
}

// verifyOutcome is verify's result after printing: a Reported failure when
// events are missing and were not all republished and acknowledged (1),
// or when rows could not be checked (3).
func verifyOutcome(rep *reconcile.Report) error {
	if len(rep.Missing) > 0 {
		if r := rep.Republished; r == nil || r.Acknowledged != len(rep.Missing) || len(r.Failed) != 0 {
			return cli.Reported{Err: fmt.Errorf("%d %w", len(rep.Missing), errMissing)}
		}
	}
	if n := notChecked(rep); n > 0 {
		return cli.Reported{Err: fmt.Errorf("%d %w", n, errNotChecked), Code: exitNotChecked}
	}
	return nil
}

// printVerify prints the report for a person.
func printVerify(w io.Writer, rep *reconcile.Report) error {
	var b strings.Builder
	of := rep.Table
	if len(rep.Tables) > 1 {
		of = "tables " + of
	}
	fmt.Fprintf(&b, "window: %s = [%s, %s) of %s, margin %s\n", rep.TimeColumn, rep.Since.Format(time.RFC3339), rep.Until.Format(time.RFC3339), of, rep.Margin)
	fmt.Fprintf(&b, "rows: %d  records read in the window ± margin: %d  topics: %s  passes: %d\n", rep.Rows, rep.Records, dash(strings.Join(rep.Topics, ", ")), rep.Passes)
	list := func(name string, ids []string, note string) {
		fmt.Fprintf(&b, "%s: %d%s\n", name, len(ids), note)
		for i, id := range ids {
			if i == verifyListMax {
				fmt.Fprintf(&b, "  … and %d more (-o json lists them all)\n", len(ids)-verifyListMax)
				break
			}
			fmt.Fprintf(&b, "  %s\n", id)
		}
	}
	if rep.SlotProblem != "" {
		fmt.Fprintf(&b, "slot %s: %s (walrelay's record: %s)\n  %s\n", rep.Slot, rep.SlotState, dash(rep.RecordedLSN), rep.SlotProblem)
	}
	switch {
	case rep.FenceConfirmed && (rep.SlotState == "slot_lost" || rep.SlotState == "slot_missing"):
		fmt.Fprintf(&b, "slot %s is %s: nothing is in flight, so every row before the fence at %s not on its topic is missing\n", rep.Slot, strings.TrimPrefix(rep.SlotState, "slot_"), rep.FenceLSN)
	case rep.FenceConfirmed:
		fmt.Fprintf(&b, "slot %s confirmed the fence at %s (confirmed_flush_lsn %s)\n", rep.Slot, rep.FenceLSN, rep.ConfirmedLSN)
	default:
		fmt.Fprintf(&b, "slot %s did not confirm the fence: %s\nno row can be called missing; rows not on their topics are unconfirmed\n", rep.Slot, rep.NotConfirmed)
	}
	list("missing", rep.Missing, "")
	if notChecked(rep) > 0 {
		list("unconfirmed", rep.Unconfirmed, " (not checked: the slot did not confirm the fence, so these may be missing or in flight; never republished)")
	} else {
		list("unconfirmed", rep.Unconfirmed, " (informational: the slot had not confirmed their transactions; never republished)")
	}
	list("unknown", rep.Unknown, " (informational: on a topic, not in the table)")
	list("duplicates", rep.Duplicates, " (informational: consumers dedupe on the id header)")
	if len(rep.Unroutable) > 0 {
		list("unroutable", rep.Unroutable, " (the router refuses them and no dead letter holds them: policy log or stop, see the relay's log)")
	}
	if len(rep.DeadLettered) > 0 {
		fmt.Fprintf(&b, "dead-lettered: %d (informational: on %s by relay.on_error, never republished; docs/runbook.md: \"If the events stay missing\")\n", len(rep.DeadLettered), rep.DeadLetterTopic)
		for i, d := range rep.DeadLettered {
			if i == verifyListMax {
				fmt.Fprintf(&b, "  … and %d more (-o json lists them all)\n", len(rep.DeadLettered)-verifyListMax)
				break
			}
			fmt.Fprintf(&b, "  %s %s\n", d.ID, d.Class)
		}
	}
	if len(rep.Skipped) > 0 {
		fmt.Fprintf(&b, "skipped: %d (informational: skipped by the relay under relay.on_error.<class>=log, never republished)\n", len(rep.Skipped))
		for i, d := range rep.Skipped {
			if i == verifyListMax {
				fmt.Fprintf(&b, "  … and %d more (-o json lists them all)\n", len(rep.Skipped)-verifyListMax)
				break
			}
			fmt.Fprintf(&b, "  %s %s\n", d.ID, d.Class)
		}
	}
	if rep.DeadLettersUnread != "" {
		fmt.Fprintf(&b, "dead-letter topic %s not read (rows it holds are reported missing): %s\n", rep.DeadLetterTopic, rep.DeadLettersUnread)
	}
	if note := rep.LogPolicyNote(); note != "" && len(rep.Missing) > 0 {
		fmt.Fprintf(&b, "note: %s\n", note)
	}
	if rep.RowsWithoutID > 0 {
		fmt.Fprintf(&b, "rows without an event id: %d\n", rep.RowsWithoutID)
	}
	if rep.Unparsed > 0 {
		fmt.Fprintf(&b, "records without an id header: %d\n", rep.Unparsed)
	}
	if r := rep.Republished; r != nil {
		fmt.Fprintf(&b, "republished: %d sent, %d acknowledged, %d failed\n", r.Sent, r.Acknowledged, len(r.Failed))
		for _, f := range r.Failed {
			fmt.Fprintf(&b, "  %s\n", f)
		}
	}
	switch err := verifyOutcome(rep); {
	case errors.Is(err, errMissing):
		b.WriteString("FAIL: events missing (docs/runbook.md: \"walrelay verify reports missing events\")\n")
	case errors.Is(err, errNotChecked):
		fmt.Fprintf(&b, "NOT CHECKED: %d rows not on their topics may be missing or still in flight: slot %s did not confirm the fence (is walrelay run streaming? walrelay status); run verify again once it does\n", notChecked(rep), rep.Slot)
	case len(rep.Missing) > 0:
		b.WriteString("ok: every missing event was republished\n")
	default:
		b.WriteString("ok: nothing missing\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
