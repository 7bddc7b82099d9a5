package relay_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/slotrecord"
	"github.com/walrelay/walrelay/internal/testenv"
)

// stopWithin is how long a `pg_ctl stop -m fast` may take before the test
// calls it hung: a hang check, far above the second or two a fast
// shutdown takes. A walsender that waits for its client to confirm the
// shutdown checkpoint waits for ever.
const stopWithin = 45 * time.Second

// Postgres's fast shutdown (systemctl restart, a minor upgrade, the first
// step of a switchover) must complete while walrelay streams, idle or
// under inserts: the walsender sends the WAL up to the shutdown checkpoint
// and exits only once the client reported it flushed, or closed the
// connection. walrelay confirms only what it recorded first in its slot
// record, and the record cannot be written on a server that is shutting
// down: the relay must end the session (close the replication
// connection) rather than keep the walsender waiting. After the restart
// it streams again by itself, nothing committed is lost (exactly-once:
// nothing is published twice either), and the slot record is not marked
// jumped.
func TestFastShutdownWhileStreaming(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*config.Config)
	}{
		{"at-least-once", nil},
		{"exactly-once", exactlyOnce},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testenv.PrivateCluster(t, localpg.Options{})
			f := newFixtureOn(t, c.DSN("postgres"), nil, tc.mutate)
			run := f.start(t)
			topics := []string{"outbox.event.shutdown"}

			// Idle: everything relayed and confirmed, then a fast stop.
			execTx(t, f.dsn, insertEvent("shutdown", "idle-1"))
			execTx(t, f.dsn, insertEvent("shutdown", "idle-2"))
			waitKeys(t, f, topics, []string{"idle-1", "idle-2"}, 30*time.Second)
			f.waitCaughtUp(t, 30*time.Second)
			fastRestart(t, c, run, "idle")
			requireEnded(t, f, 1)
			execTx(t, f.dsn, insertEvent("shutdown", "after-idle"))
			readKeys(t, f, topics, []string{"after-idle"}, 60*time.Second)

			// Under inserts: a writer commits one row a transaction
			// throughout, reconnecting while the server is down.
			w := startWriter(t, f.dsn)
			w.waitRows(t, 50)
			fastRestart(t, c, run, "under inserts")
			requireEnded(t, f, 2)
			w.waitRows(t, w.rows()+50) // writing again after the restart
			w.stop()

			if run.exited() {
				t.Fatalf("the relay stopped across the restarts: %v", run.err)
			}
			// Every row committed (read from the table: a commit the
			// shutdown cut off may have committed or not) is on Kafka.
			want := committedKeys(t, f.dsn)
			got := readKeys(t, f, topics, want, 60*time.Second)
			lost, dups := 0, 0
			for _, k := range want {
				switch n := got[k]; {
				case n == 0:
					lost++
					if lost <= 5 {
						t.Errorf("%s was committed and is not on Kafka", k)
					}
				case n > 1:
					dups += n - 1
				}
			}
			t.Logf("%d rows committed across two fast restarts: lost %d, duplicates %d", len(want), lost, dups)
			if lost > 0 {
				t.Errorf("%d of %d committed rows were lost", lost, len(want))
			}
			if tc.mutate != nil && dups > 0 {
				t.Errorf("exactly-once delivery published %d duplicates to a read_committed reader", dups)
			}
			f.waitCaughtUp(t, 30*time.Second)

			// The slot was never confirmed past the record: not jumped.
			s, err := slotrecord.Read(t.Context(), testenv.Connect(t, f.dsn), slotrecord.Table{Schema: "public"}, "walrelay")
			if err != nil {
				t.Fatalf("reading the slot record: %v", err)
			}
			if s.Record == nil {
				t.Fatal("no slot record")
			}
			if s.Record.JumpedAt != nil || s.Jumped() != "" {
				t.Errorf("the slot record is marked jumped after fast restarts: %q (found now: %q)", s.Record.Jump, s.Jumped())
			}
			if v := testenv.MetricValue(t, f.reg, "walrelay_slot_jumped", nil); v != 0 {
				t.Errorf("walrelay_slot_jumped = %v after fast restarts", v)
			}
			if err := run.stop(); err != nil {
				t.Fatalf("stopping the relay: %v", err)
			}
		})
	}
}

