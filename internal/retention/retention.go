// Package retention removes old outbox rows, and never one whose
// transaction the replication slot has not confirmed: Kafka has not
// acknowledged it, and a row deleted then could not be found again by
// walrelay verify.
//
// In: the outbox tables (every table of postgres.table), their time
// column, postgres.slot and the outbox.retention, prune_batch and
// prune_statement_timeout options (a Config); a normal connection. Out:
// DELETEs of at most Batch rows each on a plain outbox table, DETACH and
// DROP of whole partitions on a partitioned one (each table by its own
// kind: a relay's tables may mix both), a Result per pass with a part per
// table, and the metrics walrelay_outbox_rows_pruned_total,
// walrelay_outbox_partitions_dropped_total,
// walrelay_outbox_oldest_row_age_seconds and
// walrelay_outbox_table_size_bytes, labelled by table (internal/metrics).
//
// Why it is safe: a row carries no commit LSN, so retention takes a Fence
// (a snapshot, then the WAL insert position L) and removes only rows whose
// xmin precedes the snapshot's xmin, once the slot's confirmed_flush_lsn
// is at or past L; a partition is detached first, which waits for every
// transaction that wrote to it, and dropped only once a fence taken after
// the detach is confirmed. The proof is in docs/DESIGN.md, "Retention";
// the fence is internal/txfence's. A fence (an xid and a WAL position) is
// the whole server's, not a table's, so a pass takes one fence and reads
// the slot and walrelay's record of it (in the first table's schema,
// config.Postgres.RecordSchema) once, then removes from every table by it;
// one table's failure (missing, a statement timeout, published by none of
// the publications) does not stop the others, and the pass returns every
// table's error.
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
	"strings"
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
	// Tables are the outbox tables (postgres.table, every entry, in its
	// order). When empty, Schema and Table name the one outbox.
	Tables []config.TableName
	// Schema, Table name the one outbox when Tables is empty.
	Schema, Table string
	// RecordSchema is the schema of walrelay_slot_positions
	// (config.Postgres.RecordSchema); empty: the first table's schema.
	RecordSchema string
	// TimeColumn is outbox.time_column, the rows' age.
	TimeColumn string
	// Slot is postgres.slot, whose confirmed_flush_lsn decides.
	Slot string
	// Publications are postgres.publications, the ones the relay streams
	// (empty: walrelay_outbox, the default). Each pass removes only from
	// the tables they publish: the slot's position says nothing about the
	// rows of a table the relay does not stream.
	Publications []string
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
	out := Config{
		DSN: c.Postgres.Primary(), Tables: c.Postgres.Tables(), RecordSchema: c.Postgres.RecordSchema(), TimeColumn: c.Outbox.TimeColumn, Slot: c.Postgres.Slot,
		Publications: c.Postgres.Publications, Retention: c.Outbox.Retention, Batch: c.Outbox.PruneBatch, StatementTimeout: c.Outbox.PruneStatementTimeout,
		Interval: c.Outbox.PruneInterval,
	}
	if c.Postgres.PrimaryDSN != "" {
		out.SlotDSN = c.Postgres.DSN
	}
	return out
}

// tables is Tables, or the one table Schema and Table name.
func (c Config) tables() []config.TableName {
	if len(c.Tables) > 0 {
		return c.Tables
	}
	return []config.TableName{{Schema: c.Schema, Name: c.Table}}
}

// recordSchema is RecordSchema, or the first table's schema.
func (c Config) recordSchema() string {
	if c.RecordSchema != "" {
		return c.RecordSchema
	}
	return c.tables()[0].Schema
}

// Metrics are the collectors a Pruner updates, each by label table
// ("schema.name"); any may be nil.
type Metrics struct {
	RowsPruned        *prometheus.CounterVec
	PartitionsDropped *prometheus.CounterVec
	OldestRowAge      *prometheus.GaugeVec
	TableSize         *prometheus.GaugeVec
	// Blocked is walrelay_retention_blocked{reason}.
	Blocked *prometheus.GaugeVec
}

