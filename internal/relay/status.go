// Status, readiness and the gauges read from live state: what the relay
// reports about itself.

package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/publisher"
	"github.com/walrelay/walrelay/internal/replication"
	"github.com/walrelay/walrelay/internal/slotmon"
	"github.com/walrelay/walrelay/internal/snapshot"
)

// registerGauges registers the metrics read from live state at scrape time:
// the slot monitor's, and the stream's, the checkpoint's, the heartbeats'
// and the publisher's.
func (r *Relay) registerGauges() {
	m, slot := r.metrics, prometheus.Labels{"slot": r.cfg.Postgres.Slot}
	r.monitor.Register(m)
	m.GaugeFunc("slot_held", "1 when this instance streams from the slot.", slot, func() float64 {
		if r.stream.Streaming() {
			return 1
		}
		return 0
	})
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
	m.GaugeFunc("oldest_unpublished_event_age_seconds", "Seconds since the commit (Postgres's timestamp) of the oldest transaction whose outbox events walrelay read and Kafka has not acknowledged (exactly_once: whose Kafka transaction has not committed); 0 when none. Blind to what walrelay has not read yet (docs/metrics.md).", nil, func() float64 {
		return r.oldestUnpublishedAge(time.Now()).Seconds()
	})
	m.CounterFunc("heartbeats_sent_total", "Heartbeat messages emitted into the slot's database (relay.heartbeat_interval).", nil, func() float64 { return float64(r.hb.Sent()) })
	m.CounterFunc("heartbeats_received_total", "Heartbeat messages that came back through the replication stream.", nil, func() float64 { return float64(r.hb.Received()) })
	stats := func() publisher.Stats {
		if p := r.pubShared.Load(); p != nil {
			return p.Stats()
		}
		return publisher.Stats{} // exactly-once, before the startup built the producer
	}
	m.CounterFunc("kafka_admin_retries_total", "Transient failures (timeouts, NOT_CONTROLLER, lost connections) while preparing a topic (metadata, creation, configs), retried with backoff.", nil, func() float64 { return float64(stats().AdminRetries) })
	m.CounterFunc("records_retried_alone_total", "Records sent again one at a time because the broker refused their batch as a whole (MESSAGE_TOO_LARGE for a batch, INVALID_TIMESTAMP, INVALID_RECORD).", nil, func() float64 { return float64(stats().RetriedAlone) })
	m.GaugeFunc("kafka_topics_one_at_a_time", "Topics produced one record at a time because the broker refused batches of records that fit alone (their max.message.bytes is below what walrelay could learn).", nil, func() float64 { return float64(stats().OneAtATimeTopics) })
	m.CounterFunc("order_at_risk_total", "Records that reached the broker ahead of an earlier record of their partition that was refused with its batch and retried: per-key order may be broken for their keys (each is logged).", nil, func() float64 { return float64(stats().OrderAtRisk) })
	m.CounterFunc("kafka_data_loss_total", "Partitions where franz-go found the broker had lost records it had acknowledged (see the runbook).", nil, func() float64 { return float64(stats().DataLoss) })
	m.GaugeFunc("delivery_mode", "1, labelled with relay.delivery: at_least_once or exactly_once.", prometheus.Labels{"mode": r.cfg.Relay.Delivery}, func() float64 { return 1 })
	m.GaugeFunc("checkpoint_lsn_bytes", "Exactly-once delivery: the position the last committed Kafka transaction checkpointed (every Postgres transaction before it is on Kafka), as a byte position; 0 in at-least-once mode.", nil, func() float64 {
		return float64(r.kafkaTxns.lastLSN.Load())
	})
	snap := func() snapshot.Status { return r.snap.progress.Status(time.Now()) }
	m.CounterFunc("snapshot_rows_total", "Outbox rows the snapshot (snapshot.mode=initial, or walrelay snapshot) has routed and handed on to Kafka.", nil, func() float64 { return float64(snap().Done) })
	m.GaugeFunc("snapshot_rows_remaining", "Outbox rows the running snapshot has still to hand on (of the total counted in its Postgres snapshot); 0 when none runs.", nil, func() float64 {
		if s := snap(); s.Running {
			return float64(s.Remaining())
		}
		return 0
	})
	m.GaugeFunc("snapshot_rows_planned", "Outbox rows the last snapshot counted in its Postgres snapshot (with snapshot.where): the total it publishes.", nil, func() float64 { return float64(snap().Total) })
	m.CounterFunc("reconnects_total", "Streaming sessions lost and re-established (a standby's attempts on a held slot do not count).", nil, func() float64 { return float64(r.stream.Reconnects()) })
}

