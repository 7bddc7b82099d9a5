package relay_test

import (
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/testenv"
)

// A row larger than relay.max_in_flight_bytes is admitted only when
// nothing else is in flight, so that in-flight bytes stay within the cap
// plus that one record. With one small record held in flight by the
// broker, the large row that follows is not produced; the stream keeps
// reporting its position while it holds the row; once the small record is
// acknowledged the large one goes, alone.
func TestRelayAdmitsOversizedRowAlone(t *testing.T) {
	const limit = 4096
	f := newFixture(t, func(c *config.Config) {
		c.Relay.MaxInFlightBytes = limit
		c.Kafka.Linger = time.Millisecond
	})
	if f.broker.Cluster == nil {
		t.Skip("needs kfake to hold a record in flight")
	}
	// A slow broker: every record stays in flight a while, long enough
	// for the watch below to see it.
	f.slowProduce(20 * time.Millisecond)
	run := f.start(t)
	execTx(t, f.dsn, insertEvent("held", "warmup"), insertEvent("big", "warmup"))
	f.broker.ReadAll(t, []string{"outbox.event.held", "outbox.event.big"}, 2, 30*time.Second)

	// Watch what is in flight from here on.
	var mu sync.Mutex
	var together []string
	maxBytes := int64(0)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			n, b := run.relay.Tracker().InFlight()
			mu.Lock()
			maxBytes = max(maxBytes, b)
			if n > 1 && b > limit+1024 { // the large record and another
				together = append(together, "")
			}
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	}()

	fault := f.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "outbox.event.held", Err: kerr.NotEnoughReplicas, Count: -1})
	execTx(t, f.dsn, insertEvent("held", "h-1"))
	deadline := time.Now().Add(30 * time.Second)
	for fault.Hits() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the held record was never produced")
		}
		time.Sleep(10 * time.Millisecond)
	}
	testenv.Exec(t, f.dsn, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
		VALUES ('big', 'b-1', 'T', jsonb_build_object('pad', repeat('x', 20000)))`)

	// The large row waits for the held record; the walsender still hears
	// from the stream.
	replies := map[string]bool{}
	deadline = time.Now().Add(30 * time.Second)
	for len(replies) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("status updates stopped while the large row waited: %d reply times seen", len(replies))
		}
		replies[testenv.QueryValue[string](t, f.dsn, `
			SELECT coalesce(max(r.reply_time::text), '') FROM pg_stat_replication r
			JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE s.slot_name = 'walrelay'`)] = true
		time.Sleep(50 * time.Millisecond)
	}
	if got := f.broker.ReadAll(t, []string{"outbox.event.big"}, 0, 2*time.Second); len(got) != 1 {
		t.Errorf("%d records on the large row's topic while another record was in flight, want only the warmup", len(got))
	}
	if n, b := run.relay.Tracker().InFlight(); n != 1 || b > limit {
		t.Errorf("in flight while the large row waits: %d records, %d bytes; want the held one alone", n, b)
	}

	fault.Remove()
	f.broker.ReadAll(t, []string{"outbox.event.big"}, 2, 30*time.Second)
	f.broker.ReadAll(t, []string{"outbox.event.held"}, 2, 30*time.Second)
	f.waitCaughtUp(t, 30*time.Second)
	close(stop)
	<-stopped
	mu.Lock()
	defer mu.Unlock()
	if len(together) > 0 {
		t.Errorf("the large record was in flight together with another %d times (max %d bytes in flight, cap %d)", len(together), maxBytes, limit)
	}
	if maxBytes <= limit {
		t.Errorf("at most %d bytes in flight: the large record was never seen in flight; the test proves nothing", maxBytes)
	}
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}
