package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/pkg/metrics"
)

// SlotStatus is the replication slot as Postgres last reported it.
type SlotStatus struct {
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

// slotMonitor polls pg_replication_slots on an interval for lag, WAL
// retention, the slot's holder and stalls. It uses its own short-lived
// normal connection, so it works while the replication session is down.
//
// A stall is measured on the slot itself, not on this instance's tracker:
// the seconds since the slot's confirmed_flush_lsn last moved while the
// server's WAL was ahead of it. So a standby (whose tracker never moves)
// reports the same stall as the instance holding the slot.
type slotMonitor struct {
	dsn, slot string
	interval  time.Duration
	metrics   *metrics.Metrics
	log       *slog.Logger

	mu     sync.Mutex
	status SlotStatus
	// lastFlush is the confirmed_flush_lsn seen last and movedAt when it
	// last changed (or the slot was last caught up).
	lastFlush string
	movedAt   time.Time
}

func newSlotMonitor(dsn, slot string, interval time.Duration, m *metrics.Metrics, log *slog.Logger) *slotMonitor {
	return &slotMonitor{dsn: dsn, slot: slot, interval: interval, metrics: m, log: log, status: SlotStatus{Slot: slot}}
}

// run polls until ctx is done.
func (sm *slotMonitor) run(ctx context.Context) {
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

func (sm *slotMonitor) poll(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(sm.interval, 5*time.Second))
	defer cancel()
	st, err := querySlot(ctx, sm.dsn, sm.slot)
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
		// Keep the last good readings, marked stale.
		sm.status.Error, sm.status.PolledAt = err.Error(), now
		return
	}
	if st.ConfirmedFlushLSN != sm.lastFlush || st.ConfirmedLagBytes <= 0 || sm.movedAt.IsZero() {
		sm.lastFlush, sm.movedAt = st.ConfirmedFlushLSN, now
	}
	st.StallSeconds = now.Sub(sm.movedAt).Seconds()
	sm.status = st
}

// current returns the last poll's result.
func (sm *slotMonitor) current() SlotStatus {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	return sm.status
}

