package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
)

// This file is what the relay does when Postgres shuts down while it
// streams (pg_ctl stop -m fast: systemctl restart, a minor upgrade, the
// first step of a switchover).
//
// A logical walsender told to stop (PROCSIG_WALSND_INIT_STOPPING, which
// the checkpointer sends once every regular backend has exited) decodes
// what remains of the WAL, then exits only once its client reported a
// flush position equal to everything it sent, asking for a reply
// meanwhile (walsender.c: XLogSendLogical sets got_SIGUSR2 when caught up
// with got_STOPPING; WalSndDone). The checkpointer waits for it to exit
// before it writes the shutdown checkpoint (WalSndWaitStopping: a logical
// walsender never enters the stopping state), and pg_ctl waits for both.
// walrelay confirms only what it recorded first (slotrecord.go), and the
// record cannot be written any more: the connections that write it were
// terminated (57P01) and new ones are refused (57P03). Confirming past the
// record would leave a slot that reads as jumped at the next start. So the
// relay ends the replication session instead (Stream.EndSession): the
// walsender exits when the connection closes, the shutdown completes, and
// the stream connects again with backoff until the server is back.
// Nothing is confirmed past the record or past what Kafka acknowledged;
// the slot keeps the position last reported, and Postgres sends what
// follows it again to the next session.
//
// A walsender at shutdown asks for replies (keepalives with
// ReplyRequested, which walrelay's regular status updates otherwise make
// rare): each makes the recorder's next tick act (wanted, answer). An idle
// relay does not record its own last write (see recorder), and the WAL a
// walsender sends at shutdown may end right there: that tick records it
// regardless, and the write fails on a server shutting down. When there is
// nothing to record (records in flight that Kafka has not acknowledged:
// a broker outage during the restart), it asks the server instead
// (probe), which refuses a server shutting down as well.

// A relay at its in-flight cap (Kafka not acknowledging) reads nothing
// from the stream, so it never sees a walsender's request for a reply:
// while records are in flight and the confirmed position has not moved for
// stuckProbeEvery, the recorder asks the server every stuckProbeEvery
// (stuckProbe), one trivial query a second while Kafka is stuck.

// stuckProbeEvery is how long the confirmed position may stay still with
// records in flight before the recorder asks the server whether it shuts
// down, and how often it asks again.
const stuckProbeEvery = time.Second

// stuckWatch is the recorder's view of a confirmed position that does not
// move while records are in flight (stuckProbe).
type stuckWatch struct {
	confirmed pglogrepl.LSN
	since     time.Time // when confirmed was last seen to move (zero: nothing in flight)
	probed    time.Time
}

// stuckProbe reports whether the recorder should ask the server whether it
// shuts down now: records in flight, the confirmed position still for
// stuckProbeEvery, and no probe for as long. Decoding from a standby the
// record's server is not the one streaming (see stopping).
func (c *recorder) stuckProbe(w *stuckWatch, now time.Time) bool {
	if c.endSession == nil || c.slots != nil {
		return false
	}
	if n, _ := c.tracker.InFlight(); n == 0 {
		w.since = time.Time{}
		return false
	}
	if conf := c.tracker.Confirmed(); w.since.IsZero() || conf != w.confirmed {
		w.confirmed, w.since = conf, now
		return false
	}
	if now.Sub(w.since) < stuckProbeEvery || now.Sub(w.probed) < stuckProbeEvery {
		return false
	}
	w.probed = now
	return true
}

// serverStopping reports whether err is Postgres ending or refusing a
// session because the server is shutting down (or not up yet):
// admin_shutdown (57P01: a fast shutdown terminated the session, or
// pg_terminate_backend did), crash_shutdown (57P02) and
// cannot_connect_now (57P03).
func serverStopping(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "57P01", "57P02", "57P03":
		return true
	}
	return false
}

// wanted notes that the walsender asked for a reply while at walEnd
// (replication.ReplyHandler): the next record attempt records the
// tracker's position even when only this recorder's own write lies before
// it.
func (c *recorder) wanted(walEnd pglogrepl.LSN) {
	for {
		old := c.want.Load()
		if uint64(walEnd) <= old || c.want.CompareAndSwap(old, uint64(walEnd)) {
			return
		}
	}
}

// answer follows up a walsender's request for a reply at want (see
// wanted), once the tick's record attempt succeeded: the stream reports
// want now, or the server is asked whether it shuts down (probe). The
// request is forgotten either way; the walsender asks again.
func (c *recorder) answer(ctx context.Context, want uint64) error {
	defer c.want.CompareAndSwap(want, 0)
	if uint64(c.limit(c.tracker.Confirmed())) >= want || c.slots != nil {
		return nil
	}
	return c.probe(ctx)
}

// probe runs a trivial query on the record's connection, or on a
// connection of its own when there is none (closed after, so that the
// record's next connection still starts with its reclaim): on a server
// shutting down it fails with 57P01 or 57P03.
func (c *recorder) probe(ctx context.Context) error {
	c.io.Lock()
	defer c.io.Unlock()
	ctx, cancel := context.WithTimeout(ctx, recordTimeout)
	defer cancel()
	conn := c.conn
	if conn == nil || conn.IsClosed() {
		own, err := c.connect(ctx)
		if err != nil {
			return fmt.Errorf("connecting to ask the server whether it shuts down (a walsender waits for a position not yet acknowledged): %w", err)
		}
		defer func() { _ = own.Close(context.WithoutCancel(ctx)) }()
		conn = own
	}
	if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
		if conn == c.conn {
			_ = c.conn.Close(context.WithoutCancel(ctx))
			c.conn = nil
		}
		return fmt.Errorf("asking the server whether it shuts down (a walsender waits for a position not yet acknowledged): %w", err)
	}
	return nil
}

// stopping ends the replication session when err, a failed record, says
// that the server the relay streams from is shutting down (see above).
// Decoding from a standby, the record is on the primary: its shutdown
// does not hold the standby's walsender, and the session goes on.
func (c *recorder) stopping(err error) {
	if c.endSession == nil || c.slots != nil || !serverStopping(err) {
		return
	}
	if c.endSession(err) {
		c.log.Warn("postgres is shutting down and the slot's position cannot be recorded: ending the replication session so that its walsender exits and the shutdown completes; reconnecting with backoff (nothing past the record is confirmed: Postgres sends what follows the slot's position again)",
			"slot", c.slot, "recorded_lsn", pglogrepl.LSN(c.recorded.Load()).String(), "confirmed", c.tracker.Confirmed().String(), "err", err)
	}
}

// ReplyRequested passes a keepalive that asks for a reply to the
// recorder (see wanted).
func (h *handler) ReplyRequested(walEnd pglogrepl.LSN) {
	if h.rec != nil {
		h.rec.wanted(walEnd)
	}
}