// A fast shutdown completes too while a record is in flight that Kafka
// refuses (a broker outage during a Postgres restart): the walsender
// waits for a position walrelay may not confirm, and would wait until
// Kafka acknowledged. The relay ends the session when the server says it
// shuts down; the record is published once Kafka takes it again, and
// the row committed after the restart follows.
func TestFastShutdownWhileKafkaRefuses(t *testing.T) {
	c := testenv.PrivateCluster(t, localpg.Options{})
	f, run, fault := refusingFixture(t, c, nil)
	// A transaction Kafka takes, then at once one it refuses: the tracker
	// stops at the first one's end, which is recorded (transactions moved
	// it), and keepalives do not move it while the second is in flight.
	// Nothing is left to record: only the server can say it shuts down.
	execTx(t, f.dsn, insertEvent("free", "taken"))
	execTx(t, f.dsn, insertEvent("refused", "in-flight"))
	readKeys(t, f, []string{"outbox.event.free"}, []string{"taken"}, 30*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for fault.Hits() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the fault never refused a produce request; the test proves nothing")
		}
		time.Sleep(20 * time.Millisecond)
	}
	fastRestart(t, c, run, "with a record Kafka refuses")
	requireEnded(t, f, 1)
	afterRefusal(t, f, run, fault, []string{"warmup", "in-flight"})
}

// fastRestart stops c with `pg_ctl stop -m fast`, failing the test when
// the stop does not complete within stopWithin (the relay is then stopped
// so that the shutdown can finish, and what the server's processes were
// doing is logged), and starts it again.
func fastRestart(t *testing.T, c *localpg.Cluster, run *running, phase string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), stopWithin)
	defer cancel()
	begin := time.Now()
	if err := c.Stop(ctx, "fast"); err != nil {
		t.Logf("the server's processes after %s:\n%s", time.Since(begin).Round(time.Second), serverProcesses(c))
		_ = run.stop() // closes the replication connection: the shutdown completes
		t.Fatalf("pg_ctl stop -m fast (%s) did not complete within %s while the relay streamed: %v", phase, stopWithin, err)
	}
	t.Logf("fast shutdown (%s) took %s", phase, time.Since(begin).Round(time.Millisecond))
	ctx, cancel = context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := c.Restart(ctx); err != nil {
		t.Fatalf("restarting postgres: %v", err)
	}
}

// endedLog is what the relay logs when it ends a session because Postgres
// shuts down.
const endedLog = "postgres is shutting down and the slot's position cannot be recorded: ending the replication session"

// requireEnded fails the test unless the relay logged at least n times that it
// ended the session because Postgres shut down: the shutdown completed
// because of it, not by chance.
func requireEnded(t *testing.T, f *fixture, n int) {
	t.Helper()
	if got := len(f.logs.lines(endedLog)); got < n {
		t.Errorf("the relay logged %d times that it ended the session for a shutdown, want at least %d", got, n)
	}
}

// serverProcesses lists the postmaster of c and its children (ps).
func serverProcesses(c *localpg.Cluster) string {
	b, err := os.ReadFile(filepath.Join(c.DataDir(), "postmaster.pid"))
	if err != nil {
		return err.Error()
	}
	pid, _, _ := strings.Cut(string(b), "\n")
	out, _ := exec.Command("ps", "-o", "pid,args", "-p", pid, "--ppid", pid).CombinedOutput()
	return string(out)
}

// writer commits one outbox row per transaction (aggregate w-<n>) until
// stopped, reconnecting after errors (a server down).
type writer struct {
	mu     sync.Mutex
	n      int // rows committed, as the writer saw it
	cancel context.CancelFunc
	done   chan struct{}
}

