package relay_test

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/config"
)

// On SIGTERM with a record in flight (the broker refusing it with a
// retriable error), the relay says at once what it waits for, before the
// drain ends: "stopping: draining 1 records (up to
// relay.shutdown_timeout 2s)".
func TestRelaySaysWhatTheStopDrains(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Relay.ShutdownTimeout = 2 * time.Second })
	if f.broker.Cluster == nil {
		t.Skip("needs kfake for its faults")
	}
	run := f.start(t)
	fault := f.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "outbox.event.held", Err: kerr.NotEnoughReplicas, Count: -1})
	defer fault.Remove()
	execTx(t, f.dsn, insertEvent("held", "h-1"))
	deadline := time.Now().Add(30 * time.Second)
	for n, _ := run.relay.Tracker().InFlight(); fault.Hits() == 0 || n == 0; n, _ = run.relay.Tracker().InFlight() {
		if time.Now().After(deadline) {
			t.Fatal("the held record was never in flight")
		}
		time.Sleep(10 * time.Millisecond)
	}
	run.cancel()
	const want = "stopping: draining 1 records (up to relay.shutdown_timeout 2s)"
	line := f.logs.waitLog(t, want, nil, 30*time.Second)
	if line["records"] != float64(1) {
		t.Errorf("stopping line: %v, want records 1", line)
	}
	_ = run.wait(30 * time.Second)
	out := f.logs.String()
	if i, j := strings.Index(out, want), strings.Index(out, "shutdown timeout reached"); j >= 0 && i > j {
		t.Errorf("the stop was announced after its timeout:\n%s", out)
	}
}
