// Package slotmon watches one replication slot from outside the
// replication session: it polls the slot's row in pg_replication_slots
// on an interval, keeps the last reading for /status and readiness, and
// exports it as gauges.
//
// In: a DSN (a normal connection, opened for each poll, so it works while
// the replication session is down) and the slot's name. Out: Status, and
// the gauges walrelay_slot_lag_bytes, walrelay_slot_wal_status,
// walrelay_slot_safe_wal_size_bytes, walrelay_slot_active and
// walrelay_slot_stall_seconds (Register); failed polls count in
// walrelay_slot_poll_errors_total. The row is read with internal/postgres's
// query, the one `walrelay slot inspect` shows.
//
// A stall is measured on the slot itself, not on this process's
// checkpoint: the seconds since the slot's confirmed_flush_lsn last moved
// while the server's WAL was ahead of it. So a standby (which confirms
// nothing) reports the same stall as the instance holding the slot.
//
// It does not move or create the slot.
package slotmon

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/internal/pgsession"
	"github.com/walrelay/walrelay/internal/postgres"
)

// Status is the replication slot as Postgres last reported it.
type Status struct {
	Slot              string    `json:"slot"`
	Exists            bool      `json:"exists"`
	Active            bool      `json:"active"`
	ActivePID         int32     `json:"active_pid,omitempty"`
	WALStatus         string    `json:"wal_status,omitempty"`
	SafeWALSizeBytes  *int64    `json:"safe_wal_size_bytes"` // null: unlimited (max_slot_wal_keep_size = -1)
	CurrentLSN        string    `json:"current_lsn,omitempty"`
	ConfirmedFlushLSN string    `json:"confirmed_flush_lsn,omitempty"`
	RestartLSN        string    `json:"restart_lsn,omitempty"`
	ConfirmedLagBytes int64     `json:"confirmed_flush_lag_bytes"`
	RestartLagBytes   int64     `json:"restart_lag_bytes"`
	StallSeconds      float64   `json:"stall_seconds"`
	PolledAt          time.Time `json:"polled_at"`
	Error             string    `json:"error,omitempty"`
}

// Monitor polls one slot. Create it with New, run it with Run; Current
// may be called from any goroutine.
type Monitor struct {
	dsn, slot string
	interval  time.Duration
	metrics   *metrics.Metrics
	log       *slog.Logger

	mu     sync.Mutex
	status Status
	// lastFlush is the confirmed_flush_lsn seen last and movedAt when it
	// last changed (or the slot was last caught up).
	lastFlush string
	movedAt   time.Time
	// ownWAL, when set, says which WAL is only walrelay's own slot record
	// (see OwnWAL).
	ownWAL func() (from, to pglogrepl.LSN, ok bool)
}

// OwnWAL tells the monitor which WAL after the slot's position is only
// walrelay's own record of the slot (internal/slotrecord): the relay writes it
// before it confirms, so on an idle database its last write is always the
// last WAL, and the slot never confirms it. A slot at or past from with
// the server's WAL at or before to is caught up, not stalled. Call it
// before Run.
func (sm *Monitor) OwnWAL(f func() (from, to pglogrepl.LSN, ok bool)) { sm.ownWAL = f }

// ownOnly reports whether everything between the slot's position and the
// server's WAL in st is walrelay's own last record.
func (sm *Monitor) ownOnly(st Status) bool {
	if sm.ownWAL == nil {
		return false
	}
	from, to, ok := sm.ownWAL()
	confirmed, err1 := pglogrepl.ParseLSN(st.ConfirmedFlushLSN)
	current, err2 := pglogrepl.ParseLSN(st.CurrentLSN)
	return ok && err1 == nil && err2 == nil && confirmed >= from && current <= to
}

// New returns a Monitor of slot, polled every interval. It does not
// connect.
func New(dsn, slot string, interval time.Duration, m *metrics.Metrics, log *slog.Logger) *Monitor {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Monitor{dsn: dsn, slot: slot, interval: interval, metrics: m, log: log, status: Status{Slot: slot}}
}

