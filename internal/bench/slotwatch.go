package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// slotWatch samples a slot every pollInterval on its own connection: when
// a walsender picked it up, how far it is confirmed, and the walsender's
// CPU.
type slotWatch struct {
	mu   sync.Mutex
	view slotView

	active  chan struct{} // closed when a walsender first streams from the slot
	reached chan struct{} // closed when confirmed >= target
	done    chan struct{} // closed when the watcher stopped (ctx done or err set)
}

// slotView is what a slotWatch has seen so far.
type slotView struct {
	activeAt     time.Time // first sample with a walsender streaming from the slot
	activePID    int       // that walsender's pid (0 before one did)
	confirmed    pglogrepl.LSN
	sent         pglogrepl.LSN // the furthest the walsender has sent
	reachedAt    time.Time     // first sample with confirmed >= target
	walsenderCPU time.Duration // the walsender's CPU time so far
	err          error         // why the watcher stopped early
}

// watchSlot samples slot until ctx is done or stop is called. readCPU says
// whether the walsender's /proc entry is this machine's.
func watchSlot(ctx context.Context, dsn, slot string, target pglogrepl.LSN, readCPU bool) (w *slotWatch, stop func(), _ error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("connecting the slot watcher: %w", err)
	}
	w = &slotWatch{active: make(chan struct{}), reached: make(chan struct{}), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		defer close(w.done)
		defer conn.Close(context.Background())
		t := time.NewTicker(pollInterval)
		defer t.Stop()
		for {
			st, err := readSlot(ctx, conn, slot)
			now := time.Now()
			w.mu.Lock()
			v := &w.view
			if err != nil {
				if ctx.Err() == nil {
					v.err = err
				}
				w.mu.Unlock()
				return
			}
			if st.activePID != 0 {
				if v.activeAt.IsZero() {
					v.activeAt = now
					close(w.active)
				}
				v.activePID = st.activePID
				if readCPU {
					if cpu, err := ProcessCPU(st.activePID); err == nil {
						v.walsenderCPU = cpu
					}
				}
			}
			v.confirmed = st.confirmed
			v.sent = max(v.sent, st.sent)
			if st.confirmed >= target && v.reachedAt.IsZero() {
				v.reachedAt = now
				close(w.reached)
			}
			w.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return w, func() { cancel(); <-w.done }, nil
}

// snapshot returns what the watcher has seen so far.
func (w *slotWatch) snapshot() slotView {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.view
}

// progressLoop prints how far a drain got every 2s until ctx is done.
func progressLoop(ctx context.Context, cfg Config, what string, w *slotWatch, start, target pglogrepl.LSN, began time.Time) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	pct := func(l pglogrepl.LSN) float64 {
		if l <= start || target <= start {
			return 0
		}
		return min(100, 100*float64(l-start)/float64(target-start))
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			v := w.snapshot()
			progress(cfg, "  %s: %4.1fs, WAL sent %5.1f%%, confirmed %5.1f%%", what, time.Since(began).Seconds(), pct(v.sent), pct(v.confirmed))
		}
	}
}

// slotState is one sample of a slot.
type slotState struct {
	activePID int
	confirmed pglogrepl.LSN
	sent      pglogrepl.LSN // the walsender's sent_lsn (0 when inactive)
}

// slotStateSQL reads a slot and, when a walsender streams from it, how far
// it has sent.
const slotStateSQL = `SELECT coalesce(s.active_pid, 0), coalesce((s.confirmed_flush_lsn - '0/0')::bigint, 0),
	coalesce((r.sent_lsn - '0/0')::bigint, 0)
FROM pg_replication_slots s LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid
WHERE s.slot_name = $1`

func readSlot(ctx context.Context, conn *pgx.Conn, slot string) (slotState, error) {
	var st slotState
	var confirmed, sent int64
	err := conn.QueryRow(ctx, slotStateSQL, slot).Scan(&st.activePID, &confirmed, &sent)
	if err != nil {
		return st, fmt.Errorf("reading slot %s: %w", slot, err)
	}
	st.confirmed, st.sent = pglogrepl.LSN(confirmed), pglogrepl.LSN(sent)
	return st, nil
}
