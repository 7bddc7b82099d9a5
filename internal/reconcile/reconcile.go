package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/kafkaconf"
	"github.com/walrelay/walrelay/internal/router"
	"github.com/walrelay/walrelay/internal/txfence"
)

// HeaderRepublished is the header a republished record carries, with the
// value "true", so consumers and a later verify can tell it from the
// relay's own.
const HeaderRepublished = "walrelay.republished"

// headerEventID is the header that carries the event id: Debezium's
// EventRouter always adds it first, and so does internal/router.
const headerEventID = "id"

// Defaults of Options.
const (
	DefaultMargin           = 5 * time.Minute
	DefaultMaxIDs           = 2_000_000
	DefaultPageRows         = 5000
	DefaultStatementTimeout = 30 * time.Second
)

// Options says which window to verify and how.
type Options struct {
	// Since and Until bound the window of outbox.time_column: rows with
	// Since <= time < Until are verified. Required, Since before Until.
	Since, Until time.Time
	// Margin widens the record timestamps read on both sides of the
	// window: a record's timestamp is its transaction's commit time, later
	// than the row's time column by the transaction's duration (default
	// DefaultMargin).
	Margin time.Duration
	// Republish produces every missing row again.
	Republish bool
	// Wait is how long verify waits for postgres.slot to confirm the fence
	// it takes before reading (0: it looks once). Rows are called missing
	// only when the slot confirmed it.
	Wait time.Duration
	// MaxIDs bounds the records held at once (32 bytes each); more are
	// split into passes (default DefaultMaxIDs).
	MaxIDs int
	// PageRows is the rows fetched per statement (default DefaultPageRows).
	PageRows int
	// StatementTimeout is the statement_timeout of every statement verify
	// runs (default DefaultStatementTimeout).
	StatementTimeout time.Duration
	// ProgressEvery is how many rows or records pass between progress
	// lines (0: 100000).
	ProgressEvery int64
}

// Report is what verify found. The id lists are sorted; they are never
// nil, so that JSON shows [] for none.
type Report struct {
	Since  time.Time `json:"since"`
	Until  time.Time `json:"until"`
	Margin string    `json:"margin"`
	// Tables are the tables of postgres.table, quoted, in list order;
	// Table is them joined with ", " (one table: its name alone).
	Tables     []string `json:"tables"`
	Table      string   `json:"table"`
	TimeColumn string   `json:"time_column"`
	// Topics are the topics the window's rows route to.
	Topics []string `json:"topics"`
	// Rows is the rows in the window.
	Rows int64 `json:"rows"`
	// Records is the records read whose timestamp is within the window
	// widened by the margin on both sides.
	Records int64 `json:"records"`
	// Unparsed counts records read without an event id header.
	Unparsed int64 `json:"unparsed_records"`
	// Passes is how many times the topics and the rows were read (see
	// Options.MaxIDs), and MaxHeld the most records one pass held.
	Passes  int `json:"passes"`
	MaxHeld int `json:"max_held"`
	// Slot is postgres.slot. FenceLSN is the WAL position of the fence
	// verify took before reading (internal/txfence), ConfirmedLSN the slot's
	// confirmed_flush_lsn when verify last looked.
	Slot         string `json:"slot"`
	FenceLSN     string `json:"fence_lsn"`
	ConfirmedLSN string `json:"confirmed_flush_lsn"`
	// FenceConfirmed is whether the slot confirmed the fence within
	// Options.Wait. Without it nothing is called missing (nothing proves
	// any row's transaction reached Kafka), and NotConfirmed says why:
	// where the slot and the fence are, and what to look at.
	FenceConfirmed bool   `json:"fence_confirmed"`
	NotConfirmed   string `json:"not_confirmed,omitempty"`
	// SlotState is what walrelay's record of the slot (internal/slotrecord)
	// says of its position: "ok" (a position walrelay confirmed),
	// "slot_jumped" (replaced or moved past the record), "slot_lost",
	// "slot_missing" (lost or missing with a record: nothing streams from
	// it, so nothing is in flight and the fence counts as confirmed: every
	// row before it not on its topic is missing) or "no_record".
	// SlotProblem says what was found and what to run; RecordedLSN is the
	// record's position ("" without one).
	SlotState   string `json:"slot_state"`
	SlotProblem string `json:"slot_problem,omitempty"`
	RecordedLSN string `json:"recorded_lsn,omitempty"`
	// Missing are the event ids of rows in the window with no record on
	// their topic whose transactions the slot confirmed (Kafka
	// acknowledged them).
	Missing []string `json:"missing"`
	// Unconfirmed are the event ids of rows in the window with no record
	// on their topic whose transactions the slot had not confirmed when
	// verify read: the relay may not have published them yet
	// (informational; never republished).
	Unconfirmed []string `json:"unconfirmed"`
	// Unknown are the event ids of records with a timestamp in the window
	// and no row in the table (informational: e.g. rows deleted by
	// retention, or produced by something else).
	Unknown []string `json:"unknown"`
	// Duplicates are the event ids, of rows in the window or unknown, with
	// more than one record (informational: at-least-once delivery), and
	// the ids of rows of two tables (two modules reusing ids) that have a
	// record: records are matched by id alone, so one record counts as
	// seen for both rows, and neither is called missing.
	Duplicates []string `json:"duplicates"`
	// Unroutable are the event ids of rows the router refuses (or whose
	// topic relay.topic_pattern refuses): the relay dead-letters, logs or
	// stops on them per relay.on_error, so they are not looked for.
	Unroutable []string `json:"unroutable"`
	// DeadLetterTopic is relay.dead_letter_topic, and DeadLettered the
	// rows of the window not on their topic (or unroutable) with a dead
	// letter there: the relay did not publish them, by design
	// (relay.on_error dlq). They are not missing and never republished:
	// the dead letter holds the row, to be fixed and inserted again.
	DeadLetterTopic   string         `json:"dead_letter_topic"`
	DeadLettered      []DeadLettered `json:"dead_lettered"`
	DeadLetteredCount int            `json:"dead_lettered_count"`
	// Skipped are the rows of the window the relay skipped by policy:
	// relay.on_error.record_too_large=log and a record over
	// kafka.batch_max_bytes (the relay's own check, which verify repeats).
	// Not missing, never republished.
	Skipped []DeadLettered `json:"skipped"`
	// DeadLettersUnread says why the dead-letter topic could not be read
	// ("" when it was): its rows are then reported missing.
	DeadLettersUnread string `json:"dead_letters_unread,omitempty"`
	// SkippedByLogClasses are the error classes whose relay.on_error
	// policy is log and that verify cannot foresee by routing a row: a row
	// skipped under them cannot be told from a missing one (see
	// LogPolicyNote).
	SkippedByLogClasses []string `json:"skipped_by_log_classes,omitempty"`
	// RowsWithoutID counts rows whose event id is NULL.
	RowsWithoutID int64 `json:"rows_without_id"`
	// Republished is what --republish sent; nil without it.
	Republished *Republished `json:"republished,omitempty"`
}