func startWriter(t *testing.T, dsn string) *writer {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	w := &writer{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		var conn *pgx.Conn
		defer func() {
			if conn != nil {
				_ = conn.Close(context.Background())
			}
		}()
		for i := 0; ctx.Err() == nil; i++ {
			if conn == nil {
				c, err := pgx.Connect(ctx, dsn)
				if err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				conn = c
			}
			if _, err := conn.Exec(ctx, insertEvent("shutdown", fmt.Sprintf("w-%d", i))); err != nil {
				_ = conn.Close(context.Background())
				conn = nil
				continue
			}
			w.mu.Lock()
			w.n++
			w.mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	t.Cleanup(w.stop)
	return w
}

func (w *writer) rows() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// waitRows waits until the writer committed n rows.
func (w *writer) waitRows(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for w.rows() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the writer committed %d rows of %d within a minute", w.rows(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (w *writer) stop() {
	w.cancel()
	<-w.done
}

// committedKeys are the aggregate ids of every row in the outbox.
func committedKeys(t *testing.T, dsn string) []string {
	t.Helper()
	rows, err := testenv.Connect(t, dsn).Query(t.Context(), `SELECT aggregateid FROM outbox ORDER BY id`)
	if err != nil {
		t.Fatalf("reading the outbox: %v", err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("reading the outbox: %v", err)
	}
	return keys
}

// At its in-flight cap (Kafka refusing) the relay reads nothing from the
// stream, so it never sees the walsender's requests for a reply at
// shutdown: the recorder must ask the server itself (stuckProbe), or a
// fast shutdown waits until Kafka answers again.
func TestFastShutdownAtInFlightCap(t *testing.T) {
	c := testenv.PrivateCluster(t, localpg.Options{})
	const maxInFlight = 5
	f, run, fault := refusingFixture(t, c, func(cfg *config.Config) {
		cfg.Relay.MaxInFlightRecords = maxInFlight
	})
	keys := []string{"warmup"}
	for i := range 4 * maxInFlight {
		k := fmt.Sprintf("capped-%d", i)
		execTx(t, f.dsn, insertEvent("refused", k))
		keys = append(keys, k)
	}
	deadline := time.Now().Add(30 * time.Second)
	for n, _ := run.relay.Tracker().InFlight(); n < maxInFlight; n, _ = run.relay.Tracker().InFlight() {
		if time.Now().After(deadline) {
			t.Fatalf("%d records in flight after 30s, want the cap %d: the test proves nothing", n, maxInFlight)
		}
		time.Sleep(20 * time.Millisecond)
	}
	fastRestart(t, c, run, "at the in-flight cap")
	requireEnded(t, f, 1)
	afterRefusal(t, f, run, fault, keys)
}

// refusedTopic is the topic refusingFixture's broker refuses.
const refusedTopic = "outbox.event.refused"

// refusingFixture starts a relay on cluster c (mutate applied to its
// configuration), relays a first event of type refused ("warmup") and then
// makes the broker refuse every produce to refusedTopic with a retriable
// error, so that its records stay in flight.
func refusingFixture(t *testing.T, c *localpg.Cluster, mutate func(*config.Config)) (*fixture, *running, *kfake.FaultHandle) {
	t.Helper()
	f := newFixtureOn(t, c.DSN("postgres"), nil, mutate)
	if f.broker.Cluster == nil {
		t.Skip("needs kfake for fault injection (external brokers configured)")
	}
	run := f.start(t)
	execTx(t, f.dsn, insertEvent("refused", "warmup"))
	waitKeys(t, f, []string{refusedTopic}, []string{"warmup"}, 30*time.Second)
	f.waitCaughtUp(t, 30*time.Second)
	fault := f.broker.Cluster.Fault(kfake.Fault{
		Keys:  []kmsg.Key{kmsg.Produce},
		Topic: refusedTopic,
		Err:   kerr.NotEnoughReplicas, // retriable: the records stay in flight
		Count: -1,
	})
	return f, run, fault
}

// afterRefusal lifts the fault after a fast restart and checks what must
// hold then: the keys refused before the restart and one written after it
// are on Kafka, the same relay carries on and catches up, and the slot
// record is not marked jumped (nothing was confirmed past it).
func afterRefusal(t *testing.T, f *fixture, run *running, fault *kfake.FaultHandle, keys []string) {
	t.Helper()
	fault.Remove()
	execTx(t, f.dsn, insertEvent("refused", "after"))
	keys = append(keys, "after")
	got := readKeys(t, f, []string{refusedTopic}, keys, 60*time.Second)
	for _, k := range keys {
		if got[k] == 0 {
			t.Errorf("%s is not on Kafka (read %v)", k, got)
		}
	}
	if run.exited() {
		t.Fatalf("the relay stopped: %v", run.err)
	}
	f.waitCaughtUp(t, 30*time.Second)
	s, err := slotrecord.Read(t.Context(), testenv.Connect(t, f.dsn), slotrecord.Table{Schema: "public"}, "walrelay")
	if err != nil || s.Record == nil {
		t.Fatalf("reading the slot record: %v (record %v)", err, s.Record)
	}
	if s.Record.JumpedAt != nil || s.Jumped() != "" {
		t.Errorf("the slot record is marked jumped: %q (found now: %q)", s.Record.Jump, s.Jumped())
	}
	if err := run.stop(); err != nil {
		t.Fatalf("stopping the relay: %v", err)
	}
}
