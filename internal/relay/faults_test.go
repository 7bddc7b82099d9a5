package relay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/testenv"
)

func insertEvent(typ, aggregate string) string {
	return fmt.Sprintf(`INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('%s', '%s', 'Happened', '{"n": 1}')`, typ, aggregate)
}

// With the broker refusing produce to one topic, the confirmed position
// must stay before the first transaction holding an unacknowledged record
// while other topics keep flowing; once the broker accepts again,
// everything arrives and the slot catches up with the server's WAL.
func TestRelayHoldsConfirmationBehindRefusedTopic(t *testing.T) {
	f := newFixture(t, nil)
	if f.broker.Cluster == nil {
		t.Skip("needs kfake for fault injection (external brokers configured)")
	}
	run := f.start(t)

	execTx(t, f.dsn, insertEvent("free", "warmup"), insertEvent("stuck", "warmup"))
	f.broker.ReadAll(t, []string{"outbox.event.free", "outbox.event.stuck"}, 2, 30*time.Second)
	f.waitCaughtUp(t, 10*time.Second)
	f.createProbe(t)

	fault := f.broker.Cluster.Fault(kfake.Fault{
		Keys:  []kmsg.Key{kmsg.Produce},
		Topic: "outbox.event.stuck",
		Err:   kerr.NotEnoughReplicas, // retriable, rejected before the write
		Count: -1,
	})
	blocked := execTx(t, f.dsn, insertEvent("stuck", "s-1"), insertEvent("free", "f-0"))
	for i := 1; i <= 20; i++ {
		execTx(t, f.dsn, insertEvent("free", fmt.Sprintf("f-%d", i)))
	}
	blockedEnd := f.txEnd(t, blocked)

	// Other topics keep flowing: warmup + the blocked transaction's free
	// record + 20 more.
	f.broker.ReadAll(t, []string{"outbox.event.free"}, 22, 30*time.Second)
	if fault.Hits() == 0 {
		t.Fatal("the fault never refused a produce request; the test proves nothing")
	}
	for range 20 { // 20 status intervals
		confirmed, _ := f.slot(t)
		if confirmed >= blockedEnd {
			t.Fatalf("confirmed_flush_lsn %s passed the end %s of a transaction whose record the broker refused", confirmed, blockedEnd)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := f.broker.ReadAll(t, []string{"outbox.event.stuck"}, 0, time.Second); len(got) != 1 {
		t.Fatalf("stuck topic has %d records while refused, want only the warmup", len(got))
	}

	fault.Remove()
	f.broker.ReadAll(t, []string{"outbox.event.stuck"}, 2, 30*time.Second)
	f.waitCaughtUp(t, 30*time.Second)
	if confirmed, _ := f.slot(t); confirmed < blockedEnd {
		t.Fatalf("confirmed_flush_lsn %s still before %s after the fault was removed", confirmed, blockedEnd)
	}
	if err := run.stop(); err != nil {
		t.Fatalf("relay stopped with error: %v", err)
	}
}

// With the outbox idle and WAL written to another table of the same
// database, the slot must keep advancing (idle is not stuck).
func TestRelayAdvancesSlotWhileOutboxIdle(t *testing.T) {
	f := newFixture(t, nil)
	run := f.start(t)
	execTx(t, f.dsn, insertEvent("order", "o-1"))
	f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)
	f.waitCaughtUp(t, 10*time.Second)

	testenv.Exec(t, f.dsn, `CREATE TABLE unrelated (id serial PRIMARY KEY, filler text)`)
	start, _ := f.slot(t)
	for range 3 {
		testenv.Exec(t, f.dsn, `INSERT INTO unrelated (filler) SELECT repeat('x', 200) FROM generate_series(1, 1000)`)
		time.Sleep(100 * time.Millisecond)
	}
	_, written := f.slot(t)
	if written <= start {
		t.Fatalf("the unrelated writes produced no WAL (%s -> %s)", start, written)
	}
	f.waitCaughtUp(t, 15*time.Second)
	if confirmed, _ := f.slot(t); confirmed < written {
		t.Fatalf("confirmed_flush_lsn %s did not pass the unrelated WAL at %s", confirmed, written)
	}
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}

// Terminating the walsender mid-stream makes the relay reconnect and
// resume from the slot: every event arrives.
func TestRelayReconnectsAfterWalsenderTerminated(t *testing.T) {
	f := newFixture(t, nil)
	run := f.start(t)
	execTx(t, f.dsn, insertEvent("order", "warmup"))
	f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)

	const total = 400
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for i := range total {
			testenv.Exec(t, f.dsn, insertEvent("order", fmt.Sprintf("o-%d", i%7)))
		}
	}()
	terminated := 0
	for terminated < 3 {
		select {
		case <-writerDone:
			t.Fatalf("writer finished after %d terminations; make it longer", terminated)
		case <-time.After(150 * time.Millisecond):
		}
		n := testenv.QueryValue[int64](t, f.dsn, `SELECT count(pg_terminate_backend(active_pid)) FROM pg_replication_slots WHERE slot_name = 'walrelay' AND active_pid IS NOT NULL`)
		terminated += int(n)
	}
	<-writerDone
	recs := f.broker.ReadAll(t, []string{"outbox.event.order"}, 1+total, 60*time.Second)
	ids := map[string]bool{}
	for _, r := range recs {
		id, _ := header(r, "id")
		ids[id] = true
	}
	if got := testenv.QueryValue[int64](t, f.dsn, `SELECT count(*) FROM outbox`); int(got) != len(ids) {
		t.Fatalf("%d distinct events on Kafka, %d committed", len(ids), got)
	}
	if len(f.logs.lines("replication session lost; reconnecting")) < 3 {
		t.Errorf("expected at least 3 reconnects in the log")
	}
	t.Logf("%d walsender terminations, %d records for %d events (%d duplicates)", terminated, len(recs), len(ids), len(recs)-len(ids))
	f.waitCaughtUp(t, 30*time.Second)
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}

