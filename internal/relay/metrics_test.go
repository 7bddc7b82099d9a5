package relay_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/testenv"
)

// histogramSum is the sum of h's observations.
func histogramSum(t *testing.T, h prometheus.Histogram) float64 {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleSum()
}

// waitMetric waits until name{labels} satisfies ok.
func waitMetric(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string, what string, ok func(float64) bool) float64 {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		v, found := testenv.FindMetric(t, reg, name, labels)
		if found && ok(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s%v = %v (found %v), want %s", name, labels, v, found, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestMetricsAfterKnownWorkload(t *testing.T) {
	f := newFixture(t, nil)
	testenv.Exec(t, f.dsn, `ALTER TABLE outbox ALTER COLUMN aggregatetype DROP NOT NULL`)
	run := f.start(t)
	execTx(t, f.dsn, insertEvent("order", "o-1"), insertEvent("order", "o-2"))
	execTx(t, f.dsn, insertEvent("customer", "c-1"),
		`INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES (NULL, 'x', 'T', '{}')`)
	f.broker.ReadAll(t, []string{"outbox.event.order", "outbox.event.customer", "walrelay.deadletter"}, 4, 30*time.Second)
	f.waitCaughtUp(t, 10*time.Second)
	reg := f.reg

	for topic, want := range map[string]float64{"outbox.event.order": 2, "outbox.event.customer": 1, "walrelay.deadletter": 1} {
		waitMetric(t, reg, "walrelay_events_published_total", map[string]string{"topic": topic}, fmt.Sprint(want), func(v float64) bool { return v == want })
	}
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"walrelay_rows_rejected_total", map[string]string{"class": "routing_value_missing", "policy": "dlq"}, 1},
		{"walrelay_publish_errors_total", map[string]string{"kind": "routing_value_missing"}, 1},
		{"walrelay_transactions_total", nil, 2},
		{"walrelay_end_to_end_latency_seconds", nil, 4}, // sample count
		{"walrelay_produce_ack_latency_seconds", nil, 4},
		{"walrelay_commit_read_latency_seconds", nil, 2}, // one per transaction
		{"walrelay_in_flight_records", nil, 0},
		{"walrelay_in_flight_bytes", nil, 0},
		{"walrelay_slot_held", map[string]string{"slot": "walrelay"}, 1},
		{"walrelay_reconnects_total", nil, 0},
		{"walrelay_build_info", map[string]string{"version": "test"}, 1},
	}
	for _, c := range checks {
		if got := testenv.MetricValue(t, reg, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// A record's produce-to-ack time is part of its commit-to-ack time
	// (the two are read from different clocks).
	if ack, e2e := histogramSum(t, f.metrics.ProduceAckLatency), histogramSum(t, f.metrics.EndToEndLatency); ack <= 0 || ack > e2e {
		t.Errorf("produce-to-ack latencies sum to %gs, commit-to-ack to %gs: want 0 < produce-to-ack <= commit-to-ack", ack, e2e)
	}
	// franz-go's request round trips, per broker (the produce requests and
	// the client's metadata requests).
	waitMetric(t, reg, "walrelay_kafka_request_duration_e2e_seconds", nil, "some requests", func(v float64) bool { return v > 0 })
	// Each transaction is read before any of its records is acked.
	if read, e2e := histogramSum(t, f.metrics.CommitReadLatency), histogramSum(t, f.metrics.EndToEndLatency); read <= 0 || read > e2e {
		t.Errorf("commit-to-read latencies sum to %gs, commit-to-ack to %gs: want 0 < commit-to-read <= commit-to-ack", read, e2e)
	}
	// The exact exposition of the counters, every series included (error
	// series exist at 0 from startup).
	const want = `
# HELP walrelay_rows_rejected_total Outbox rows the router rejected, by error class and the policy applied (dlq, stop, log).
# TYPE walrelay_rows_rejected_total counter
walrelay_rows_rejected_total{class="payload_invalid",policy="dlq"} 0
walrelay_rows_rejected_total{class="record_too_large",policy="dlq"} 0
walrelay_rows_rejected_total{class="routing_value_missing",policy="dlq"} 1
walrelay_rows_rejected_total{class="schema_rejected",policy="dlq"} 0
walrelay_rows_rejected_total{class="topic_invalid",policy="dlq"} 0
walrelay_rows_rejected_total{class="topic_rejected",policy="dlq"} 0
# HELP walrelay_transactions_total Transactions read from the replication slot.
# TYPE walrelay_transactions_total counter
walrelay_transactions_total 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "walrelay_rows_rejected_total", "walrelay_transactions_total"); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(f.metrics.PublishErrors.WithLabelValues("produce")); got != 0 {
		t.Errorf("publish_errors_total{kind=produce} = %v, want 0", got)
	}

	// The confirmed LSN gauge equals what the slot reports, and the
	// polled lag falls to walrelay's own last slot record at most (a few
	// hundred bytes; below 16 KiB even with a full-page image), which an
	// idle relay never confirms (docs/DESIGN.md, "Retention"), with
	// wal_status reserved.
	confirmed, _ := f.slot(t)
	waitMetric(t, reg, "walrelay_confirmed_lsn_bytes", nil, confirmed.String(), func(v float64) bool { return uint64(v) >= uint64(confirmed) })
	if got := testenv.MetricValue(t, reg, "walrelay_received_lsn_bytes", nil); uint64(got) < uint64(confirmed) {
		t.Errorf("received LSN %v behind confirmed %s", got, confirmed)
	}
	waitMetric(t, reg, "walrelay_slot_lag_bytes", map[string]string{"position": "confirmed_flush"}, "below 16 KiB", func(v float64) bool { return v < 16<<10 })
	waitMetric(t, reg, "walrelay_slot_wal_status", map[string]string{"status": "reserved"}, "1", func(v float64) bool { return v == 1 })
	waitMetric(t, reg, "walrelay_slot_active", nil, "1", func(v float64) bool { return v == 1 })
	if v := testenv.MetricValue(t, reg, "walrelay_slot_lag_bytes", map[string]string{"position": "restart"}); v <= 0 {
		t.Errorf("restart lag %v, want > 0 (restart_lsn trails the confirmed position)", v)
	}
	if v := testenv.MetricValue(t, reg, "walrelay_slot_safe_wal_size_bytes", nil); v <= 0 {
		t.Errorf("safe_wal_size %v, want +Inf (unlimited) or positive", v)
	}

	// franz-go's client metrics are on the same registry.
	families, _ := reg.Gather()
	var kafka int
	for _, mf := range families {
		if strings.HasPrefix(mf.GetName(), "walrelay_kafka_") {
			kafka++
		}
	}
	if kafka == 0 {
		t.Error("no walrelay_kafka_* (kprom) metrics registered")
	}

	// A terminated walsender counts as a reconnect.
	testenv.Exec(t, f.dsn, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 'walrelay'`)
	waitMetric(t, reg, "walrelay_reconnects_total", nil, "1", func(v float64) bool { return v == 1 })
	waitMetric(t, reg, "walrelay_slot_held", nil, "1 again", func(v float64) bool { return v == 1 })

	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
	if got := testenv.MetricValue(t, reg, "walrelay_slot_held", nil); got != 0 {
		t.Errorf("slot_held = %v after stop, want 0", got)
	}
}

