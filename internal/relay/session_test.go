package relay_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/walrelay/walrelay/internal/testenv"
)

// Tests of what a relay does across replication sessions within one
// process: a transaction resumed after breaks, a standby taking over a
// slot, a server replaced under the same DSN.

// count returns how many log lines have exactly the message msg.
func (b *logBuffer) count(msg string) int {
	return strings.Count(b.String(), `"msg":"`+msg+`"`)
}

// endOffsets is the number of records on topic: the sum of its
// partitions' end offsets (nothing is ever deleted from a test topic).
func endOffsets(t *testing.T, f *fixture, topic string) int64 {
	t.Helper()
	adm := kadm.NewClient(f.broker.Client(t))
	ends, err := adm.ListEndOffsets(t.Context(), topic)
	if err != nil {
		t.Fatalf("listing end offsets of %s: %v", topic, err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset of %s[%d]: %v", topic, o.Partition, o.Err)
		}
		n += o.Offset
	})
	return n
}

// walsender returns the pid of the walsender holding the relay's slot, 0
// if none.
func walsender(t *testing.T, conn *pgx.Conn) int32 {
	t.Helper()
	var pid int32
	err := conn.QueryRow(t.Context(), `SELECT coalesce(max(r.pid), 0) FROM pg_stat_replication r
		JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE s.slot_name = 'walrelay'`).Scan(&pid)
	if err != nil {
		t.Fatalf("reading pg_stat_replication: %v", err)
	}
	return pid
}

// A transaction whose session breaks twice while it streams is published
// once: the second break comes right after the relay resumed it, before
// the re-sent copy has passed the point of the first break. The rows
// handled before the first break must still be passed over in the third
// session. No duplicate without a process restart.
func TestRelayResumesTransactionAfterTwoBreaks(t *testing.T) {
	f := newFixture(t, nil)
	run := f.start(t)
	execTx(t, f.dsn, insertEvent("order", "warmup"))
	f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)
	admin := testenv.Connect(t, f.dsn) // open already: a break costs one round trip
	published := func() float64 {
		v, _ := testenv.FindMetric(t, f.reg, "walrelay_events_published_total", map[string]string{"topic": "outbox.event.order"})
		return v
	}
	// drained waits until nothing is in flight and returns what was
	// published: every row handed to the producer so far.
	drained := func() float64 {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			if n, _ := run.relay.Tracker().InFlight(); n == 0 {
				return published()
			}
			if time.Now().After(deadline) {
				t.Fatal("records still in flight after 60s")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	terminate := func(pid int32) {
		t.Helper()
		var ok bool
		if err := admin.QueryRow(t.Context(), `SELECT pg_terminate_backend($1)`, pid).Scan(&ok); err != nil || !ok {
			t.Fatalf("terminating walsender %d: %v %v", pid, ok, err)
		}
	}
	newWalsender := func(old int32) int32 {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			if pid := walsender(t, admin); pid != 0 && pid != old {
				return pid
			}
			if time.Now().After(deadline) {
				t.Fatal("the relay did not stream again within 60s")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	const rows = 200000
	testenv.Exec(t, f.dsn, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
		SELECT 'order', 'o-' || (i % 17), 'T', jsonb_build_object('i', i) FROM generate_series(1, 200000) i`)

	// First break, once part of the transaction is published.
	pid := newWalsender(0)
	deadline := time.Now().Add(120 * time.Second)
	for published() < 40000 {
		if time.Now().After(deadline) {
			t.Fatal("the transaction did not start publishing")
		}
		time.Sleep(5 * time.Millisecond)
	}
	terminate(pid)
	handled := drained()
	if handled >= rows {
		t.Fatalf("the whole transaction (%v rows) was published before the first break; the test proves nothing", handled)
	}
	t.Logf("first break after %v rows", handled-1)

	// Second break: as soon as the next session resumes the transaction
	// (its Begin arrived: the relay logs the resume), before the re-sent
	// copy has passed the first break point, which shows as nothing more
	// published by that session. Should a session get past it first, it
	// is broken the same way and the next one tried.
	const resumed = "resuming a transaction after reconnecting"
	before := false
	for attempt := 1; attempt <= 5 && !before; attempt++ {
		seen := f.logs.count(resumed)
		pid = newWalsender(pid)
		deadline := time.Now().Add(120 * time.Second)
		for f.logs.count(resumed) == seen {
			if time.Now().After(deadline) {
				t.Fatal("the relay did not resume the transaction within 120s")
			}
			time.Sleep(time.Millisecond)
		}
		terminate(pid)
		now := drained()
		before = now == handled
		t.Logf("break %d: %v rows handled before it, %v after", attempt+1, handled-1, now-1)
		handled = now
	}
	if !before {
		t.Fatal("no session was broken before its replay passed the previous break point; the test proves nothing")
	}

	f.waitCaughtUp(t, 120*time.Second)
	recs := f.broker.ReadAll(t, []string{"outbox.event.order"}, 1+rows, 120*time.Second)
	seen := map[string]int{}
	for _, r := range recs {
		id, _ := header(r, "id")
		seen[id]++
	}
	total := endOffsets(t, f, "outbox.event.order")
	if len(seen) != 1+rows || total != 1+rows {
		t.Errorf("%d distinct events, %d records on the topic; want %d of each (0 lost, 0 duplicates)", len(seen), total, 1+rows)
	}
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}
