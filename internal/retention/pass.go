package retention

import (
	"context"
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