// querySlot reads one slot's row, with lags computed by the server.
func querySlot(ctx context.Context, dsn, slot string) (SlotStatus, error) {
	st := SlotStatus{Slot: slot}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return st, fmt.Errorf("connecting to postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var pid *int32
	var walStatus, confirmed, restart *string
	var confirmedLag, restartLag *int64
	err = conn.QueryRow(ctx, `
		SELECT active, active_pid, wal_status, safe_wal_size, pg_current_wal_lsn()::text,
		       confirmed_flush_lsn::text, restart_lsn::text,
		       pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::int8,
		       pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::int8
		FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(
		&st.Active, &pid, &walStatus, &st.SafeWALSizeBytes, &st.CurrentLSN,
		&confirmed, &restart, &confirmedLag, &restartLag)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, fmt.Errorf("replication slot %q does not exist", slot)
	}
	if err != nil {
		return st, fmt.Errorf("reading replication slot %q: %w", slot, err)
	}
	st.Exists = true
	st.ActivePID = deref(pid)
	st.WALStatus, st.ConfirmedFlushLSN, st.RestartLSN = deref(walStatus), deref(confirmed), deref(restart)
	st.ConfirmedLagBytes, st.RestartLagBytes = deref(confirmedLag), deref(restartLag)
	return st, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// walStatuses are the values of pg_replication_slots.wal_status.
var walStatuses = [...]string{"reserved", "extended", "unreserved", "lost"}

// registerGauges registers the metrics read from live state at scrape time.
func (r *Relay) registerGauges() {
	m, slot := r.metrics, prometheus.Labels{"slot": r.cfg.Postgres.Slot}
	status := r.monitor.current
	for _, pos := range []string{"confirmed_flush", "restart"} {
		m.GaugeFunc("slot_lag_bytes", "Bytes of WAL from the slot's position to pg_current_wal_lsn() (polled).",
			prometheus.Labels{"slot": r.cfg.Postgres.Slot, "position": pos}, func() float64 {
				st := status()
				if pos == "restart" {
					return float64(st.RestartLagBytes)
				}
				return float64(st.ConfirmedLagBytes)
			})
	}
	for _, ws := range walStatuses {
		m.GaugeFunc("slot_wal_status", "1 for the slot's current wal_status, 0 for the others (polled).",
			prometheus.Labels{"slot": r.cfg.Postgres.Slot, "status": ws}, func() float64 {
				return boolValue(status().WALStatus == ws)
			})
	}
	m.GaugeFunc("slot_safe_wal_size_bytes", "Bytes of WAL that can be written before the slot is lost; +Inf when unlimited (polled).", slot, func() float64 {
		if p := status().SafeWALSizeBytes; p != nil {
			return float64(*p)
		}
		return math.Inf(1)
	})
	m.GaugeFunc("slot_active", "1 when some process streams from the slot (polled).", slot, func() float64 { return boolValue(status().Active) })
	m.GaugeFunc("slot_held", "1 when this instance streams from the slot.", slot, func() float64 { return boolValue(r.stream.Streaming()) })
	m.GaugeFunc("slot_stall_seconds", "Seconds since the slot's confirmed_flush_lsn last advanced while the server's WAL was ahead of it (polled).", slot, func() float64 { return status().StallSeconds })
	m.GaugeFunc("confirmed_lsn_bytes", "The LSN confirmed to Postgres, as a byte position.", nil, func() float64 { return float64(r.tracker.Confirmed()) })
	m.GaugeFunc("received_lsn_bytes", "The newest WAL position received from Postgres, as a byte position.", nil, func() float64 { return float64(r.stream.Received()) })
	m.GaugeFunc("in_flight_records", "Records produced and not yet acknowledged by the broker.", nil, func() float64 {
		n, _ := r.tracker.InFlight()
		return float64(n)
	})
	m.GaugeFunc("in_flight_bytes", "Bytes of records produced and not yet acknowledged by the broker.", nil, func() float64 {
		_, b := r.tracker.InFlight()
		return float64(b)
	})
	m.CounterFunc("heartbeats_sent_total", "Heartbeat messages emitted into the slot's database (relay.heartbeat_interval).", nil, func() float64 { return float64(r.hb.Sent()) })
	m.CounterFunc("heartbeats_received_total", "Heartbeat messages that came back through the replication stream.", nil, func() float64 { return float64(r.hb.Received()) })
	stats := r.pub.Stats
	m.CounterFunc("kafka_admin_retries_total", "Transient failures (timeouts, NOT_CONTROLLER, lost connections) while preparing a topic (metadata, creation, configs), retried with backoff.", nil, func() float64 { return float64(stats().AdminRetries) })
	m.CounterFunc("records_retried_alone_total", "Records sent again one at a time because the broker refused their batch as a whole (MESSAGE_TOO_LARGE for a batch, INVALID_TIMESTAMP, INVALID_RECORD).", nil, func() float64 { return float64(stats().RetriedAlone) })
	m.GaugeFunc("kafka_topics_one_at_a_time", "Topics produced one record at a time because the broker refused batches of records that fit alone (their max.message.bytes is below what walrelay could learn).", nil, func() float64 { return float64(stats().OneAtATimeTopics) })
	m.CounterFunc("order_at_risk_total", "Records that reached the broker ahead of an earlier record of their partition that was refused with its batch and retried: per-key order may be broken for their keys (each is logged).", nil, func() float64 { return float64(stats().OrderAtRisk) })
	m.CounterFunc("kafka_data_loss_total", "Partitions where franz-go found the broker had lost records it had acknowledged (see the runbook).", nil, func() float64 { return float64(stats().DataLoss) })
	m.CounterFunc("reconnects_total", "Streaming sessions lost and re-established (a standby's attempts on a held slot do not count).", nil, func() float64 { return float64(r.stream.Reconnects()) })
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Status is what the relay reports about itself (GET /status).
type Status struct {
	Streaming          bool       `json:"streaming"`
	Ready              bool       `json:"ready"`
	NotReadyReason     string     `json:"not_ready_reason,omitempty"`
	ConfirmedLSN       string     `json:"confirmed_lsn"`
	ReceivedLSN        string     `json:"received_lsn"`
	InFlightRecords    int        `json:"in_flight_records"`
	InFlightBytes      int64      `json:"in_flight_bytes"`
	PendingTransaction int        `json:"pending_transactions"`
	Reconnects         uint64     `json:"reconnects"`
	LastError          string     `json:"last_error,omitempty"`
	Slot               SlotStatus `json:"slot"`
}

// Status reports the relay's state and the slot's last polled state.
func (r *Relay) Status(ctx context.Context) Status {
	n, b := r.tracker.InFlight()
	st := Status{
		Streaming:          r.stream.Streaming(),
		ConfirmedLSN:       r.tracker.Confirmed().String(),
		ReceivedLSN:        r.stream.Received().String(),
		InFlightRecords:    n,
		InFlightBytes:      b,
		PendingTransaction: r.tracker.Pending(),
		Reconnects:         r.stream.Reconnects(),
		Slot:               r.monitor.current(),
	}
	if err := r.stream.LastError(); err != nil {
		st.LastError = err.Error()
	}
	if err := r.Ready(ctx); err != nil {
		st.NotReadyReason = err.Error()
	} else {
		st.Ready = true
	}
	return st
}

// Ready returns nil when the relay streams from its slot and a Kafka
// broker answers, and otherwise an error saying why not (for /readyz).
func (r *Relay) Ready(ctx context.Context) error {
	if !r.stream.Streaming() {
		st := r.monitor.current()
		switch {
		case st.Active && st.ActivePID != 0:
			return fmt.Errorf("not streaming: slot %q is held by another process (pid %d); waiting for it", r.cfg.Postgres.Slot, st.ActivePID)
		case r.stream.LastError() != nil:
			return fmt.Errorf("not streaming: %w", r.stream.LastError())
		default:
			return fmt.Errorf("not streaming from slot %q yet", r.cfg.Postgres.Slot)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return r.pub.Ping(ctx)
}