// At the in-flight cap the relay stops reading from the slot instead of
// buffering: with a slow broker, in-flight records and bytes never exceed
// the caps, and everything still arrives.
func TestRelayBackpressureBoundsInFlight(t *testing.T) {
	for _, tc := range []struct {
		name       string
		maxRecords int
		maxBytes   int64
	}{
		{"records cap", 5, 1 << 20},
		{"bytes cap", 10000, 2048},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *config.Config) {
				c.Relay.MaxInFlightRecords = tc.maxRecords
				c.Relay.MaxInFlightBytes = tc.maxBytes
				c.Kafka.Linger = time.Millisecond
			})
			if f.broker.Cluster == nil {
				t.Skip("needs kfake to slow the broker down")
			}
			f.broker.Cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
				f.broker.Cluster.KeepControl()
				time.Sleep(5 * time.Millisecond) // a slow broker; the request is then handled normally
				return nil, nil, false
			})
			run := f.start(t)
			// One transaction of 300 rows of ~170 bytes each.
			testenv.Exec(t, f.dsn, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
				SELECT 'order', 'o-' || (i % 13), 'T', jsonb_build_object('i', i, 'pad', repeat('p', 100)) FROM generate_series(1, 300) i`)
			var maxRecords int
			var maxBytes int64
			stopPolling, polled := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(polled)
				for {
					n, b := run.relay.Tracker().InFlight()
					maxRecords, maxBytes = max(maxRecords, n), max(maxBytes, b)
					select {
					case <-stopPolling:
						return
					case <-time.After(200 * time.Microsecond):
					}
				}
			}()
			f.broker.ReadAll(t, []string{"outbox.event.order"}, 300, 60*time.Second)
			close(stopPolling)
			<-polled
			if maxRecords > tc.maxRecords {
				t.Errorf("%d records in flight, cap %d", maxRecords, tc.maxRecords)
			}
			const recordSize = 300 // an upper bound: one record may cross the bytes cap
			if maxBytes > tc.maxBytes+recordSize {
				t.Errorf("%d bytes in flight, cap %d", maxBytes, tc.maxBytes)
			}
			if maxRecords < 2 {
				t.Errorf("at most %d record in flight: the test did not exercise the cap", maxRecords)
			}
			t.Logf("max in flight: %d records, %d bytes", maxRecords, maxBytes)
			if err := run.stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A session lost in the middle of a large transaction resumes it: the
// rows handed to the producer before the break are not published again.
func TestRelayResumesTransactionAfterReconnect(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Relay.MaxInFlightRecords = 500 })
	run := f.start(t)
	execTx(t, f.dsn, insertEvent("order", "warmup"))
	f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)

	const rows = 30000
	testenv.Exec(t, f.dsn, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
		SELECT 'order', 'o-' || (i % 17), 'T', jsonb_build_object('i', i) FROM generate_series(1, 30000) i`)
	atBreak := f.breakMidTransaction(t, "outbox.event.order", rows)
	f.logs.waitLog(t, "resuming a transaction after reconnecting", nil, 30*time.Second)
	recs := f.broker.ReadAll(t, []string{"outbox.event.order"}, 1+rows, 60*time.Second)
	seen := map[string]int{}
	for _, r := range recs {
		id, _ := header(r, "id")
		seen[id]++
	}
	dups := len(recs) - len(seen)
	if len(seen) != 1+rows || dups != 0 {
		t.Errorf("%d distinct events and %d duplicates, want %d and 0 (break after %v published)", len(seen), dups, 1+rows, atBreak)
	}
	f.waitCaughtUp(t, 30*time.Second)
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}

