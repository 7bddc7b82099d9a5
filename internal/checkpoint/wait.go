package checkpoint

import (
	"context"
	"fmt"
	"time"
)

// This file is the backpressure side of the Tracker: waiting for room under
// the in-flight caps, for a large message to be in flight alone, and for
// everything to drain.

// WaitRoom reports whether there is room for another record: fewer records
// in flight than Limits.MaxRecords and fewer bytes than Limits.MaxBytes, or
// nothing in flight at all. It returns true at once when there is room;
// otherwise it blocks until an Ack makes room, ctx is done or until passes
// (a zero until means no deadline), and returns whether there is room then.
func (t *Tracker) WaitRoom(ctx context.Context, until time.Time) bool {
	return t.wait(ctx, until, false)
}

// WaitRoomFor reports whether a message of n bytes, read once WaitRoom
// found room, may be handed on. One of at most Limits.MaxBytes may: it
// adds at most its own size to what WaitRoom let in. A larger one may only
// when nothing is in flight, so that it is in flight alone (the promise of
// Limits.MaxBytes); it waits for that like WaitRoom waits for room, until
// ctx is done or until passes. Without a byte cap every message may. The
// answer for a message of at most Limits.MaxBytes costs no lock.
func (t *Tracker) WaitRoomFor(ctx context.Context, until time.Time, n int) bool {
	if t.limits.MaxBytes <= 0 || int64(n) <= t.limits.MaxBytes {
		return true
	}
	return t.wait(ctx, until, true)
}

// wait blocks until there is room for another record, or, when alone,
// until nothing is in flight; or until ctx is done or until passes. It
// reports whether the condition holds when it returns.
func (t *Tracker) wait(ctx context.Context, until time.Time, alone bool) bool {
	var timer *time.Timer
	var deadline <-chan time.Time // nil (never ready) without until
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		t.mu.Lock()
		if t.readyLocked(alone) {
			t.mu.Unlock()
			return true
		}
		if timer == nil && !until.IsZero() {
			d := time.Until(until)
			if d <= 0 {
				t.mu.Unlock()
				return false
			}
			timer = time.NewTimer(d)
			deadline = timer.C
		}
		// Ack closes roomCh when there is room and drainCh when nothing
		// is in flight.
		wake := &t.roomCh
		if alone {
			wake = &t.drainCh
		}
		if *wake == nil {
			*wake = make(chan struct{})
		}
		ch := *wake
		t.mu.Unlock()

		select {
		case <-ch:
		case <-ctx.Done():
			return t.ready(alone)
		case <-deadline:
			return t.ready(alone)
		}
	}
}

// WaitDrained blocks until no record is in flight, or ctx is done; then it
// returns ctx's error wrapped with how much is still in flight.
func (t *Tracker) WaitDrained(ctx context.Context) error {
	for {
		t.mu.Lock()
		if t.records == 0 {
			t.mu.Unlock()
			return nil
		}
		if t.drainCh == nil {
			t.drainCh = make(chan struct{})
		}
		ch := t.drainCh
		t.mu.Unlock()

		select {
		case <-ch:
		case <-ctx.Done():
			records, bytes := t.InFlight()
			if records == 0 {
				return nil
			}
			return fmt.Errorf("waiting for %d in-flight records (%d bytes) to be acked: %w", records, bytes, ctx.Err())
		}
	}
}

// HasRoom reports whether records may be added without waiting: false
// when the in-flight caps are reached, and the stream waits for acks.
func (t *Tracker) HasRoom() bool { return t.ready(false) }

func (t *Tracker) hasRoomLocked() bool {
	if t.records == 0 {
		return true
	}
	if t.limits.MaxRecords > 0 && t.records >= t.limits.MaxRecords {
		return false
	}
	if t.limits.MaxBytes > 0 && t.bytes >= t.limits.MaxBytes {
		return false
	}
	return true
}

// readyLocked is what wait waits for: room for a record, or, when alone,
// nothing in flight.
func (t *Tracker) readyLocked(alone bool) bool {
	if alone {
		return t.records == 0
	}
	return t.hasRoomLocked()
}

func (t *Tracker) ready(alone bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.readyLocked(alone)
}
