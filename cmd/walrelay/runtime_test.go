package main

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
)

// walrelay run sets GOMAXPROCS from relay.max_procs, the garbage
// collector's target to 25% and Go's soft memory limit from
// relay.max_in_flight_bytes, and leaves each alone when its Go variable is
// set: what the process reports on /metrics (client_golang's Go collector
// reads them from the runtime). The collector's scheduler
// metrics are on.
func TestRunSetsRuntimeLimits(t *testing.T) {
	e := newE2E(t)
	e.setup(t, "created")
	var base []string
	for _, kv := range e.env {
		if !strings.HasPrefix(kv, "GOMAXPROCS=") && !strings.HasPrefix(kv, "GOMEMLIMIT=") && !strings.HasPrefix(kv, "GOGC=") {
			base = append(base, kv)
		}
	}
	for _, tc := range []struct {
		name       string
		env        []string
		procs      int
		gogc       int
		limitBytes int64
	}{
		{name: "defaults", procs: 1, gogc: 25, limitBytes: 4*4<<20 + 16<<20},
		{name: "max_procs 0 and a smaller in-flight cap",
			env:   []string{"WALRELAY_RELAY_MAX_PROCS=0", "WALRELAY_RELAY_MAX_IN_FLIGHT_BYTES=1048576"},
			procs: runtime.NumCPU(), gogc: 25, limitBytes: 4*1<<20 + 16<<20},
		{name: "Go's variables win",
			env:   []string{"WALRELAY_RELAY_MAX_PROCS=1", "GOMAXPROCS=3", "GOMEMLIMIT=64MiB", "GOGC=150"},
			procs: 3, gogc: 150, limitBytes: 64 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			listen := "127.0.0.1:" + closedPort(t)
			env := append(append(append([]string(nil), base...), "WALRELAY_HTTP_LISTEN="+listen), tc.env...)
			c := startChild(t, env, "run")
			deadline := time.Now().Add(30 * time.Second)
			for metricValue(t, listen, "go_sched_gomaxprocs_threads") < 0 {
				if c.exited() || time.Now().After(deadline) {
					t.Fatalf("no go_sched_gomaxprocs_threads on %s (exited=%t)", listen, c.exited())
				}
				time.Sleep(20 * time.Millisecond)
			}
			if got := metricValue(t, listen, "go_sched_gomaxprocs_threads"); got != float64(tc.procs) {
				t.Errorf("GOMAXPROCS = %v, want %d", got, tc.procs)
			}
			if got := metricValue(t, listen, "go_gc_gogc_percent"); got != float64(tc.gogc) {
				t.Errorf("GOGC = %v, want %d", got, tc.gogc)
			}
			if got := metricValue(t, listen, "go_gc_gomemlimit_bytes"); got != float64(tc.limitBytes) {
				t.Errorf("memory limit = %v bytes, want %d", got, tc.limitBytes)
			}
			// How long goroutines waited to run: the scheduler's metrics are on.
			if got := metricValue(t, listen, "go_sched_latencies_seconds_count"); got < 0 {
				t.Errorf("no go_sched_latencies_seconds on /metrics")
			}
			stopRelay(t, c)
		})
	}
}

// A message from the slot larger than the in-flight caps (a 12 MB row,
// dead-lettered as too large for Kafka) raises Go's memory limit to at
// least base + 3 × its size before walrelay reads it, so the limit is
// never below what the process holds; other messages leave it alone.
func TestRunRaisesMemoryLimitForLargeMessage(t *testing.T) {
	e := newE2E(t)
	e.setup(t, "created")
	var env []string
	for _, kv := range e.env {
		if !strings.HasPrefix(kv, "GOMEMLIMIT=") {
			env = append(env, kv)
		}
	}
	listen := "127.0.0.1:" + closedPort(t)
	c := startChild(t, append(env, "WALRELAY_HTTP_LISTEN="+listen), "run")
	const base = 4*4<<20 + 16<<20
	deadline := time.Now().Add(30 * time.Second)
	for metricValue(t, listen, "go_gc_gomemlimit_bytes") != base {
		if c.exited() || time.Now().After(deadline) {
			t.Fatalf("memory limit %v, want %d at start (exited=%t)", metricValue(t, listen, "go_gc_gomemlimit_bytes"), base, c.exited())
		}
		time.Sleep(20 * time.Millisecond)
	}
	const size = 12 << 20
	testenv.Exec(t, e.dsn, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'big', 'T', jsonb_build_object('blob', repeat('x', `+fmt.Sprint(size)+`)))`)
	_, target := e.slot(t)
	e.waitConfirmed(t, target, 60*time.Second)
	if got := metricValue(t, listen, "go_gc_gomemlimit_bytes"); got < base+3*size {
		t.Errorf("memory limit %v after a %d-byte message, want at least %d", got, size, base+3*size)
	}
	stopRelay(t, c)
}
