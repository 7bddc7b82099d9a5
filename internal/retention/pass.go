package retention

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/txfence"
)

// Run prunes every Interval until ctx is done, starting now. A failed pass
// is logged and the next one tries again; Run never stops the relay.
func (p *Pruner) Run(ctx context.Context) {
	defer p.Close(context.WithoutCancel(ctx))
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	var lastErr string
	for {
		res, err := p.Cycle(ctx)
		// What a pass removed is logged, table by table, even when a
		// later step of it failed or the relay is stopping.
		for _, t := range res.Tables {
			if t.Rows > 0 || len(t.Dropped) > 0 || len(t.Detached) > 0 {
				p.log.Info("pruned the outbox", "table", t.Table, "rows", t.Rows, "batches", t.Batches,
					"detached", t.Detached, "dropped", t.Dropped, "fence_lsn", res.FenceLSN, "confirmed_flush_lsn", res.ConfirmedLSN, "took", res.Took)
			}
		}
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if err.Error() != lastErr {
				p.log.Error("pruning the outbox; will retry", "err", err, "table", res.Table, "every", p.cfg.Interval)
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
// passes after it. The first pass only takes a fence. A table that
// cannot be pruned (missing, a statement timeout, not published:
// ErrNotPublished) is left for the next pass and its error joined to the
// others'; the other tables are pruned.
func (p *Pruner) Cycle(ctx context.Context) (Result, error) {
	start := time.Now()
	res, err := p.cycle(ctx)
	res.sum()
	res.Took = time.Since(start)
	return res, p.fail(ctx, err)
}

func (p *Pruner) cycle(ctx context.Context) (Result, error) {
	res := p.newResult()
	conn, err := p.connect(ctx)
	if err != nil {
		return res, err
	}
	live, errs := p.kinds(ctx, conn, &res)
	// One slot read and one fence for every table: a fence is the
	// server's, not a table's.
	slot, err := p.readSlot(ctx, conn)
	if err != nil {
		return res, errors.Join(append(errs, err)...)
	}
	res.ConfirmedLSN = slot.Confirmed.String()
	fence, ok := p.confirmed(slot)
	switch {
	case ok:
		res.Fence, res.FenceLSN = &fence, fence.LSN.String()
		for i, t := range p.tables {
			if !live[i] || ctx.Err() != nil {
				continue
			}
			if err := p.remove(ctx, conn, t, fence, &res.Tables[i]); err != nil {
				errs = append(errs, err)
			}
		}
	case len(p.fences) == 0:
		res.Waiting = "first pass: took the fence the next passes remove by"
	default:
		res.Waiting = txfence.NotConfirmed(p.cfg.Slot, slot, p.fences[0]).Error()
	}
	if err := ctx.Err(); err != nil {
		return res, errors.Join(append(errs, err)...)
	}
	for i, t := range p.tables {
		if live[i] && res.Tables[i].Partitioned {
			if err := p.observeDetached(ctx, conn, t); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(p.fences) < maxFences {
		f, err := txfence.TakeFence(ctx, conn)
		if err != nil {
			return res, errors.Join(append(errs, err)...)
		}
		p.seq++
		f.Seq = p.seq
		p.fences = append(p.fences, f)
	}
	for i, t := range p.tables {
		if live[i] {
			if err := p.gauges(ctx, conn, t); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return res, errors.Join(errs...)
}

// remove removes what fence f (confirmed) allows from table t: rows of a
// plain table; on a partitioned one, detached partitions whose fence is
// confirmed are dropped and partitions past the retention are detached.
func (p *Pruner) remove(ctx context.Context, conn *pgx.Conn, t outboxTable, f txfence.Fence, res *TableResult) error {
	if !res.Partitioned {
		return p.removeRows(ctx, conn, t, f, res)
	}
	if err := p.dropDetached(ctx, conn, t, f, res); err != nil {
		return err
	}
	return p.detachOld(ctx, conn, t, f, res)
}

// gauges sets table t's oldest row's age and its size.
func (p *Pruner) gauges(ctx context.Context, conn *pgx.Conn, t outboxTable) error {
	if p.m.OldestRowAge == nil && p.m.TableSize == nil {
		return nil
	}
	var age float64
	var size int64
	err := conn.QueryRow(ctx, `SELECT coalesce(extract(epoch FROM now() - (SELECT min(`+p.timeCol+`) FROM `+t.quoted+`)), 0)::float8,
		greatest(pg_total_relation_size(to_regclass($1)),
			(SELECT coalesce(sum(pg_total_relation_size(relid)), 0) FROM pg_partition_tree(to_regclass($1))))::bigint`, t.quoted).Scan(&age, &size)
	if err != nil {
		return fmt.Errorf("measuring outbox table %s (oldest row, size): %w", t.name, explainTimeout(err))
	}
	if p.m.OldestRowAge != nil {
		p.m.OldestRowAge.WithLabelValues(t.name).Set(max(age, 0))
	}
	if p.m.TableSize != nil {
		p.m.TableSize.WithLabelValues(t.name).Set(float64(size))
	}
	return nil
}

// Once is one pass of walrelay outbox prune: it takes a fence, waits up to
// wait for the slot to confirm it, and removes what it allows; on a
// partitioned outbox it then takes a second fence after its detaches,
// waits for that one too, and drops the detached partitions. A fence the
// slot does not confirm in time is an error wrapping ErrNotConfirmed that
// says why (what was done before stays done). Every table is pruned by
// the same fences; a table that cannot be is left alone and its error
// joined to the others'.
func (p *Pruner) Once(ctx context.Context, wait time.Duration) (Result, error) {
	start := time.Now()
	res, err := p.once(ctx, wait)
	res.sum()
	res.Took = time.Since(start)
	return res, p.fail(ctx, err)
}

func (p *Pruner) once(ctx context.Context, wait time.Duration) (Result, error) {
	res := p.newResult()
	conn, err := p.connect(ctx)
	if err != nil {
		return res, err
	}
	live, errs := p.kinds(ctx, conn, &res)
	joined := func(err error) error { return errors.Join(append(errs, err)...) }
	if _, err := p.readSlot(ctx, conn); err != nil {
		return res, joined(err)
	}
	deadline := time.Now().Add(wait)
	partitioned := func(i int) bool { return live[i] && res.Tables[i].Partitioned }
	for i, t := range p.tables {
		// Detached partitions seen now are covered by the fence taken
		// next. A table whose detached partitions cannot be read is left out
		// of the pass, its error joined.
		if partitioned(i) {
			if err := p.observeDetached(ctx, conn, t); err != nil {
				errs = append(errs, fmt.Errorf("reading the partitions detached from %s: %w", t.name, err))
				live[i] = false
			}
		}
	}
	f, slot, err := p.fenceAndWait(ctx, conn, deadline)
	res.ConfirmedLSN = slot.Confirmed.String()
	if err != nil {
		res.Waiting = err.Error()
		return res, joined(err)
	}
	res.Fence, res.FenceLSN = &f, f.LSN.String()
	// A table dropped from the publications while the fence was awaited
	// is left out too: its rows committed since are not streamed.
	errs = append(errs, p.unpublished(ctx, conn, live)...)
	detachedAny := false
	for i, t := range p.tables {
		if !live[i] || ctx.Err() != nil {
			continue
		}
		if err := p.remove(ctx, conn, t, f, &res.Tables[i]); err != nil {
			errs = append(errs, err)
		}
		detachedAny = detachedAny || len(res.Tables[i].Detached) > 0
	}
	if err := ctx.Err(); err != nil {
		return res, joined(err)
	}
	if !detachedAny || p.cfg.DryRun {
		return res, errors.Join(errs...)
	}
	// The partitions detached now need a fence taken after their detach.
	for i, t := range p.tables {
		if partitioned(i) && len(res.Tables[i].Detached) > 0 {
			if err := p.observeDetached(ctx, conn, t); err != nil {
				// Not observed, its new detaches are not dropped by the
				// next fence; the next pass observes them.
				errs = append(errs, fmt.Errorf("reading the partitions detached from %s: %w", t.name, err))
			}
		}
	}
	f, slot, err = p.fenceAndWait(ctx, conn, deadline)
	res.ConfirmedLSN = slot.Confirmed.String()
	if err != nil {
		res.Waiting = err.Error()
		return res, joined(err)
	}
	res.Fence, res.FenceLSN = &f, f.LSN.String()
	for i, t := range p.tables {
		if partitioned(i) && len(res.Tables[i].Detached) > 0 {
			if err := p.dropDetached(ctx, conn, t, f, &res.Tables[i]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return res, errors.Join(errs...)
}
