// The recorder's fences: what a heal of a lost slot republishes from.

package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/walrelay/walrelay/internal/slotrecord"
	"github.com/walrelay/walrelay/internal/txfence"
)

// fenceEvery is how often, at most, the recorder takes a fence while
// transactions move the position: a heal republishes the rows after the
// newest covered fence, so this bounds its duplicates to about this much
// of the outbox's traffic (plus the relay's lag).
const fenceEvery = 10 * time.Second

// fence takes a txfence.Fence and records it as the record's pending
// fence (slotrecord.SetFence), when transactions moved the position since
// the last one and fenceEvery passed. It runs on a connection of its own
// and never holds io: the stream's record is not held back by it. A
// failure (a role or server that cannot take one) is logged once and
// tried again later; without fences a heal republishes every row.
func (c *recorder) fence(ctx context.Context) {
	if !c.on.Load() || time.Since(c.fenceAt) < fenceEvery {
		return
	}
	c.mu.Lock()
	progress := c.progress
	if cur := c.tracker.Confirmed(); cur != c.idleTop {
		progress = max(progress, cur)
	}
	c.mu.Unlock()
	if progress <= c.fenceProgress {
		return
	}
	c.fenceAt = time.Now()
	ctx, cancel := context.WithTimeout(ctx, recordTimeout)
	defer cancel()
	err := func() error {
		if c.fenceConn == nil || c.fenceConn.IsClosed() {
			conn, err := c.connect(ctx)
			if err != nil {
				return fmt.Errorf("connecting to take a fence: %w", err)
			}
			c.fenceConn = conn
		}
		f, err := txfence.TakeFence(ctx, c.fenceConn)
		if err == nil {
			_, err = slotrecord.SetFence(ctx, c.fenceConn, c.table, c.slot, f)
		}
		if err != nil {
			_ = c.fenceConn.Close(context.WithoutCancel(ctx))
			c.fenceConn = nil
			return err
		}
		c.fenceProgress = progress
		return nil
	}()
	if err != nil && ctx.Err() == nil && err.Error() != c.fenceErr {
		c.log.Warn("taking a fence for the slot's record (a heal of a lost slot republishes the rows after the newest covered fence; without one, every row)", "slot", c.slot, "err", err)
	}
	if err != nil {
		c.fenceErr = err.Error()
	} else {
		c.fenceErr = ""
	}
}