// Status is what the relay reports about itself (GET /status).
type Status struct {
	Streaming      bool   `json:"streaming"`
	Ready          bool   `json:"ready"`
	NotReadyReason string `json:"not_ready_reason,omitempty"`
	// Role is RoleActive, RoleStandby or RoleNone.
	Role string `json:"role"`
	// ReadyStandbyOK is what GET /readyz?standbyok=true answers
	// (StandbyReady): ready, or a healthy standby.
	ReadyStandbyOK     bool   `json:"ready_standbyok"`
	ConfirmedLSN       string `json:"confirmed_lsn"`
	ReceivedLSN        string `json:"received_lsn"`
	InFlightRecords    int    `json:"in_flight_records"`
	InFlightBytes      int64  `json:"in_flight_bytes"`
	PendingTransaction int    `json:"pending_transactions"`
	Reconnects         uint64 `json:"reconnects"`
	Delivery           string `json:"delivery"`
	// OldestUnpublishedAgeSeconds is
	// walrelay_oldest_unpublished_event_age_seconds, and
	// OldestUnpublishedCommitTime the commit time it is measured from
	// (omitted when nothing is unpublished).
	OldestUnpublishedAgeSeconds float64    `json:"oldest_unpublished_event_age_seconds"`
	OldestUnpublishedCommitTime *time.Time `json:"oldest_unpublished_commit_time,omitempty"`
	// Exactly-once delivery only.
	KafkaTransactionsCommitted *uint64 `json:"kafka_transactions_committed,omitempty"`
	KafkaTransactionsAborted   *uint64 `json:"kafka_transactions_aborted,omitempty"`
	CheckpointLSN              string  `json:"checkpoint_lsn,omitempty"`
	LastError                  string  `json:"last_error,omitempty"`
	// SchemaRegistryWaiting: the stream waits for the schema registry
	// (unavailable, or refusing the credentials); omitted without an avro
	// converter.
	SchemaRegistryWaiting *bool          `json:"schema_registry_waiting,omitempty"`
	Slot                  slotmon.Status `json:"slot"`
	// Snapshot is the initial snapshot's progress, when this process ran
	// one.
	Snapshot *snapshot.Status `json:"snapshot,omitempty"`

	// TransactionalID is, with exactly-once delivery, the producer's
	// transactional id and the checkpoint's key, once the startup derived
	// it.
	TransactionalID string `json:"transactional_id,omitempty"`
}

// Status reports the relay's state and the slot's last polled state.
func (r *Relay) Status(ctx context.Context) Status {
	r = r.current()
	n, b := r.tracker.InFlight()
	st := Status{
		Streaming:          r.stream.Streaming(),
		ConfirmedLSN:       r.tracker.Confirmed().String(),
		ReceivedLSN:        r.stream.Received().String(),
		InFlightRecords:    n,
		InFlightBytes:      b,
		PendingTransaction: r.tracker.Pending(),
		Reconnects:         r.stream.Reconnects(),
		Slot:               r.monitor.Current(),
		Delivery:           r.cfg.Relay.Delivery,
	}
	if at, ok := r.tracker.Oldest(); ok {
		at = at.UTC()
		st.OldestUnpublishedCommitTime = &at
		st.OldestUnpublishedAgeSeconds = max(time.Since(at), 0).Seconds()
	}
	r.delivery.report(&st)
	if sn := r.SnapshotStatus(); sn.Total > 0 || sn.Running {
		st.Snapshot = &sn
	}
	if err := r.stream.LastError(); err != nil {
		st.LastError = err.Error()
	}
	if r.avro != nil {
		w := r.avro.waiting()
		st.SchemaRegistryWaiting = &w
	}
	st.Role = r.role()
	if err := r.Ready(ctx); err != nil {
		st.NotReadyReason = err.Error()
		if st.Role == RoleStandby {
			_, err := r.StandbyReady(ctx)
			st.ReadyStandbyOK = err == nil
		}
	} else {
		st.Ready, st.ReadyStandbyOK = true, true
	}
	return st
}

// What a relay is for its slot (Status.Role).
const (
	// RoleActive: the relay streams from the slot.
	RoleActive = "active"
	// RoleStandby: the relay's last attempt on the slot found another
	// process streaming from it; it takes the slot over once it is free.
	// StandbyReady says whether it is a healthy standby.
	RoleStandby = "standby"
	// RoleNone: neither: starting (the startup checks, the initial
	// snapshot, a synchronized copy waiting for a promotion), reconnecting
	// after a lost session or a failed attempt, or stopping on an error.
	// Status.NotReadyReason says which.
	RoleNone = "none"
)

// role is the relay's Status.Role.
func (r *Relay) role() string {
	switch _, last := r.stream.LastSessionEnd(); {
	case r.stream.Streaming():
		return RoleActive
	case errors.Is(last, replication.ErrSlotActive):
		return RoleStandby
	default:
		return RoleNone
	}
}

