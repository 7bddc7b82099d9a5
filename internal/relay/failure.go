package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/checkpoint"
)

// failure records the first error that must stop the relay.
type failure struct {
	once  sync.Once
	mu    sync.Mutex
	cause error
	done  chan struct{}
}

func (f *failure) set(err error) {
	f.once.Do(func() {
		f.mu.Lock()
		f.cause = err
		f.mu.Unlock()
		close(f.done)
	})
}

func (f *failure) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cause
}

// failureAware is the Tracker as the stream sees it: once a record has
// failed, waiting for the rest to drain is pointless (the watermark cannot
// pass the failed one), so WaitDrained returns at once. With rec, what it
// confirms is capped by walrelay's record of the slot (write-ahead: the
// recorder records a position before the stream may confirm it), and a
// drained stop records the last position before the final status update.
type failureAware struct {
	*checkpoint.Tracker
	fail *failure
	rec  *recorder // nil: no cap (the initial snapshot's wait)
}

// Confirmed is the tracker's confirmed position, at most the record's.
func (f failureAware) Confirmed() pglogrepl.LSN {
	if f.rec == nil {
		return f.Tracker.Confirmed()
	}
	return f.rec.limit(f.Tracker.Confirmed())
}

// ObserveWALEnd passes a keepalive's WAL end to the tracker and tells the
// recorder when it moved the position (idle progress, recorded less often).
func (f failureAware) ObserveWALEnd(lsn pglogrepl.LSN) {
	before := f.Tracker.Confirmed()
	f.Tracker.ObserveWALEnd(lsn)
	if after := f.Tracker.Confirmed(); f.rec != nil && after > before {
		f.rec.idle(before, after)
	}
}

func (f failureAware) WaitDrained(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // ends when this call returns (cancel) at the latest
		select {
		case <-f.fail.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := f.Tracker.WaitDrained(ctx); err != nil {
		if ferr := f.fail.err(); ferr != nil {
			return fmt.Errorf("not draining after a failed record: %w", errors.Join(ferr, err))
		}
		return err
	}
	if f.rec != nil {
		// Drained: record the last position now, so that the final status
		// update confirms it (a clean stop leaves nothing to send again).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := f.rec.raise(rctx, true); err != nil {
			f.rec.log.Warn("recording the slot's last position before stopping; the next start re-sends what it did not confirm", "err", err)
		}
	}
	return nil
}