// A relay stopped while it is still starting (SIGTERM during the startup
// checks) returns nil, like one stopped while streaming, and leaves the slot
// where it was.
func TestRelayStoppedWhileStarting(t *testing.T) {
	f := newFixture(t, nil)
	before, _ := f.slot(t)
	for _, after := range []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond} {
		r, err := relay.New(f.cfg, f.logs.logger(), nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(after, cancel)
		if err := r.Run(ctx); err != nil {
			t.Errorf("stopped %s after start: Run = %v, want nil", after, err)
		}
		cancel()
	}
	if confirmed, _ := f.slot(t); confirmed != before {
		t.Errorf("slot moved from %s to %s", before, confirmed)
	}
}

// A record's bytes stay where the row arrived, in the stream's receive
// buffer, until the broker acknowledges it: with the broker slow to answer,
// the stream reads on through several buffers' worth of rows while records
// wait, and every record still arrives with its own key, id and payload.
// The rows outnumber what the stream may keep buffers for, so records that
// copy their bytes instead (replication.Buffer.Hold refusing) arrive intact
// too.
func TestRelayKeepsRowBytesUntilAcked(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Kafka.Linger = time.Millisecond })
	if f.broker.Cluster == nil {
		t.Skip("needs kfake to slow the broker down")
	}
	f.slowProduce(20 * time.Millisecond)
	run := f.start(t)
	// 12,000 rows of ~1 KiB in transactions of 1,000: about 12 MiB, some
	// 24 of the stream's 512 KiB receive buffers.
	const rows = 12000
	testenv.Exec(t, f.dsn, `DO $$ BEGIN FOR t IN 0..11 LOOP
		INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
		SELECT 'order', 'agg-' || i, 'T', jsonb_build_object('i', i, 'pad', repeat(md5(i::text), 30))
		FROM generate_series(t*1000 + 1, t*1000 + 1000) i;
		COMMIT; END LOOP; END $$`)
	want := map[string][2]string{} // id -> key, payload
	rs, err := testenv.Connect(t, f.dsn).Query(t.Context(), `SELECT id::text, aggregateid, payload::text FROM outbox`)
	if err != nil {
		t.Fatal(err)
	}
	for rs.Next() {
		var id, key, payload string
		if err := rs.Scan(&id, &key, &payload); err != nil {
			t.Fatal(err)
		}
		want[id] = [2]string{key, payload}
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	if len(want) != rows {
		t.Fatalf("outbox has %d rows, want %d", len(want), rows)
	}
	records := f.broker.ReadAll(t, []string{"outbox.event.order"}, rows, 120*time.Second)
	seen := map[string]bool{}
	for _, r := range records {
		id, _ := header(r, "id")
		w, ok := want[id]
		switch {
		case !ok:
			t.Fatalf("record with id header %q (key %q) is not a row", id, r.Key)
		case string(r.Key) != w[0] || string(r.Value) != w[1]:
			t.Fatalf("event %s arrived as key %q value %.60q..., want key %q value %.60q...", id, r.Key, r.Value, w[0], w[1])
		}
		seen[id] = true
	}
	if len(seen) != rows {
		t.Fatalf("%d distinct events arrived, want %d", len(seen), rows)
	}
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}
