// Package retention removes old outbox rows, and never one whose
// transaction the replication slot has not confirmed: Kafka has not
// acknowledged it, and a row deleted then could not be found again by
// walrelay verify.
//
// In: the outbox table, its time column, postgres.slot and the
// outbox.retention, prune_batch and prune_statement_timeout options (a
// Config); a normal connection. Out: DELETEs of at most Batch rows each
// on a plain outbox, DETACH and DROP of whole partitions on a partitioned
// one, a Result per pass, and the metrics walrelay_outbox_rows_pruned_total,
// walrelay_outbox_partitions_dropped_total,
// walrelay_outbox_oldest_row_age_seconds and
// walrelay_outbox_table_size_bytes (internal/metrics).
//
// Why it is safe: a row carries no commit LSN, so retention takes a Fence
// (a snapshot, then the WAL insert position L) and removes only rows whose
// xmin precedes the snapshot's xmin, once the slot's confirmed_flush_lsn
// is at or past L; a partition is detached first, which waits for every
// transaction that wrote to it, and dropped only once a fence taken after
// the detach is confirmed. The proof is in docs/DESIGN.md, "Retention";
// the fence is internal/txfence's.
// Pruner.Run uses the newest fence an earlier pass took that the slot has
// confirmed since, so it never waits; Pruner.Once (walrelay outbox prune)
// takes a fence and waits, bounded, for the slot to pass it.
//
// It refuses to remove anything when the slot is missing, not a pgoutput
// slot of the outbox's database, or invalidated. It does not create
// partitions (internal/partition does) and does not relay anything.
package retention

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/txfence"
)

// Config is what a Pruner removes and how.
type Config struct {
	// DSN is a normal connection string; the role needs DELETE on the
	// outbox (and ownership of it for partitions).
	DSN string
	// Schema, Table name the outbox (postgres.table).
	Schema, Table string
	// TimeColumn is outbox.time_column, the rows' age.
	TimeColumn string
	// Slot is postgres.slot, whose confirmed_flush_lsn decides.
	Slot string
	// SlotDSN, when set, is the hot standby that holds the slot (decoding
	// from a standby: postgres.dsn, with DSN postgres.primary_dsn): the
	// slot is read there, everything else (fences, the record, the
	// outbox) on DSN. The fence's WAL position is the primary's, which
	// the standby replays and its slot confirms.
	SlotDSN string
	// Retention is outbox.retention: rows (partitions) older than this go.
	Retention time.Duration
	// Batch is outbox.prune_batch, rows per DELETE.
	Batch int
	// StatementTimeout is outbox.prune_statement_timeout, the
	// statement_timeout of every statement retention runs.
	StatementTimeout time.Duration
	// Interval is outbox.prune_interval, between two passes of Run.
	Interval time.Duration
	// DryRun counts and lists what would go and removes nothing.
	DryRun bool
}

// FromConfig returns the Config of c (c is validated).
func FromConfig(c config.Config) Config {
	first := c.Postgres.Tables()[0]
	schema, table := first.Schema, first.Name
	out := Config{
		DSN: c.Postgres.Primary(), Schema: schema, Table: table, TimeColumn: c.Outbox.TimeColumn, Slot: c.Postgres.Slot,
		Retention: c.Outbox.Retention, Batch: c.Outbox.PruneBatch, StatementTimeout: c.Outbox.PruneStatementTimeout,
		Interval: c.Outbox.PruneInterval,
	}
	if c.Postgres.PrimaryDSN != "" {
		out.SlotDSN = c.Postgres.DSN
	}
	return out
}

// Metrics are the collectors a Pruner updates; any may be nil.
type Metrics struct {
	RowsPruned        prometheus.Counter
	PartitionsDropped prometheus.Counter
	OldestRowAge      prometheus.Gauge
	TableSize         prometheus.Gauge
	// Blocked is walrelay_retention_blocked{reason}.
	Blocked *prometheus.GaugeVec
}