// While the broker refuses produce and WAL keeps growing, the stall gauge
// grows; it returns to 0 once the relay catches up.
func TestMetricsStall(t *testing.T) {
	f := newFixture(t, nil)
	if f.broker.Cluster == nil {
		t.Skip("needs kfake for fault injection")
	}
	run := f.start(t)
	execTx(t, f.dsn, insertEvent("order", "warmup"))
	f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)
	fault := f.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotEnoughReplicas, Count: -1})
	execTx(t, f.dsn, insertEvent("order", "stuck"))
	waitMetric(t, f.reg, "walrelay_slot_stall_seconds", nil, "> 1s", func(v float64) bool { return v > 1 })
	if v := testenv.MetricValue(t, f.reg, "walrelay_in_flight_records", nil); v != 1 {
		t.Errorf("in_flight_records = %v while the broker refuses, want 1", v)
	}
	fault.Remove()
	f.waitCaughtUp(t, 30*time.Second)
	waitMetric(t, f.reg, "walrelay_slot_stall_seconds", nil, "0", func(v float64) bool { return v == 0 })
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}

// While another process streams from the slot, the relay is not ready and
// names the holder's pid; when the holder goes away it takes over.
func TestReadyWhileSlotHeldElsewhere(t *testing.T) {
	f := newFixture(t, nil)
	holder := testenv.HoldSlot(t, f.dsn, "walrelay", "proto_version '1'", "publication_names 'walrelay_outbox'")
	run := f.start(t)

	deadline := time.Now().Add(20 * time.Second)
	want := fmt.Sprintf("held by another process (pid %d)", holder.PID())
	for {
		err := run.relay.Ready(t.Context())
		if err != nil && strings.Contains(err.Error(), want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Ready() = %v, want an error containing %q", err, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st := run.relay.Status(t.Context()); st.Ready || st.Streaming || st.Slot.ActivePID != int32(holder.PID()) || st.Role != relay.RoleStandby || !st.ReadyStandbyOK {
		t.Errorf("status while held elsewhere: %+v", st)
	}
	// A healthy standby: ready for a probe that accepts one.
	if standby, err := run.relay.StandbyReady(t.Context()); err != nil || !strings.Contains(standby, "active in another process") {
		t.Errorf("StandbyReady() while held elsewhere = %q, %v; want a standby", standby, err)
	}

	_ = holder.Close(t.Context())
	execTx(t, f.dsn, insertEvent("order", "after-takeover"))
	f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)
	if err := run.relay.Ready(t.Context()); err != nil {
		t.Fatalf("Ready() after takeover = %v", err)
	}
	if standby, err := run.relay.StandbyReady(t.Context()); err != nil || standby != "" {
		t.Errorf("StandbyReady() after takeover = %q, %v; want ready, not a standby", standby, err)
	}
	if st := run.relay.Status(t.Context()); st.Role != relay.RoleActive || !st.ReadyStandbyOK {
		t.Errorf("status after takeover: role %q, ready_standbyok %t", st.Role, st.ReadyStandbyOK)
	}
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}