// standbyAttemptBound is how long a standby's attempt on the slot
// (connecting, IDENTIFY_SYSTEM, reading the slot) may take before
// StandbyReady takes it for hung: what the daemon's own connections wait
// to connect (internal/postgres's connect timeout).
const standbyAttemptBound = 10 * time.Second

// StandbyReady answers a readiness probe that accepts a healthy standby
// (GET /readyz?standbyok=true), so that with two processes on one slot
// both are Ready while either could stream. While the relay streams it
// returns "" and Ready's answer. Otherwise it returns a description of
// the standby and nil when the relay is a healthy standby, one that could
// take the slot over now: its last attempt on the slot reached Postgres
// and found another process streaming from it, that attempt ended at most
// postgres.max_backoff + standbyAttemptBound ago (the next one runs
// within postgres.max_backoff: an older end means it hangs), its pipeline
// has not failed, and a Kafka broker answers (2s timeout). Else an error
// saying why not: Ready's reason (starting, Postgres unreachable, a
// synchronized copy, ...) or the standby's.
func (r *Relay) StandbyReady(ctx context.Context) (standby string, err error) {
	r = r.current()
	at, last := r.stream.LastSessionEnd()
	if r.stream.Streaming() || !errors.Is(last, replication.ErrSlotActive) {
		return "", r.Ready(ctx)
	}
	if err := r.fail.err(); err != nil {
		return "", fmt.Errorf("standby whose pipeline failed: %w", err)
	}
	age, bound := time.Since(at), r.cfg.Postgres.MaxBackoff+standbyAttemptBound
	if age > bound {
		return "", fmt.Errorf("standby: no attempt on slot %q reached Postgres for %s (postgres.max_backoff %s + %s for an attempt): the attempt running now hangs",
			r.cfg.Postgres.Slot, age.Round(time.Second), r.cfg.Postgres.MaxBackoff, standbyAttemptBound)
	}
	p := r.pubShared.Load()
	if p == nil {
		return "", errors.New("standby: no kafka client yet")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := p.Ping(ctx); err != nil {
		return "", fmt.Errorf("standby: %w", err)
	}
	return fmt.Sprintf("standby: %v (%s ago); it takes the slot over once it is free", last, age.Round(time.Millisecond)), nil
}

// Ready returns nil when the relay streams from its slot and a Kafka
// broker answers, and otherwise an error saying why not (for /readyz).
func (r *Relay) Ready(ctx context.Context) error {
	r = r.current()
	if !r.stream.Streaming() {
		st := r.monitor.Current()
		switch sn, wait := r.SnapshotStatus(), r.standbyWait(); {
		case wait != "":
			return errors.New(wait)
		case sn.Running:
			return fmt.Errorf("not streaming: initial snapshot running, %d of %d rows handed on (eta %s)", sn.Done, sn.Total, sn.ETA)
		case r.fslot.waiting.Load():
			return fmt.Errorf("not streaming: %s; waiting", postgres.SyncedCopyText(r.cfg.Postgres.Slot))
		case errors.Is(r.stream.LastError(), replication.ErrSlotSynced):
			// Before "held by another process": the slot sync worker
			// holds the copy while it updates it.
			return fmt.Errorf("not streaming: %w", r.stream.LastError())
		case r.stream.LastError() != nil && !errors.Is(r.stream.LastError(), replication.ErrSlotActive):
			// Before the slot's last poll, which a failed poll leaves
			// as it was: Postgres stopped, the slot still reads held.
			return fmt.Errorf("not streaming: %w", r.stream.LastError())
		case st.Active && st.ActivePID != 0:
			return fmt.Errorf("not streaming: slot %q is held by another process (pid %d); waiting for it", r.cfg.Postgres.Slot, st.ActivePID)
		case r.stream.LastError() != nil:
			return fmt.Errorf("not streaming: %w", r.stream.LastError())
		default:
			return fmt.Errorf("not streaming from slot %q yet", r.cfg.Postgres.Slot)
		}
	}
	if r.avro.waiting() {
		return errors.New("waiting for the schema registry (unavailable, or refusing walrelay's credentials): the stream reads nothing meanwhile and Postgres keeps the WAL")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	p := r.pubShared.Load()
	if p == nil {
		return fmt.Errorf("not streaming from slot %q yet", r.cfg.Postgres.Slot)
	}
	return p.Ping(ctx)
}

// oldestUnpublishedAge is how long before now the oldest transaction with
// events walrelay read and Kafka has not acknowledged committed
// (checkpoint.Tracker.Oldest): 0 when there is none, and 0 rather than
// negative when Postgres's clock is ahead of this host's.
func (r *Relay) oldestUnpublishedAge(now time.Time) time.Duration {
	at, ok := r.tracker.Oldest()
	if !ok {
		return 0
	}
	return max(now.Sub(at), 0)
}
