package relay

import (
	"context"
	"fmt"
)

// sayStopping logs, as soon as ctx (the caller's: SIGTERM) is done while
// streamCtx was running, what the stop waits for: the records in flight
// and relay.shutdown_timeout, so that an operator watching a slow stop
// knows why and for how long. A stop on an error (streamCtx ended, ctx
// not) is not announced here: the error is.
func (r *Relay) sayStopping(ctx, streamCtx context.Context) {
	<-streamCtx.Done()
	if ctx.Err() == nil {
		return
	}
	n, bytes := r.tracker.InFlight()
	r.log.Info(fmt.Sprintf("stopping: draining %d records (up to relay.shutdown_timeout %s)", n, r.cfg.Relay.ShutdownTimeout),
		"records", n, "bytes", bytes, "shutdown_timeout", r.cfg.Relay.ShutdownTimeout.String(), "confirmed", r.tracker.Confirmed().String())
}
