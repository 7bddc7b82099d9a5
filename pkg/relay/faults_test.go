package relay_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

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
