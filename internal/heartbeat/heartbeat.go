// Package heartbeat keeps a replication slot moving while its database is
// idle: it emits a non-transactional logical decoding message into the
// slot's database on an interval, and watches for it to come back through
// the replication stream.
//
// In: a DSN (a normal connection), the interval, and the stream's reports
// of heartbeats it read (Emitter.Seen). Out: messages with prefix Prefix in
// the WAL, counters of heartbeats sent and seen, and a warning when they
// stop coming back.
//
// Why: the slot's position moves only when the relay confirms one. With
// nothing in flight the relay confirms the WAL end a keepalive reports,
// but a database whose own tables are idle, on a server where other
// databases write WAL, sends keepalives about WAL the slot does not
// decode. A heartbeat is WAL in the slot's database, so it comes back and
// its position is confirmed. A heartbeat that has not come back within a
// grace period means the stream is stuck (or not reading this database).
//
// It does not confirm positions: the relay's handler does, on Seen.
package heartbeat

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/pgsession"
)

// Prefix is the prefix of walrelay's heartbeat messages.
const Prefix = "walrelay.heartbeat"

// Is reports whether m is a walrelay heartbeat.
func Is(m *pglogrepl.LogicalDecodingMessage) bool {
	return m.Prefix == Prefix && !m.Transactional
}

// Emitter emits heartbeats and counts those that come back. Create it
// with New; Seen and the counters may be called from any goroutine.
type Emitter struct {
	dsn, slot string
	interval  time.Duration
	log       *slog.Logger

	sent, received atomic.Uint64
	lastSeen       atomic.Int64 // unix nanoseconds of the last heartbeat received

	while func() bool // nil: always
}

// While gates the heartbeats (call it before Run): none is emitted, and
// none is waited for, while active reports false. A relay passes whether
// it streams from the slot: a standby, which does not, has nothing to
// keep moving (the process holding the slot emits its own) and no reason
// to warn that its heartbeats do not come back.
func (e *Emitter) While(active func() bool) { e.while = active }

// New returns an Emitter for the database of dsn, which holds slot (named
// in its warning). It does not connect.
func New(dsn, slot string, interval time.Duration, log *slog.Logger) *Emitter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Emitter{dsn: dsn, slot: slot, interval: interval, log: log}
}

// Sent counts the heartbeats emitted.
func (e *Emitter) Sent() uint64 { return e.sent.Load() }

// Received counts the heartbeats that came back through the stream.
func (e *Emitter) Received() uint64 { return e.received.Load() }

// Seen records a heartbeat that came back through the stream.
func (e *Emitter) Seen(now time.Time) {
	e.received.Add(1)
	e.lastSeen.Store(now.UnixNano())
}

// Run emits a heartbeat every interval until ctx is done, over one
// connection it opens again after a failure. A failure is logged once
// until the next success; a heartbeat not seen within three intervals
// and 5s is warned about once until one is seen.
func (e *Emitter) Run(ctx context.Context) {
	grace := 3*e.interval + 5*time.Second
	t := time.NewTicker(e.interval)
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
		if e.while != nil && !e.while() {
			pendingSince, warned = time.Time{}, false
			continue
		}
		now := time.Now()
		if err := e.emit(ctx, &conn, now); err != nil {
			if ctx.Err() != nil {
				return
			}
			if !failing {
				e.log.Error("emitting heartbeat (pg_logical_emit_message); will retry", "err", err)
				failing = true
			}
			continue
		}
		failing = false
		e.sent.Add(1)
		if time.Unix(0, e.lastSeen.Load()).After(pendingSince) {
			pendingSince, warned = time.Time{}, false
		}
		if pendingSince.IsZero() {
			pendingSince = now
		} else if !warned && now.Sub(pendingSince) > grace {
			e.log.Warn("heartbeats are not coming back through the replication stream: the relay is not reading the slot (stalled, at its in-flight cap, or reconnecting)",
				"since", pendingSince.Format(time.RFC3339), "slot", e.slot)
			warned = true
		}
	}
}

// emit sends one heartbeat, connecting first when *conn is nil or closed;
// a failed connection is closed and *conn set to nil.
func (e *Emitter) emit(ctx context.Context, conn **pgx.Conn, now time.Time) error {
	if *conn == nil || (*conn).IsClosed() {
		c, err := pgsession.Connect(ctx, e.dsn)
		if err != nil {
			return fmt.Errorf("connecting to postgres: %w", err)
		}
		*conn = c
	}
	_, err := (*conn).Exec(ctx, `SELECT pg_logical_emit_message(false, $1, $2)`, Prefix, now.UTC().Format(time.RFC3339Nano))
	if err != nil {
		_ = (*conn).Close(ctx)
		*conn = nil
	}
	return err
}