// Run polls at once, then every interval, until ctx is done.
func (sm *Monitor) Run(ctx context.Context) {
	t := time.NewTicker(sm.interval)
	defer t.Stop()
	for {
		sm.poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// poll reads the slot once. A failed poll keeps the last good readings,
// marked with the error and the time of the poll.
func (sm *Monitor) poll(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(sm.interval, 5*time.Second))
	defer cancel()
	st, err := read(ctx, sm.dsn, sm.slot)
	now := time.Now()
	st.PolledAt = now
	if err != nil && ctx.Err() != nil {
		return // shutting down
	}
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if err != nil {
		sm.metrics.SlotPollErrors.Inc()
		sm.log.Warn("polling replication slot", "slot", sm.slot, "err", err)
		sm.status.Error, sm.status.PolledAt = err.Error(), now
		return
	}
	if st.ConfirmedFlushLSN != sm.lastFlush || st.ConfirmedLagBytes <= 0 || sm.ownOnly(st) || sm.movedAt.IsZero() {
		sm.lastFlush, sm.movedAt = st.ConfirmedFlushLSN, now
	}
	st.StallSeconds = now.Sub(sm.movedAt).Seconds()
	sm.status = st
}

// Current returns the last poll's result.
func (sm *Monitor) Current() Status {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	return sm.status
}

// read reads the slot's row with internal/postgres's query, on a
// connection of its own.
func read(ctx context.Context, dsn, slot string) (Status, error) {
	st := Status{Slot: slot}
	conn, err := pgsession.Connect(ctx, dsn)
	if err != nil {
		return st, fmt.Errorf("connecting to postgres: %w", postgres.ExplainConnectError(err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	s, err := postgres.InspectSlot(ctx, conn, slot)
	if err != nil {
		return st, err
	}
	st.Exists, st.Active, st.ActivePID, st.WALStatus, st.SafeWALSizeBytes = true, s.Active, s.ActivePID, s.WALStatus, s.SafeWALSizeBytes
	st.CurrentLSN, st.ConfirmedFlushLSN, st.RestartLSN = s.CurrentLSN, s.ConfirmedFlushLSN, s.RestartLSN
	st.ConfirmedLagBytes, st.RestartLagBytes = deref(s.ConfirmedFlushLagBytes), deref(s.RestartLagBytes)
	return st, nil
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// walStatuses are the values of pg_replication_slots.wal_status.
var walStatuses = [...]string{"reserved", "extended", "unreserved", "lost"}

// Register registers the slot's gauges on m, read from the last poll at
// scrape time.
func (sm *Monitor) Register(m *metrics.Metrics) {
	slot := prometheus.Labels{"slot": sm.slot}
	for _, pos := range []string{"confirmed_flush", "restart"} {
		m.GaugeFunc("slot_lag_bytes", "Bytes of WAL from the slot's position to pg_current_wal_lsn(), or on a standby pg_last_wal_replay_lsn() (polled).",
			prometheus.Labels{"slot": sm.slot, "position": pos}, func() float64 {
				st := sm.Current()
				if pos == "restart" {
					return float64(st.RestartLagBytes)
				}
				return float64(st.ConfirmedLagBytes)
			})
	}
	for _, ws := range walStatuses {
		m.GaugeFunc("slot_wal_status", "1 for the slot's current wal_status, 0 for the others (polled).",
			prometheus.Labels{"slot": sm.slot, "status": ws}, func() float64 {
				return boolValue(sm.Current().WALStatus == ws)
			})
	}
	m.GaugeFunc("slot_safe_wal_size_bytes", "Bytes of WAL that can be written before the slot is lost; +Inf when unlimited (polled).", slot, func() float64 {
		if p := sm.Current().SafeWALSizeBytes; p != nil {
			return float64(*p)
		}
		return math.Inf(1)
	})
	m.GaugeFunc("slot_active", "1 when some process streams from the slot (polled).", slot, func() float64 { return boolValue(sm.Current().Active) })
	m.GaugeFunc("slot_stall_seconds", "Seconds since the slot's confirmed_flush_lsn last advanced while the server's WAL was ahead of it (polled).", slot, func() float64 { return sm.Current().StallSeconds })
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
