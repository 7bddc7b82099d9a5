package relay_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/retention"
	"github.com/walrelay/walrelay/internal/setup"
	"github.com/walrelay/walrelay/internal/slotrecord"
	"github.com/walrelay/walrelay/internal/testenv"
)

var records = slotrecord.Table{Schema: "public"}

// dropUnusedSlot drops the slot walrelay setup created and walrelay's
// record of it: a slot that never existed, as far as walrelay knows (a
// slot dropped with its record kept is one walrelay refuses to recreate).
func dropUnusedSlot(t *testing.T, dsn string) {
	t.Helper()
	testenv.Exec(t, dsn, `SELECT pg_drop_replication_slot('walrelay')`)
	testenv.Exec(t, dsn, `DELETE FROM walrelay_slot_positions WHERE slot_name = 'walrelay'`)
}

// postgres.create_slot (the default), walrelay setup and walrelay slot
// create never silently replace a slot walrelay confirmed through: a new
// slot would start at the current WAL, after the rows the old one had not
// delivered. Each refuses and says what to run; slot create --replace
// creates it and leaves the record marked, so retention stays stopped.
func TestCreateSlotRefusesARecordedSlot(t *testing.T) {
	f := newFixture(t, nil)
	run := f.start(t)
	insertRow(t, f.dsn, "order", "before", `{}`)
	f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
	insertRow(t, f.dsn, "order", "unpublished", `{}`) // in the slot only
	testenv.Exec(t, f.dsn, `SELECT pg_drop_replication_slot('walrelay')`)

	run = f.start(t)
	err := run.wait(30 * time.Second)
	if !errors.Is(err, relay.ErrSlotMissing) || !errors.Is(err, slotrecord.ErrRecorded) {
		t.Fatalf("relay with postgres.create_slot on a dropped slot walrelay confirmed through: %v; want ErrSlotMissing and ErrRecorded", err)
	}
	t.Logf("relay said: %v", err)
	if n := testenv.QueryValue[int64](t, f.dsn, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'walrelay'`); n != 0 {
		t.Fatal("the relay created the slot again")
	}
	conn := testenv.Connect(t, f.dsn)
	if _, err := setup.Run(t.Context(), conn, setup.Names{Schema: "public", Table: "outbox", Publication: "walrelay_outbox", Slot: "walrelay"}); !errors.Is(err, slotrecord.ErrRecorded) {
		t.Fatalf("walrelay setup: %v, want ErrRecorded", err)
	}
	if _, _, err := postgres.CreateRecordedSlot(t.Context(), conn, records, "walrelay", false, false); !errors.Is(err, slotrecord.ErrRecorded) {
		t.Fatalf("walrelay slot create: %v, want ErrRecorded", err)
	}
	if n := testenv.QueryValue[int64](t, f.dsn, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'walrelay'`); n != 0 {
		t.Fatal("setup or slot create created the slot again")
	}
	// --replace: created, marked, retention stopped.
	if _, st, err := postgres.CreateRecordedSlot(t.Context(), conn, records, "walrelay", true, false); err != nil || st.Record == nil || st.Record.JumpedAt == nil {
		t.Fatalf("walrelay slot create --replace: %+v, %v; want the slot created and its record marked", st.Record, err)
	}
	p := retention.New(retention.Config{DSN: f.dsn, Schema: "public", Table: "outbox", TimeColumn: "created_at", Slot: "walrelay",
		Retention: time.Nanosecond, Batch: 100, StatementTimeout: 5 * time.Second, Interval: time.Second}, nil, retention.Metrics{})
	defer p.Close(t.Context())
	if _, err := p.Cycle(t.Context()); !errors.Is(err, retention.ErrSlotJumped) {
		t.Fatalf("retention after slot create --replace: %v, want ErrSlotJumped", err)
	}
	// The relay relays from the new slot and says the slot was replaced.
	run = f.start(t)
	insertRow(t, f.dsn, "order", "after", `{}`)
	f.broker.ReadAll(t, []string{"outbox.event.order"}, 2, 30*time.Second)
	if n := len(f.logs.lines("the slot's position is not one walrelay confirmed")); n == 0 {
		t.Error("the relay did not log that the slot was replaced")
	}
	if got := testenv.MetricValue(t, f.reg, "walrelay_slot_jumped", nil); got != 1 {
		t.Errorf("walrelay_slot_jumped = %v, want 1", got)
	}
	_ = run
}

