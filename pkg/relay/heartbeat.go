package relay

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// HeartbeatPrefix is the prefix of walrelay's heartbeat messages.
const HeartbeatPrefix = "walrelay.heartbeat"

// heartbeats emits a non-transactional logical decoding message into the
// slot's database every interval, so its WAL moves (and the slot with it)
// while the outbox and every other table of the database are idle and
// other databases of the server write WAL. The message comes back through
// the stream; a heartbeat that has not come back within a grace period
// means the stream is stuck (or not reading this database) and is logged
// as a warning.
type heartbeats struct {
	sent, received atomic.Uint64
	lastSeen       atomic.Int64 // unix nanoseconds of the last heartbeat received
}

// seen records a heartbeat that came back through the stream.
func (hb *heartbeats) seen(now time.Time) {
	hb.received.Add(1)
	hb.lastSeen.Store(now.UnixNano())
}

// run emits heartbeats until ctx is done.
func (r *Relay) runHeartbeats(ctx context.Context) {
	interval := r.cfg.Relay.HeartbeatInterval
	grace := 3*interval + 5*time.Second
	t := time.NewTicker(interval)
	defer t.Stop()
	var (
		conn         *pgx.Conn
		pendingSince time.Time // first heartbeat sent after the last one seen
		warned       bool
		failing      bool
	)
	defer func() {
		if conn != nil {
			_ = conn.Close(context.WithoutCancel(ctx))
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		if err := r.emitHeartbeat(ctx, &conn, now); err != nil {
			if ctx.Err() != nil {
				return
			}
			if !failing {
				r.log.Error("emitting heartbeat (pg_logical_emit_message); will retry", "err", err)
				failing = true
			}
			continue
		}
		failing = false
		r.hb.sent.Add(1)
		if time.Unix(0, r.hb.lastSeen.Load()).After(pendingSince) {
			pendingSince, warned = time.Time{}, false
		}
		if pendingSince.IsZero() {
			pendingSince = now
		} else if !warned && now.Sub(pendingSince) > grace {
			r.log.Warn("heartbeats are not coming back through the replication stream: the relay is not reading the slot (stalled, at its in-flight cap, or reconnecting)",
				"since", pendingSince.Format(time.RFC3339), "slot", r.cfg.Postgres.Slot)
			warned = true
		}
	}
}

func (r *Relay) emitHeartbeat(ctx context.Context, conn **pgx.Conn, now time.Time) error {
	if *conn == nil || (*conn).IsClosed() {
		c, err := pgx.Connect(ctx, r.cfg.Postgres.DSN)
		if err != nil {
			return fmt.Errorf("connecting to postgres: %w", err)
		}
		*conn = c
	}
	_, err := (*conn).Exec(ctx, `SELECT pg_logical_emit_message(false, $1, $2)`, HeartbeatPrefix, now.UTC().Format(time.RFC3339Nano))
	if err != nil {
		_ = (*conn).Close(ctx)
		*conn = nil
	}
	return err
}
