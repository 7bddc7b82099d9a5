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
// walrelay_outbox_table_size_bytes (pkg/metrics).
//
// Why it is safe: a row carries no commit LSN, so retention takes a Fence
// (a snapshot, then the WAL insert position L) and removes only rows whose
// xmin precedes the snapshot's xmin, once the slot's confirmed_flush_lsn
// is at or past L; a partition is detached first, which waits for every
// transaction that wrote to it, and dropped only once a fence taken after
// the detach is confirmed. The proof is in docs/DESIGN.md, "Retention";
// the fence is pkg/txfence's.
// Pruner.Run uses the newest fence an earlier pass took that the slot has
// confirmed since, so it never waits; Pruner.Once (walrelay outbox prune)
// takes a fence and waits, bounded, for the slot to pass it.
//
// It refuses to remove anything when the slot is missing, not a pgoutput
// slot of the outbox's database, or invalidated. It does not create
// partitions (pkg/partition does) and does not relay anything.
package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/slotrecord"
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
	schema, table, _ := config.SplitTable(c.Postgres.Table)
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

// Run prunes every Interval until ctx is done, starting now. A failed pass
// is logged and the next one tries again; Run never stops the relay.
func (p *Pruner) Run(ctx context.Context) {
	defer p.Close(context.WithoutCancel(ctx))
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	var lastErr string
	for {
		res, err := p.Cycle(ctx)
		// What a pass removed is logged even when a later step of it
		// failed or the relay is stopping.
		if res.Rows > 0 || len(res.Dropped) > 0 || len(res.Detached) > 0 {
			p.log.Info("pruned the outbox", "table", res.Table, "rows", res.Rows, "batches", res.Batches,
				"detached", res.Detached, "dropped", res.Dropped, "fence_lsn", res.FenceLSN, "confirmed_flush_lsn", res.ConfirmedLSN, "took", res.Took)
		}
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if err.Error() != lastErr {
				p.log.Error("pruning the outbox; will retry", "err", err, "table", p.cfg.Schema+"."+p.cfg.Table, "every", p.cfg.Interval)
			}
			lastErr = err.Error()
		default:
			lastErr = ""
			if res.Waiting != "" {
				p.log.Debug("nothing pruned", "why", res.Waiting)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Cycle is one pass of Run: it removes what the newest fence of an earlier
// pass that the slot has confirmed allows, then takes a new fence for the
// passes after it. The first pass only takes a fence.
func (p *Pruner) Cycle(ctx context.Context) (Result, error) {
	start := time.Now()
	res, err := p.cycle(ctx)
	res.Took = time.Since(start)
	return res, p.fail(ctx, err)
}

func (p *Pruner) cycle(ctx context.Context) (Result, error) {
	res := Result{Table: p.cfg.Schema + "." + p.cfg.Table, Detached: []string{}, Dropped: []string{}}
	conn, err := p.connect(ctx)
	if err != nil {
		return res, err
	}
	if res.Partitioned, err = tableKind(ctx, conn, p.cfg.Schema+"."+p.cfg.Table, p.cfg.TimeColumn); err != nil {
		return res, err
	}
	slot, err := p.readSlot(ctx, conn)
	if err != nil {
		return res, err
	}
	res.ConfirmedLSN = slot.Confirmed.String()
	fence, ok := p.confirmed(slot)
	switch {
	case ok:
		res.Fence, res.FenceLSN = &fence, fence.LSN.String()
		if err := p.remove(ctx, conn, fence, res.Partitioned, &res); err != nil {
			return res, err
		}
	case len(p.fences) == 0:
		res.Waiting = "first pass: took the fence the next passes remove by"
	default:
		res.Waiting = txfence.NotConfirmed(p.cfg.Slot, slot, p.fences[0]).Error()
	}
	if res.Partitioned {
		if err := p.observeDetached(ctx, conn); err != nil {
			return res, err
		}
	}
	if len(p.fences) < maxFences {
		f, err := txfence.TakeFence(ctx, conn)
		if err != nil {
			return res, err
		}
		p.seq++
		f.Seq = p.seq
		p.fences = append(p.fences, f)
	}
	return res, p.gauges(ctx, conn)
}

// confirmed returns the newest kept fence slot s confirmed, and forgets
// the fences before it and those of another WAL history.
func (p *Pruner) confirmed(s txfence.SlotState) (txfence.Fence, bool) {
	kept := p.fences[:0]
	for _, f := range p.fences {
		if f.Identity() == s.Identity {
			kept = append(kept, f)
		}
	}
	p.fences = kept
	best := -1
	for i, f := range p.fences {
		if s.Confirmed >= f.LSN {
			best = i
		}
	}
	if best < 0 {
		return txfence.Fence{}, false
	}
	f := p.fences[best]
	p.fences = append(p.fences[:0], p.fences[best:]...) // keep it: the next pass may have nothing newer
	return f, true
}

// observeDetached notes the detached partitions not seen yet: each may be
// dropped once a fence taken after this moment is confirmed.
func (p *Pruner) observeDetached(ctx context.Context, conn *pgx.Conn) error {
	parts, err := detached(ctx, conn, p.marker)
	if err != nil {
		return err
	}
	for _, d := range parts {
		if _, ok := p.detached[d.OID]; !ok {
			p.detached[d.OID] = p.seq + 1
		}
	}
	return nil
}

// remove removes what fence f (confirmed) allows: rows of a plain outbox;
// on a partitioned one, detached partitions whose fence is confirmed are
// dropped and partitions past the retention are detached.
func (p *Pruner) remove(ctx context.Context, conn *pgx.Conn, f txfence.Fence, partitioned bool, res *Result) error {
	if !partitioned {
		return p.removeRows(ctx, conn, f, res)
	}
	if err := p.dropDetached(ctx, conn, f, res); err != nil {
		return err
	}
	return p.detachOld(ctx, conn, f, res)
}

// removeRows deletes batches until one removes fewer than Batch rows.
func (p *Pruner) removeRows(ctx context.Context, conn *pgx.Conn, f txfence.Fence, res *Result) error {
	if p.cfg.DryRun {
		n, err := deleteBatch(ctx, conn, p.table, p.timeCol, p.cfg.Retention, f, 0, true)
		res.Rows = n
		return err
	}
	start := time.Now()
	retries := 0
	for ctx.Err() == nil {
		n, err := deleteBatch(ctx, conn, p.table, p.timeCol, p.cfg.Retention, f, p.cfg.Batch, false)
		if err != nil {
			if serializationFailure(err) && retries < 3 {
				retries++ // a row of the batch changed meanwhile: take the batch again
				continue
			}
			return err
		}
		retries = 0
		res.Rows += n
		res.Batches++
		res.Deleting = time.Since(start)
		if p.m.RowsPruned != nil {
			p.m.RowsPruned.Add(float64(n))
		}
		if p.OnProgress != nil {
			p.OnProgress(Progress{Rows: res.Rows, Batches: res.Batches, Elapsed: time.Since(start)})
		}
		if n < int64(p.cfg.Batch) {
			return nil
		}
	}
	return ctx.Err()
}

// dropDetached drops the detached partitions whose first fence taken after
// their detach is f or older.
func (p *Pruner) dropDetached(ctx context.Context, conn *pgx.Conn, f txfence.Fence, res *Result) error {
	parts, err := detached(ctx, conn, p.marker)
	if err != nil {
		return err
	}
	for _, d := range parts {
		after, ok := p.detached[d.OID]
		if !ok || after > f.Seq {
			continue
		}
		if !p.cfg.DryRun {
			if err := drop(ctx, conn, d, p.marker); err != nil {
				return err
			}
			delete(p.detached, d.OID)
			if p.m.PartitionsDropped != nil {
				p.m.PartitionsDropped.Inc()
			}
		}
		res.Dropped = append(res.Dropped, d.String())
	}
	return nil
}

// detachOld detaches the partitions whose upper bound is older than both
// the retention and the confirmed fence f (so their rows very likely are
// confirmed; a fence after the detach decides), finishing interrupted
// detaches first.
func (p *Pruner) detachOld(ctx context.Context, conn *pgx.Conn, f txfence.Fence, res *Result) error {
	parts, err := ListPartitions(ctx, conn, p.cfg.Schema+"."+p.cfg.Table)
	if err != nil {
		return err
	}
	var now time.Time
	if err := conn.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return fmt.Errorf("reading the server's clock: %w", err)
	}
	limit := now.Add(-p.cfg.Retention)
	if f.Taken.Before(limit) {
		limit = f.Taken
	}
	concurrently := !hasDefault(parts)
	for _, part := range parts {
		if part.Default || part.Upper == nil {
			continue
		}
		if part.DetachPending {
			if !p.cfg.DryRun {
				if err := finalize(ctx, conn, p.table, part); err != nil {
					return err
				}
			}
			res.Detached = append(res.Detached, part.String())
			continue
		}
		if part.Upper.After(limit) {
			continue
		}
		if !p.cfg.DryRun {
			if err := detach(ctx, conn, p.table, part, p.marker, concurrently); err != nil {
				return err
			}
		}
		res.Detached = append(res.Detached, part.String())
	}
	return nil
}

// gauges sets the oldest row's age and the table's size.
func (p *Pruner) gauges(ctx context.Context, conn *pgx.Conn) error {
	if p.m.OldestRowAge == nil && p.m.TableSize == nil {
		return nil
	}
	var age float64
	var size int64
	err := conn.QueryRow(ctx, `SELECT coalesce(extract(epoch FROM now() - (SELECT min(`+p.timeCol+`) FROM `+p.table+`)), 0)::float8,
		greatest(pg_total_relation_size(to_regclass($1)),
			(SELECT coalesce(sum(pg_total_relation_size(relid)), 0) FROM pg_partition_tree(to_regclass($1))))::bigint`, p.table).Scan(&age, &size)
	if err != nil {
		return fmt.Errorf("measuring the outbox (oldest row, size): %w", explainTimeout(err))
	}
	if p.m.OldestRowAge != nil {
		p.m.OldestRowAge.Set(max(age, 0))
	}
	if p.m.TableSize != nil {
		p.m.TableSize.Set(float64(size))
	}
	return nil
}

// Once is one pass of walrelay outbox prune: it takes a fence, waits up to
// wait for the slot to confirm it, and removes what it allows; on a
// partitioned outbox it then takes a second fence after its detaches,
// waits for that one too, and drops the detached partitions. A fence the
// slot does not confirm in time is an error wrapping ErrNotConfirmed that
// says why (what was done before stays done).
func (p *Pruner) Once(ctx context.Context, wait time.Duration) (Result, error) {
	start := time.Now()
	res, err := p.once(ctx, wait)
	res.Took = time.Since(start)
	return res, p.fail(ctx, err)
}

func (p *Pruner) once(ctx context.Context, wait time.Duration) (Result, error) {
	res := Result{Table: p.cfg.Schema + "." + p.cfg.Table, Detached: []string{}, Dropped: []string{}}
	conn, err := p.connect(ctx)
	if err != nil {
		return res, err
	}
	if res.Partitioned, err = tableKind(ctx, conn, p.cfg.Schema+"."+p.cfg.Table, p.cfg.TimeColumn); err != nil {
		return res, err
	}
	if _, err := p.readSlot(ctx, conn); err != nil {
		return res, err
	}
	deadline := time.Now().Add(wait)
	if res.Partitioned {
		// Detached partitions seen now are covered by the fence taken next.
		if err := p.observeDetached(ctx, conn); err != nil {
			return res, err
		}
	}
	f, slot, err := p.fenceAndWait(ctx, conn, deadline)
	res.ConfirmedLSN = slot.Confirmed.String()
	if err != nil {
		res.Waiting = err.Error()
		return res, err
	}
	res.Fence, res.FenceLSN = &f, f.LSN.String()
	if !res.Partitioned {
		return res, p.removeRows(ctx, conn, f, &res)
	}
	if err := p.dropDetached(ctx, conn, f, &res); err != nil {
		return res, err
	}
	if err := p.detachOld(ctx, conn, f, &res); err != nil {
		return res, err
	}
	if len(res.Detached) == 0 || p.cfg.DryRun {
		return res, nil
	}
	// The partitions detached now need a fence taken after their detach.
	if err := p.observeDetached(ctx, conn); err != nil {
		return res, err
	}
	f, slot, err = p.fenceAndWait(ctx, conn, deadline)
	res.ConfirmedLSN = slot.Confirmed.String()
	if err != nil {
		res.Waiting = err.Error()
		return res, err
	}
	res.Fence, res.FenceLSN = &f, f.LSN.String()
	return res, p.dropDetached(ctx, conn, f, &res)
}

// fenceAndWait takes a fence and polls the slot until it confirms it or
// the deadline passes.
func (p *Pruner) fenceAndWait(ctx context.Context, conn *pgx.Conn, deadline time.Time) (txfence.Fence, txfence.SlotState, error) {
	f, err := txfence.TakeFence(ctx, conn)
	if err != nil {
		return txfence.Fence{}, txfence.SlotState{}, err
	}
	p.seq++
	f.Seq = p.seq
	sc, err := p.slotConn(ctx, conn)
	if err != nil {
		return f, txfence.SlotState{}, err
	}
	slot, err := txfence.Wait(ctx, sc, p.cfg.Slot, f, deadline)
	if err != nil {
		return f, slot, err
	}
	// Covered by the slot: the slot's position must still be walrelay's.
	if slot, err = p.readSlot(ctx, conn); err != nil {
		return f, slot, err
	}
	if !slot.Covers(f) {
		return f, slot, txfence.NotConfirmed(p.cfg.Slot, slot, f)
	}
	return f, slot, nil
}

// readSlot reads the slot and proves its position with walrelay's record
// of it (pkg/slotrecord): the position retention removes by is the
// slot's confirmed_flush_lsn only while it is at or before the position
// the relay recorded before confirming it, on this system, with no jump
// found since the last walrelay slot adopt. Anything else refuses, with
// the reason in walrelay_retention_blocked.
func (p *Pruner) readSlot(ctx context.Context, conn *pgx.Conn) (txfence.SlotState, error) {
	sc, err := p.slotConn(ctx, conn)
	if err != nil {
		return txfence.SlotState{}, err
	}
	slot, err := txfence.ReadSlot(ctx, sc, p.cfg.Slot)
	switch {
	case errors.Is(err, txfence.ErrSlotMissing):
		p.blocked(slotrecord.ReasonSlotMissing)
		return slot, err
	case errors.Is(err, txfence.ErrSlotInvalidated):
		p.blocked(slotrecord.ReasonSlotLost)
		return slot, err
	case err != nil:
		return slot, err
	}
	records := slotrecord.Table{Schema: p.cfg.Schema}
	if sc != conn {
		records.Slots = sc
	}
	st, err := slotrecord.Read(ctx, conn, records, p.cfg.Slot)
	if err != nil {
		return slot, err
	}
	if reason, err := st.Unproven(); err != nil {
		p.blocked(reason)
		return slot, fmt.Errorf("not pruning: %w", err)
	}
	p.blocked("")
	// The slot's position, proven: at or before the record.
	slot.Confirmed = min(slot.Confirmed, st.Record.Confirmed)
	return slot, nil
}

// blocked sets walrelay_retention_blocked: 1 for reason, 0 for the others.
func (p *Pruner) blocked(reason string) {
	if p.m.Blocked == nil {
		return
	}
	for _, r := range []string{slotrecord.ReasonNoRecord, slotrecord.ReasonSlotJumped, slotrecord.ReasonSlotMissing, slotrecord.ReasonSlotLost} {
		v := 0.0
		if r == reason {
			v = 1
		}
		p.m.Blocked.WithLabelValues(r).Set(v)
	}
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