// Republished is the outcome of republishing the missing rows.
type Republished struct {
	// Sent is the records produced; Acknowledged those the brokers
	// acknowledged.
	Sent         int `json:"sent"`
	Acknowledged int `json:"acknowledged"`
	// Failed are "id: error" for each record not acknowledged.
	Failed []string `json:"failed"`
}

// entry is a record held for matching: 32 bytes.
type entry struct {
	k    key
	ms   int64 // record timestamp, Unix milliseconds
	text int32 // 1 + index of the id's text when it is not a UUID; 0 for a UUID
	// matched: a row of the window with this id has counted this
	// record as its own. Rows take a group's records in order, so the
	// group's first record is matched when any row has the id.
	matched bool
}

// verifier holds one run's state.
type verifier struct {
	cfg     config.Config
	opts    Options
	log     *slog.Logger
	pattern interface{ MatchString(string) bool }
	// tables are postgres.table's, each with its own plan: every pass
	// reads each of them in the one REPEATABLE READ transaction.
	tables []*outbox
	kopts  []kgo.Opt
	rep    *Report
	repub  *republisher
	fw     *fenceWindow // nil when no fence is confirmed
	// slots is the connection the slot is read on: the one the outbox is
	// read and the fence taken on, or when decoding from a standby
	// (postgres.primary_dsn) a connection to the standby (postgres.dsn),
	// while the rest goes to the primary: a fence needs an xid and the
	// WAL insert position, which only a primary has, and its position is
	// in the WAL the standby replays and its slot confirms.
	slots *pgx.Conn
	// dead maps the event ids on the dead-letter topic to their class.
	dead map[string]string
}