// Result is what one pass did (or, with DryRun, would do).
type Result struct {
	// Table is the outbox, schema.table.
	Table string `json:"table"`
	// Partitioned: the outbox is a partitioned table.
	Partitioned bool `json:"partitioned"`
	// Fence is the fence the pass removed by; nil when no fence was
	// confirmed yet (nothing was removed).
	Fence *txfence.Fence `json:"fence,omitempty"`
	// FenceLSN is the fence's WAL position, ConfirmedLSN the slot's.
	FenceLSN     string `json:"fence_lsn,omitempty"`
	ConfirmedLSN string `json:"confirmed_flush_lsn"`
	// Rows removed (DryRun: that would be), in Batches DELETE statements.
	Rows    int64 `json:"rows"`
	Batches int   `json:"batches"`
	// Detached partitions are waiting for a confirmed fence to be dropped;
	// Dropped were dropped.
	Detached []string `json:"detached"`
	Dropped  []string `json:"dropped"`
	// Waiting says why nothing could be removed yet ("" when something
	// could).
	Waiting string `json:"waiting,omitempty"`
	// Took is how long the pass ran; Deleting how much of it the DELETE
	// batches took.
	Took     time.Duration `json:"-"`
	Deleting time.Duration `json:"-"`
}

// Progress is reported after each batch.
type Progress struct {
	Rows    int64
	Batches int
	Elapsed time.Duration
}

// Pruner removes outbox rows past the retention. Its methods must not be
// called concurrently.
type Pruner struct {
	cfg     Config
	table   string // quoted
	timeCol string // quoted
	marker  string
	log     *slog.Logger
	m       Metrics

	conn     *pgx.Conn
	slots    *pgx.Conn       // the standby's, with SlotDSN
	fences   []txfence.Fence // taken, not yet confirmed or the newest confirmed, oldest first
	seq      int             // of the last fence taken
	detached map[uint32]int  // detached partition → the first fence seq taken after it was seen detached
	// OnProgress, when set, is called after each DELETE batch.
	OnProgress func(Progress)
}

// maxFences bounds the fences kept while the slot is behind: with the
// slot that far behind, no new fence is taken until the oldest is
// confirmed (so progress is certain; the fences just get further apart).
const maxFences = 64

// New returns a Pruner for cfg. It does not connect.
func New(cfg Config, log *slog.Logger, m Metrics) *Pruner {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Pruner{
		cfg:      cfg,
		table:    pgx.Identifier{cfg.Schema, cfg.Table}.Sanitize(),
		timeCol:  pgx.Identifier{cfg.TimeColumn}.Sanitize(),
		marker:   detachedMarker(cfg.Schema+"."+cfg.Table, cfg.Slot),
		log:      log,
		m:        m,
		detached: map[uint32]int{},
	}
}

// Close closes the Pruner's connection.
func (p *Pruner) Close(ctx context.Context) {
	if p.conn != nil {
		_ = p.conn.Close(ctx)
		p.conn = nil
	}
	if p.slots != nil {
		_ = p.slots.Close(ctx)
		p.slots = nil
	}
}

// slotConn is the connection the slot is read on: conn, or with SlotDSN
// the Pruner's connection to the standby.
func (p *Pruner) slotConn(ctx context.Context, conn *pgx.Conn) (*pgx.Conn, error) {
	if p.cfg.SlotDSN == "" {
		return conn, nil
	}
	if p.slots != nil && !p.slots.IsClosed() {
		return p.slots, nil
	}
	c, err := postgres.Connect(ctx, p.cfg.SlotDSN)
	if err != nil {
		return nil, fmt.Errorf("connecting to the standby holding the slot: %w", err)
	}
	p.slots = c
	return c, nil
}

// connect opens the connection when there is none, with
// statement_timeout set for the session.
func (p *Pruner) connect(ctx context.Context) (*pgx.Conn, error) {
	if p.conn != nil && !p.conn.IsClosed() {
		return p.conn, nil
	}
	conn, err := postgres.Connect(ctx, p.cfg.DSN)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf(`SET statement_timeout = %d; SET application_name = 'walrelay retention'`, p.cfg.StatementTimeout.Milliseconds())); err != nil {
		_ = conn.Close(ctx)
		return nil, fmt.Errorf("setting statement_timeout: %w", err)
	}
	p.conn = conn
	return conn, nil
}

// fail closes the connection after an error, so the next pass starts on
// a fresh one.
func (p *Pruner) fail(ctx context.Context, err error) error {
	if err != nil {
		p.Close(context.WithoutCancel(ctx))
	}
	return err
}

// MetricsOf picks the retention collectors of walrelay's metrics (m may
// be nil: no metrics).
func MetricsOf(m *metrics.Metrics) Metrics {
	if m == nil {
		return Metrics{}
	}
	return Metrics{RowsPruned: m.OutboxRowsPruned, PartitionsDropped: m.OutboxPartitionsDropped, OldestRowAge: m.OutboxOldestRowAge, TableSize: m.OutboxTableSize,
		Blocked: m.RetentionBlocked}
}