// A slot moved past walrelay's record by someone else (here
// pg_replication_slot_advance in SQL, skipping a row nobody published) is
// detected: retention stops with ErrSlotJumped (every pass and walrelay
// outbox prune), walrelay run stops at its start with ErrJumped and sets
// walrelay_slot_jumped (issue 33 item 4: a jump is never relayed over),
// and both stay so until an operator adopts the slot; the relay then
// relays on and retention stays stopped only until the adoption.
func TestSlotAdvancedByHandIsDetected(t *testing.T) {
	f := newFixture(t, nil)
	run := f.start(t)
	insertRow(t, f.dsn, "order", "published", `{}`)
	f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
	p := retention.New(retention.Config{DSN: f.dsn, Schema: "public", Table: "outbox", TimeColumn: "created_at", Slot: "walrelay",
		Retention: time.Nanosecond, Batch: 100, StatementTimeout: 5 * time.Second, Interval: time.Second}, nil, retention.Metrics{})
	defer p.Close(t.Context())
	if _, err := p.Cycle(t.Context()); err != nil {
		t.Fatalf("retention before the slot moved: %v", err)
	}

	insertRow(t, f.dsn, "order", "skipped", `{}`)
	testenv.Exec(t, f.dsn, `SELECT pg_replication_slot_advance('walrelay', pg_current_wal_lsn())`)
	for i := range 2 {
		if res, err := p.Cycle(t.Context()); !errors.Is(err, retention.ErrSlotJumped) || res.Rows != 0 {
			t.Fatalf("retention pass %d after the hand advance: %d rows, %v; want 0 and ErrSlotJumped", i+1, res.Rows, err)
		}
	}
	if _, err := p.Once(t.Context(), time.Second); !errors.Is(err, retention.ErrSlotJumped) {
		t.Fatalf("walrelay outbox prune after the hand advance: %v, want ErrSlotJumped", err)
	}
	run = f.start(t)
	if err := run.wait(30 * time.Second); !errors.Is(err, slotrecord.ErrJumped) {
		t.Fatalf("relay start after the hand advance: %v, want ErrJumped", err)
	}
	if got := testenv.MetricValue(t, f.reg, "walrelay_slot_jumped", nil); got != 1 {
		t.Errorf("walrelay_slot_jumped = %v, want 1", got)
	}
	if res, err := p.Cycle(t.Context()); !errors.Is(err, retention.ErrSlotJumped) || res.Rows != 0 {
		t.Fatalf("retention after the relay stopped on the jump: %d rows, %v; want 0 and ErrSlotJumped", res.Rows, err)
	}
	if _, _, err := postgres.AdoptSlot(t.Context(), testenv.Connect(t, f.dsn), records, "walrelay", "test"); err != nil {
		t.Fatalf("adopting the slot: %v", err)
	}
	run = f.start(t)
	for i := range 3 {
		insertRow(t, f.dsn, "order", fmt.Sprint("later-", i), `{}`)
	}
	f.broker.ReadAll(t, []string{"outbox.event.order"}, 4, 30*time.Second)
	f.waitCaughtUp(t, 30*time.Second)
	if n := testenv.QueryValue[int64](t, f.dsn, `SELECT count(*) FROM outbox WHERE aggregateid = 'skipped'`); n != 1 {
		t.Errorf("the skipped row is gone")
	}
	_ = run
}

// Write-ahead: while a busy relay confirms, the slot's confirmed_flush_lsn
// is never past walrelay's record of it, and the record keeps up.
func TestRecordIsAheadOfTheSlot(t *testing.T) {
	f := newFixture(t, nil)
	f.start(t)
	var inserted atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn := testenv.Connect(t, f.dsn)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := conn.Exec(t.Context(), `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) SELECT 'order', 'busy-' || g, 'T', '{}' FROM generate_series(1, 20) g`); err != nil {
				t.Error(err)
				return
			}
			inserted.Add(20)
		}
	}()
	polls, moves := 0, 0
	var last string
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		var ok bool
		var slot string
		err := testenv.Connect(t, f.dsn).QueryRow(t.Context(), `SELECT s.confirmed_flush_lsn <= r.confirmed_lsn, s.confirmed_flush_lsn::text
			FROM pg_replication_slots s JOIN walrelay_slot_positions r ON r.slot_name = s.slot_name WHERE s.slot_name = 'walrelay'`).Scan(&ok, &slot)
		if err != nil {
			t.Fatalf("reading the slot and its record: %v", err)
		}
		if !ok {
			t.Fatalf("poll %d: the slot's confirmed_flush_lsn %s is past walrelay's record", polls, slot)
		}
		if slot != last {
			moves++
			last = slot
		}
		polls++
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	<-done
	if moves < 5 {
		t.Errorf("the slot moved %d times in %d polls while %d rows were inserted; want it to keep up", moves, polls, inserted.Load())
	}
	f.broker.ReadAll(t, []string{"outbox.event.order"}, int(inserted.Load()), 60*time.Second)
	f.waitCaughtUp(t, 30*time.Second)
	t.Logf("%d polls, the slot moved %d times, %d rows", polls, moves, inserted.Load())
}