// Run verifies the window in opts against the topics and returns the
// report. An error means verify could not finish (nothing is reported).
func Run(ctx context.Context, cfg config.Config, opts Options, log *slog.Logger) (*Report, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rt, err := router.New(cfg.Router, cfg.Converter)
	if err != nil {
		return nil, fmt.Errorf("configuring router: %w", err)
	}
	if opts.Republish {
		// An avro converter's key and value carry the schema registry's
		// id, which only the relay resolves (internal/relay, avro.go):
		// republished from here they would carry id 0 (or the payload's
		// JSON with avro.schema registry), and avro keys would land on
		// other partitions.
		_, keyAvro := rt.Avro(true)
		if _, valueAvro := rt.Avro(false); keyAvro || valueAvro {
			return nil, errors.New("--republish is not implemented for the avro converter (its records need the schema registry's ids, which only walrelay run resolves): run verify without it, and republish the missing rows by inserting them again into the outbox")
		}
	}
	v := &verifier{cfg: cfg, opts: opts, log: log}
	if re, err := cfg.Relay.TopicRegexp(); err != nil {
		return nil, fmt.Errorf("relay.topic_pattern: %w", err)
	} else if re != nil {
		v.pattern = re
	}
	if v.kopts, err = kafkaconf.ClientOpts(cfg.Kafka, kafkaconf.Options{DialTimeout: kafkaconf.ShortDial}); err != nil {
		return nil, err
	}
	conn, err := connectReadOnly(ctx, cfg.Postgres.Primary(), opts.StatementTimeout)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	v.slots = conn
	if cfg.Postgres.PrimaryDSN != "" {
		if v.slots, err = connectReadOnly(ctx, cfg.Postgres.DSN, opts.StatementTimeout); err != nil {
			return nil, err
		}
		defer v.slots.Close(context.WithoutCancel(ctx))
	}
	if v.tables, err = describeAll(ctx, conn, cfg, rt); err != nil {
		return nil, err
	}
	var names []string
	for _, o := range v.tables {
		names = append(names, o.quoted)
	}
	v.rep = &Report{
		Since: opts.Since.UTC(), Until: opts.Until.UTC(), Margin: opts.Margin.String(),
		Tables: names, Table: strings.Join(names, ", "), TimeColumn: cfg.Outbox.TimeColumn, Slot: cfg.Postgres.Slot,
		Topics: []string{}, Missing: []string{}, Unconfirmed: []string{}, Unknown: []string{}, Duplicates: []string{}, Unroutable: []string{},
		DeadLetterTopic: cfg.Relay.DeadLetterTopic, DeadLettered: []DeadLettered{}, Skipped: []DeadLettered{}, SkippedByLogClasses: logPolicyClasses(cfg.Relay.OnError),
	}
	// The fence first, and the slot's confirmation of it: the rows'
	// snapshot and the topics are read after it.
	fence, err := v.fence(ctx, conn)
	if err != nil {
		return nil, err
	}
	// One snapshot for every pass: the passes see the same rows, and the
	// topics' end offsets are listed after it was taken, so a row it
	// holds that the relay had published is in the records read.
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("starting a read-only transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if v.rep.FenceConfirmed {
		x32, window, err := txfence.Window(ctx, tx, fence)
		if err != nil {
			return nil, err
		}
		v.fw = &fenceWindow{x32: x32, window: window}
	}
	candidates, err := v.verify(ctx, tx)
	if err != nil {
		return nil, err
	}
	if err := tx.Rollback(ctx); err != nil {
		return nil, fmt.Errorf("ending the read-only transaction: %w", err)
	}
	if err := v.unknown(ctx, conn, candidates); err != nil {
		return nil, err
	}
	if v.repub != nil {
		r, err := v.repub.finish(ctx)
		if err != nil {
			return nil, err
		}
		v.rep.Republished = r
	} else if opts.Republish {
		v.rep.Republished = &Republished{Failed: []string{}}
	}
	for _, l := range [][]string{v.rep.Missing, v.rep.Unconfirmed, v.rep.Unknown, v.rep.Duplicates, v.rep.Unroutable} {
		slices.Sort(l)
	}
	// An id of rows of two tables with several records is found by each
	// row: listed once.
	v.rep.Duplicates = slices.Compact(v.rep.Duplicates)
	sortDeadLettered(v.rep.DeadLettered)
	sortDeadLettered(v.rep.Skipped)
	v.rep.DeadLetteredCount = len(v.rep.DeadLettered)
	return v.rep, nil
}

// fill defaults and checks the options.
func (o *Options) fill() error {
	if o.Since.IsZero() || o.Until.IsZero() || !o.Since.Before(o.Until) {
		return fmt.Errorf("the window [%s, %s) is empty: since must be before until", o.Since.Format(time.RFC3339), o.Until.Format(time.RFC3339))
	}
	if o.Wait < 0 {
		return fmt.Errorf("wait %s: must not be negative", o.Wait)
	}
	if o.Margin < 0 {
		return fmt.Errorf("margin %s: must not be negative", o.Margin)
	}
	if o.Margin == 0 {
		o.Margin = DefaultMargin
	}
	if o.MaxIDs <= 0 {
		o.MaxIDs = DefaultMaxIDs
	}
	if o.PageRows <= 0 {
		o.PageRows = DefaultPageRows
	}
	if o.StatementTimeout <= 0 {
		o.StatementTimeout = DefaultStatementTimeout
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 100_000
	}
	return nil
}