// Result is what one pass did (or, with DryRun, would do): the fence and
// the slot, the sums over the tables, and each table's part in Tables.
type Result struct {
	// Table is the outbox tables, schema.table, joined with commas (one
	// table: its name, as before there could be several).
	Table string `json:"table"`
	// Tables is what the pass did to each table, in postgres.table's
	// order.
	Tables []TableResult `json:"tables"`
	// Partitioned: a table of the outbox (the outbox, when there is one)
	// is a partitioned table.
	Partitioned bool `json:"partitioned"`
	// Fence is the fence the pass removed by; nil when no fence was
	// confirmed yet (nothing was removed).
	Fence *txfence.Fence `json:"fence,omitempty"`
	// FenceLSN is the fence's WAL position, ConfirmedLSN the slot's.
	FenceLSN     string `json:"fence_lsn,omitempty"`
	ConfirmedLSN string `json:"confirmed_flush_lsn"`
	// Rows removed (DryRun: that would be), in Batches DELETE statements,
	// summed over the tables.
	Rows    int64 `json:"rows"`
	Batches int   `json:"batches"`
	// Detached partitions are waiting for a confirmed fence to be dropped;
	// Dropped were dropped (every table's, in table order).
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

// TableResult is what one pass did to one outbox table.
type TableResult struct {
	// Table is the table, schema.table.
	Table string `json:"table"`
	// Partitioned: the table is partitioned (partitions are detached
	// and dropped; rows are deleted otherwise).
	Partitioned bool `json:"partitioned"`
	// Rows removed (DryRun: that would be), in Batches DELETE statements.
	Rows    int64 `json:"rows"`
	Batches int   `json:"batches"`
	// Detached and Dropped partitions of the table, as in Result.
	Detached []string `json:"detached"`
	Dropped  []string `json:"dropped"`
	// Deleting is how long its DELETE batches took.
	Deleting time.Duration `json:"-"`
}

// sum sets the totals of r from its tables.
func (r *Result) sum() {
	r.Rows, r.Batches, r.Deleting, r.Partitioned = 0, 0, 0, false
	r.Detached, r.Dropped = []string{}, []string{}
	for _, t := range r.Tables {
		r.Rows += t.Rows
		r.Batches += t.Batches
		r.Deleting += t.Deleting
		r.Partitioned = r.Partitioned || t.Partitioned
		r.Detached = append(r.Detached, t.Detached...)
		r.Dropped = append(r.Dropped, t.Dropped...)
	}
}

// Progress is reported after each batch.
type Progress struct {
	// Table is the table the batch deleted from; Rows and Batches are
	// that table's so far.
	Table   string
	Rows    int64
	Batches int
	Elapsed time.Duration
}

// Pruner removes outbox rows past the retention. Its methods must not be
// called concurrently.
type Pruner struct {
	cfg     Config
	tables  []outboxTable
	timeCol string // quoted
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
	p := &Pruner{
		cfg:      cfg,
		timeCol:  pgx.Identifier{cfg.TimeColumn}.Sanitize(),
		log:      log,
		m:        m,
		detached: map[uint32]int{},
	}
	for _, t := range cfg.tables() {
		p.tables = append(p.tables, outboxTable{
			name:   t.String(),
			quoted: pgx.Identifier{t.Schema, t.Name}.Sanitize(),
			marker: detachedMarker(t.String(), cfg.Slot),
		})
	}
	return p
}

// outboxTable is one outbox table a Pruner removes from.
type outboxTable struct {
	name   string // schema.table, as postgres.table lists it
	quoted string
	marker string // the comment on its partitions retention detached (detachedMarker)
}

// names is the tables' names joined with commas (Result.Table).
func (p *Pruner) names() string {
	names := make([]string, len(p.tables))
	for i, t := range p.tables {
		names[i] = t.name
	}
	return strings.Join(names, ",")
}

// newResult is a Result with a part per table, nothing done yet.
func (p *Pruner) newResult() Result {
	res := Result{Table: p.names(), Detached: []string{}, Dropped: []string{}}
	for _, t := range p.tables {
		res.Tables = append(res.Tables, TableResult{Table: t.name, Detached: []string{}, Dropped: []string{}})
	}
	return res
}

// kinds reads whether each table is partitioned into res.Tables and
// returns which tables can be pruned (ok[i]) and the errors of those that
// cannot (missing, partitioned otherwise than by range of the time
// column, or published by none of the publications: ErrNotPublished):
// those are left alone this pass, the others pruned.
func (p *Pruner) kinds(ctx context.Context, conn *pgx.Conn, res *Result) (ok []bool, errs []error) {
	ok = make([]bool, len(p.tables))
	for i, t := range p.tables {
		partitioned, err := tableKind(ctx, conn, t.name, p.cfg.TimeColumn)
		res.Tables[i].Partitioned = partitioned
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ok[i] = true
	}
	return ok, append(errs, p.unpublished(ctx, conn, ok)...)
}

// publications is Config.Publications, or walrelay's default one.
func (c Config) publications() []string {
	if len(c.Publications) > 0 {
		return c.Publications
	}
	return []string{"walrelay_outbox"}
}

// unpublished reads, on every pass, the tables the publications publish
// and clears live[i] for each live table none of them publishes, with an
// ErrNotPublished error naming it. The relay streams only published
// tables, so the slot's confirmed position proves nothing about the rows
// of another (never streamed, or not since an ALTER PUBLICATION … DROP
// TABLE): pruning them would lose events. Membership is decided as the
// relay decides it (relay.checkPublications): a table is published when
// pg_publication_tables lists it by its own name, which covers FOR TABLE,
// FOR TABLES IN SCHEMA and FOR ALL TABLES; a partitioned table counts
// only when published via its root (publish_via_partition_root), which
// the relay requires. When the publications cannot be read, every table
// is left out.
func (p *Pruner) unpublished(ctx context.Context, conn *pgx.Conn, live []bool) []error {
	pubs := p.cfg.publications()
	rows, err := conn.Query(ctx, `
		SELECT DISTINCT schemaname::text, tablename::text FROM pg_publication_tables WHERE pubname = ANY($1)`, pubs)
	if err != nil {
		clear(live)
		return []error{fmt.Errorf("reading the tables of publications %q: %w", pubs, explainTimeout(err))}
	}
	published := map[config.TableName]bool{}
	var t config.TableName
	_, err = pgx.ForEachRow(rows, []any{&t.Schema, &t.Name}, func() error {
		published[t] = true
		return nil
	})
	if err != nil {
		clear(live)
		return []error{fmt.Errorf("reading the tables of publications %q: %w", pubs, explainTimeout(err))}
	}
	var errs []error
	for i, name := range p.cfg.tables() {
		if !live[i] || published[name] {
			continue
		}
		live[i] = false
		errs = append(errs, fmt.Errorf("%w: %s is in none of the publications %q, so the relay does not stream its rows and the slot proves none delivered; left alone (nothing removed from it): ALTER PUBLICATION %s ADD TABLE %s; (or run `walrelay setup`), or remove it from postgres.table",
			ErrNotPublished, name, pubs, pgx.Identifier{pubs[0]}.Sanitize(), pgx.Identifier{name.Schema, name.Name}.Sanitize()))
	}
	return errs
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
