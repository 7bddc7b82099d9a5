package relay_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/testenv"
)

// Heartbeats come back through the stream and move the slot of a database
// where nothing else writes.
func TestHeartbeatsMoveIdleSlot(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Relay.HeartbeatInterval = 200 * time.Millisecond })
	run := f.start(t)
	waitMetric(t, f.reg, "walrelay_heartbeats_received_total", nil, ">= 1", func(v float64) bool { return v >= 1 })
	start, _ := f.slot(t)
	waitMetric(t, f.reg, "walrelay_heartbeats_received_total", nil, ">= 5", func(v float64) bool { return v >= 5 })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if now, _ := f.slot(t); now > start {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("confirmed_flush_lsn stayed at %s while heartbeats flowed", start)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if sent := testenv.MetricValue(t, f.reg, "walrelay_heartbeats_sent_total", nil); sent < 5 {
		t.Errorf("heartbeats_sent_total = %v", sent)
	}
	if len(f.logs.lines("heartbeats are not coming back")) != 0 {
		t.Error("warned about heartbeats that did come back")
	}
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}

// A relay that stopped reading (at its in-flight cap behind a broker that
// refuses) warns that its heartbeats do not come back.
func TestHeartbeatsWarnWhenStreamIsStuck(t *testing.T) {
	f := newFixture(t, func(c *config.Config) {
		c.Relay.HeartbeatInterval = 200 * time.Millisecond
		c.Relay.MaxInFlightRecords = 1
	})
	if f.broker.Cluster == nil {
		t.Skip("needs kfake for fault injection")
	}
	fault := f.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotEnoughReplicas, Count: -1})
	execTx(t, f.dsn, insertEvent("order", "stuck"))
	run := f.start(t)
	f.logs.waitLog(t, "heartbeats are not coming back through the replication stream", nil, 20*time.Second)
	fault.Remove()
	f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)
	waitMetric(t, f.reg, "walrelay_heartbeats_received_total", nil, ">= 1 after recovery", func(v float64) bool { return v >= 1 })
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}
