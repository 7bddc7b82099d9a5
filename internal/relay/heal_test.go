package relay_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/slotrecord"
	"github.com/walrelay/walrelay/internal/testenv"
)

// fixtureOnCluster is newFixture on a database of a private cluster (for
// server settings such as max_slot_wal_keep_size).
func fixtureOnCluster(t *testing.T, settings map[string]string, mutate func(*config.Config)) *fixture {
	t.Helper()
	f, _ := fixtureCluster(t, settings, mutate)
	return f
}

// fixtureCluster is fixtureOnCluster that also returns the cluster.
func fixtureCluster(t *testing.T, settings map[string]string, mutate func(*config.Config)) (*fixture, *localpg.Cluster) {
	t.Helper()
	c := testenv.PrivateCluster(t, localpg.Options{Settings: settings})
	return newFixtureOn(t, c.DSN("postgres"), nil, mutate), c
}

// loadWriters inserts rows, one per transaction, for keys k0..k3, from n
// goroutines until stop; ids returns what was committed, per key in
// commit order.
type loadWriters struct {
	mu   sync.Mutex
	ids  []string
	stop chan struct{}
	wg   sync.WaitGroup
}

func startWriters(t *testing.T, dsn string, n int) *loadWriters {
	w := &loadWriters{stop: make(chan struct{})}
	for g := range n {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			conn := testenv.Connect(t, dsn)
			for i := 0; ; i++ {
				select {
				case <-w.stop:
					return
				default:
				}
				var id string
				err := conn.QueryRow(context.Background(), `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', $1, 'T', '{}') RETURNING id::text`,
					fmt.Sprintf("k%d", (g+i)%4)).Scan(&id)
				if err != nil {
					t.Errorf("writer %d: %v", g, err)
					return
				}
				w.mu.Lock()
				w.ids = append(w.ids, id)
				w.mu.Unlock()
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	return w
}

func (w *loadWriters) halt() []string {
	close(w.stop)
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.ids...)
}

// delivered reads topic from the start until every id in want was seen
// or timeout, and returns how many of want are missing and how many
// records were duplicates.
func delivered(t *testing.T, b *testenv.Broker, topic string, want []string, timeout time.Duration) (lost, dups int) {
	t.Helper()
	cl := b.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	seen := map[string]int{}
	missing := map[string]bool{}
	for _, id := range want {
		missing[id] = true
	}
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	for len(missing) > 0 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key == "id" {
					seen[string(h.Value)]++
					delete(missing, string(h.Value))
				}
			}
		})
	}
	for _, n := range seen {
		dups += n - 1
	}
	return len(missing), dups
}

// Item 4: a slot walrelay confirmed through that was moved past its
// record (here by hand, skipping a row nobody published) stops walrelay
// run at its start with ErrJumped and the two ways on; with
// outbox.on_slot_loss: heal the next start republishes the skipped row
// from the outbox and streams from the slot.
func TestJumpedSlotStopsRunOrIsHealed(t *testing.T) {
	f := newFixture(t, nil)
	run := f.start(t)
	insertRow(t, f.dsn, "order", "published", `{}`)
	f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
	skipped, _ := insertRow(t, f.dsn, "order", "skipped", `{}`)
	testenv.WaitSlotFree(t, f.dsn, "walrelay", 10*time.Second)
	testenv.Exec(t, f.dsn, `SELECT pg_replication_slot_advance('walrelay', pg_current_wal_lsn())`)

	for i := range 2 { // found at the first start, marked at the second
		run = f.start(t)
		err := run.wait(30 * time.Second)
		if !errors.Is(err, slotrecord.ErrJumped) {
			t.Fatalf("start %d after a hand advance: %v, want ErrJumped", i+1, err)
		}
		t.Logf("relay said: %v", err)
	}
	f.cfg.Outbox.OnSlotLoss = config.SlotLossHeal
	run = f.start(t)
	later, _ := insertRow(t, f.dsn, "order", "later", `{}`)
	if lost, dups := delivered(t, f.broker, "outbox.event.order", []string{skipped, later}, 30*time.Second); lost != 0 {
		t.Fatalf("after the heal: %d of the skipped and later rows lost (%d duplicates)", lost, dups)
	}
	f.waitCaughtUp(t, 30*time.Second)
	if st := testenv.QueryValue[string](t, f.dsn, `SELECT coalesce(jumped_at::text, 'none') || ' ' || note FROM walrelay_slot_positions WHERE slot_name = 'walrelay'`); st[:5] != "none " {
		t.Errorf("record after the heal: %q, want no jump and a heal note", st)
	}
	_ = run
}

// Items 4 and 5 under load: writers run, the slot is dropped (its
// walsender terminated first). walrelay run refuses to create it again
// (ErrSlotMissing, ErrRecorded); with outbox.on_slot_loss: heal it
// creates it with an exported snapshot, republishes the rows after the
// record's covered fence, and streams: every committed row reaches Kafka.
func TestHealDroppedSlotUnderLoad(t *testing.T) {
	f := newFixture(t, nil)
	run := f.start(t)
	w := startWriters(t, f.dsn, 2)
	// Long enough for the recorder to take a fence and cover it.
	deadline := time.Now().Add(40 * time.Second)
	for testenv.QueryValue[bool](t, f.dsn, `SELECT covered_lsn IS NULL FROM walrelay_slot_positions WHERE slot_name = 'walrelay'`) {
		if time.Now().After(deadline) {
			t.Fatal("no covered fence in the record after 40s of load")
		}
		time.Sleep(200 * time.Millisecond)
	}
	dropUnderLoad(t, f.dsn)
	if err := run.stop(); err != nil && !errors.Is(err, relay.ErrSlotMissing) {
		t.Logf("relay stopped with: %v", err)
	}
	run = f.start(t)
	if err := run.wait(30 * time.Second); !errors.Is(err, relay.ErrSlotMissing) || !errors.Is(err, slotrecord.ErrRecorded) {
		t.Fatalf("start without heal on a dropped slot: %v, want ErrSlotMissing and ErrRecorded", err)
	}
	f.cfg.Outbox.OnSlotLoss = config.SlotLossHeal
	f.start(t)
	time.Sleep(2 * time.Second) // writers go on while the healed slot streams
	ids := w.halt()
	lost, dups := delivered(t, f.broker, "outbox.event.order", ids, 60*time.Second)
	healed := f.logs.lines("slot healed: created it at its consistent point; streaming from there")
	t.Logf("%d rows committed, %d lost, %d duplicates; heal: %v", len(ids), lost, dups, healed)
	if lost != 0 {
		t.Fatalf("%d of %d committed rows never reached kafka", lost, len(ids))
	}
	if len(healed) != 1 {
		t.Fatalf("healed %d times, want once", len(healed))
	}
	if rows, _ := healed[0]["rows"].(float64); int(rows) >= len(ids) {
		t.Errorf("the heal republished %v rows of %d: the covered fence did not bound it", rows, len(ids))
	}
	// Rows after the fence that the relay had published before the drop
	// are found on Kafka and not published again.
	if onKafka, _ := healed[0]["on_kafka"].(float64); onKafka == 0 {
		t.Errorf("the heal found none of the gap's rows on Kafka: not deduplicated")
	}
}

// dropUnderLoad terminates the slot's walsender and drops the slot,
// trying again while the relay gets it back first.
func dropUnderLoad(t *testing.T, dsn string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	conn := testenv.Connect(t, dsn)
	for {
		_, err := conn.Exec(t.Context(), `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 'walrelay' AND active_pid IS NOT NULL`)
		if err == nil {
			time.Sleep(10 * time.Millisecond)
			if _, err = conn.Exec(t.Context(), `SELECT pg_drop_replication_slot('walrelay')`); err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("dropping the slot under load: %v", err)
		}
	}
}

// Items 4 and 5: a slot invalidated by max_slot_wal_keep_size (WAL
// written while the relay was stopped, then a checkpoint) stops walrelay
// run with ErrSlotLost and the two ways on; with outbox.on_slot_loss:
// heal the lost slot is dropped, created again, and the rows committed
// while it was stopped are published from the outbox.
func TestHealInvalidatedSlot(t *testing.T) {
	f := fixtureOnCluster(t, map[string]string{"max_slot_wal_keep_size": "1MB"}, nil)
	run := f.start(t)
	w := startWriters(t, f.dsn, 1)
	time.Sleep(time.Second)
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // rows committed while nothing relays
	for range 4 {                      // WAL past max_slot_wal_keep_size, then a checkpoint invalidates the slot
		testenv.Exec(t, f.dsn, `CREATE TABLE IF NOT EXISTS filler (x int); INSERT INTO filler VALUES (1); SELECT pg_switch_wal()`)
	}
	testenv.Exec(t, f.dsn, `CHECKPOINT`)
	if st := testenv.QueryValue[string](t, f.dsn, `SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'walrelay'`); st != "lost" {
		t.Fatalf("wal_status %q, want lost (the test could not invalidate the slot)", st)
	}
	run = f.start(t)
	err := run.wait(30 * time.Second)
	if !errors.Is(err, relay.ErrSlotLost) {
		t.Fatalf("start on a lost slot: %v, want ErrSlotLost", err)
	}
	t.Logf("relay said: %v", err)
	f.cfg.Outbox.OnSlotLoss = config.SlotLossHeal
	f.start(t)
	time.Sleep(time.Second)
	ids := w.halt()
	lost, dups := delivered(t, f.broker, "outbox.event.order", ids, 60*time.Second)
	t.Logf("%d rows committed, %d lost, %d duplicates", len(ids), lost, dups)
	if lost != 0 {
		t.Fatalf("%d of %d committed rows never reached kafka", lost, len(ids))
	}
	if n := len(f.logs.lines("slot healed: created it at its consistent point; streaming from there")); n != 1 {
		t.Fatalf("healed %d times, want once", n)
	}
}

// Item 4's failover case: after a promotion, the new primary's slot can be
// past the record row it replayed (a synced failover slot: the record of
// a position commits after the position). Here the primary is killed
// after rows the relay never published, the standby promoted, and the
// slot created on it past the record (as a synced slot ahead of it, or a
// replacement). walrelay run, with the default outbox.on_slot_loss: stop,
// must neither stop nor skip: the record was last written on an earlier
// timeline of the same system, so it heals in place (republishes the
// rows after the record's covered fence) and streams from the slot.
func TestSlotAheadOfTheRecordAfterPromotion(t *testing.T) {
	f, p := fixtureCluster(t, nil, nil)
	run := f.start(t)
	var published []string
	deadline := time.Now().Add(40 * time.Second)
	for testenv.QueryValue[bool](t, f.dsn, `SELECT covered_lsn IS NULL FROM walrelay_slot_positions WHERE slot_name = 'walrelay'`) {
		if time.Now().After(deadline) {
			t.Fatal("no covered fence in the record after 40s")
		}
		id, _ := insertRow(t, f.dsn, "order", "before", `{}`)
		published = append(published, id)
		time.Sleep(100 * time.Millisecond)
	}
	f.waitCaughtUp(t, 30*time.Second)
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
	var gap []string
	for range 5 {
		id, _ := insertRow(t, f.dsn, "order", "gap", `{}`)
		gap = append(gap, id)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := p.NewStandby(ctx, localpg.StandbyOptions{Slot: "phys"})
	if err != nil {
		t.Fatalf("NewStandby: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	lsn := testenv.QueryValue[string](t, f.dsn, `SELECT pg_current_wal_lsn()::text`)
	for !testenv.QueryValue[bool](t, s.DSN("postgres"), `SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn`, lsn) {
		time.Sleep(50 * time.Millisecond)
	}
	if err := p.Kill(); err != nil {
		t.Fatalf("killing the primary: %v", err)
	}
	if err := s.Promote(ctx); err != nil {
		t.Fatalf("promoting the standby: %v", err)
	}
	dsn := s.DSN("postgres")
	testenv.Exec(t, dsn, `SELECT pg_create_logical_replication_slot('walrelay', 'pgoutput')`)
	if ahead := testenv.QueryValue[bool](t, dsn, `SELECT s.confirmed_flush_lsn > r.confirmed_lsn FROM pg_replication_slots s, walrelay_slot_positions r WHERE s.slot_name = 'walrelay' AND r.slot_name = 'walrelay'`); !ahead {
		t.Fatal("the slot on the promoted server is not past the record: the test proves nothing")
	}

	f.cfg.Postgres.DSN, f.dsn = dsn, dsn
	run = f.start(t)
	after, _ := insertRow(t, dsn, "order", "after", `{}`)
	if lost, dups := delivered(t, f.broker, "outbox.event.order", append(append(gap, after), published...), 30*time.Second); lost != 0 {
		t.Fatalf("after the promotion: %d rows lost (%d duplicates)", lost, dups)
	}
	f.logs.waitLog(t, "slot healed", nil, 30*time.Second)
	if run.exited() {
		t.Fatalf("the relay stopped: %v", run.err)
	}
	if n := len(f.logs.lines("slot healed")); n != 1 {
		t.Errorf("healed %d times, want once (in place)", n)
	}
}

// Item 4 while running: a slot moved past the record between two
// replication sessions (its walsender terminated, then the slot advanced
// by hand over a row nobody published) stops walrelay run at the next
// session's start with ErrJumped, instead of relaying on.
func TestJumpFoundAtASessionStartStopsRun(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Postgres.MinBackoff, c.Postgres.MaxBackoff = time.Second, 2*time.Second })
	run := f.start(t)
	insertRow(t, f.dsn, "order", "published", `{}`)
	f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)
	f.waitCaughtUp(t, 30*time.Second)
	conn := testenv.Connect(t, f.dsn)
	deadline := time.Now().Add(30 * time.Second)
	for {
		testenv.Exec(t, f.dsn, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 'walrelay' AND active_pid IS NOT NULL`)
		insertRow(t, f.dsn, "order", "skipped", `{}`)
		if _, err := conn.Exec(t.Context(), `SELECT pg_replication_slot_advance('walrelay', pg_current_wal_lsn())`); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("could not advance the slot between two sessions in 30s")
		}
	}
	err := run.wait(30 * time.Second)
	if !errors.Is(err, slotrecord.ErrJumped) {
		t.Fatalf("relay after the slot was advanced between sessions: %v, want ErrJumped", err)
	}
	t.Logf("relay said: %v", err)
}

// Item 5 with exactly-once delivery: the slot dropped under load is
// healed twice (dropped again right after the first heal, before walrelay's
// record covers what it republished): each heal fences the transactional
// id, deduplicates the gap against its topics read_committed and
// publishes the rest in Kafka transactions with a checkpoint at the new
// slot's consistent point. A read_committed consumer sees every committed
// row exactly once.
func TestHealDroppedSlotUnderLoadExactlyOnce(t *testing.T) {
	f := newFixture(t, func(c *config.Config) {
		exactlyOnce(c)
		c.Outbox.OnSlotLoss = config.SlotLossHeal
	})
	if err := f.cfg.Validate(); err != nil {
		t.Fatalf("outbox.on_slot_loss: heal with relay.delivery: exactly_once refused: %v", err)
	}
	f.cfg.Outbox.OnSlotLoss = config.SlotLossStop
	run := f.start(t)
	w := startWriters(t, f.dsn, 2)
	deadline := time.Now().Add(40 * time.Second)
	for testenv.QueryValue[bool](t, f.dsn, `SELECT covered_lsn IS NULL FROM walrelay_slot_positions WHERE slot_name = 'walrelay'`) {
		if time.Now().After(deadline) {
			t.Fatal("no covered fence in the record after 40s of load")
		}
		time.Sleep(200 * time.Millisecond)
	}
	dropUnderLoad(t, f.dsn)
	if err := run.stop(); err != nil && !errors.Is(err, relay.ErrSlotMissing) {
		t.Logf("relay stopped with: %v", err)
	}
	f.cfg.Outbox.OnSlotLoss = config.SlotLossHeal
	run = f.start(t)
	for deadline := time.Now().Add(60 * time.Second); len(f.logs.lines("slot healed: created it at its consistent point; streaming from there")) < 1; {
		if time.Now().After(deadline) || run.exited() {
			t.Fatalf("not healed in 60s (exited: %v, err %v)", run.exited(), run.err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Lost again at once: the second heal republishes what the first did
	// (the record's covered fence has hardly moved), and finds it on Kafka.
	dropUnderLoad(t, f.dsn)
	if err := run.stop(); err != nil && !errors.Is(err, relay.ErrSlotMissing) {
		t.Logf("relay stopped with: %v", err)
	}
	f.start(t)
	time.Sleep(2 * time.Second) // writers go on while the healed slot streams
	committed := w.halt()
	end := testenv.QueryValue[string](t, f.dsn, `SELECT pg_current_wal_lsn()::text`)
	lsn, err := pglogrepl.ParseLSN(end)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitConfirmed(t, f.dsn, "walrelay", lsn, 60*time.Second)
	b := f.broker.As(kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	recs := b.ReadAll(t, []string{"outbox.event.order"}, len(committed), 30*time.Second)
	recs = append(recs, b.ReadAll(t, []string{"outbox.event.order"}, 0, 2*time.Second)[len(recs):]...)
	all, dup := ids(recs)
	seen := map[string]bool{}
	for _, id := range all {
		seen[id] = true
	}
	lost := 0
	for _, id := range committed {
		if !seen[id] {
			lost++
		}
	}
	healed := f.logs.lines("slot healed: created it at its consistent point; streaming from there")
	t.Logf("exactly-once, read_committed: %d rows committed, %d records read, %d lost, %d duplicates; heals: %v", len(committed), len(recs), lost, len(dup), healed)
	if lost != 0 || len(dup) != 0 {
		t.Fatalf("read_committed: %d of %d committed rows lost, %d duplicates (first %v)", lost, len(committed), len(dup), dup[:min(len(dup), 5)])
	}
	if len(healed) != 2 {
		t.Fatalf("healed %d times, want twice", len(healed))
	}
	if onKafka, _ := healed[1]["on_kafka"].(float64); onKafka == 0 {
		t.Errorf("the second heal found none of the gap's rows on Kafka: not deduplicated")
	}
	// The stream after the last heal starts from the heal's own
	// checkpoint, at the slot's consistent point: it skips nothing the slot
	// sends. (After the first, the slot may be dropped before a session.)
	h, found := healed[1], false
	for _, l := range f.logs.lines("the checkpoint skips nothing the slot sends") {
		found = found || (l["checkpoint_lsn"] == h["lsn"] && l["slot_confirmed_flush_lsn"] == h["lsn"])
	}
	if !found {
		t.Errorf("the stream did not start from the heal's checkpoint at %v", h["lsn"])
	}
}

// A jumped slot healed in place with exactly-once delivery: the row the
// hand advance skipped is republished in a Kafka transaction, with a
// checkpoint at the slot's position, and the stream goes on from the
// slot: a read_committed consumer sees each row once.
func TestJumpedSlotHealedExactlyOnce(t *testing.T) {
	f := newFixture(t, exactlyOnce)
	run := f.start(t)
	published, _ := insertRow(t, f.dsn, "order", "published", `{}`)
	f.readCommitted(t, []string{"outbox.event.order"}, 1)
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
	skipped, _ := insertRow(t, f.dsn, "order", "skipped", `{}`)
	testenv.WaitSlotFree(t, f.dsn, "walrelay", 10*time.Second)
	testenv.Exec(t, f.dsn, `SELECT pg_replication_slot_advance('walrelay', pg_current_wal_lsn())`)
	run = f.start(t)
	if err := run.wait(30 * time.Second); !errors.Is(err, slotrecord.ErrJumped) {
		t.Fatalf("start after a hand advance: %v, want ErrJumped", err)
	}
	f.cfg.Outbox.OnSlotLoss = config.SlotLossHeal
	f.start(t)
	// After the heal: a row committed between the slot's position and the
	// heal's snapshot is published by both (duplicates, docs/runbook.md).
	f.logs.waitLog(t, "slot healed", nil, 30*time.Second)
	later, _ := insertRow(t, f.dsn, "order", "later", `{}`)
	all, dup := ids(f.readCommitted(t, []string{"outbox.event.order"}, 3))
	t.Logf("read_committed: %v (duplicates %v)", all, dup)
	seen := map[string]bool{}
	for _, id := range all {
		seen[id] = true
	}
	if !seen[published] || !seen[skipped] || !seen[later] || len(dup) != 0 || len(all) != 3 {
		t.Fatalf("read_committed after the in-place heal: %v (duplicates %v), want %s, %s and %s once each", all, dup, published, skipped, later)
	}
	healed := f.logs.lines("slot healed")
	if len(healed) != 1 || healed[0]["rows"] != float64(1) {
		t.Errorf("heal: %v, want 1 row republished (the skipped one)", healed)
	}
}

// With exactly-once delivery another producer's transaction left open on
// an outbox topic holds its last stable offset below records this relay
// committed after it began. The heal's deduplication waits for it to end
// (kafka.transaction_timeout at most) instead of reading only to the last
// stable offset, so those records are found and not published again.
func TestHealDedupWaitsForAnOpenTransaction(t *testing.T) {
	f := newFixture(t, exactlyOnce)
	f.createProbe(t)
	run := f.start(t)
	before, end := insertRows(t, f, 20)
	testenv.WaitConfirmed(t, f.dsn, "walrelay", end, 30*time.Second)
	other := f.broker.Client(t, kgo.TransactionalID(otherDeployment), kgo.TransactionTimeout(10*time.Minute), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := other.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for p := range int32(f.cfg.Kafka.TopicPartitions) {
		if err := other.ProduceSync(t.Context(), &kgo.Record{Topic: "outbox.event.order", Partition: p, Value: []byte("other")}).FirstErr(); err != nil {
			t.Fatalf("the other producer's record: %v", err)
		}
	}
	after, end := insertRows(t, f, 20)
	testenv.WaitConfirmed(t, f.dsn, "walrelay", end, 30*time.Second)
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
	testenv.WaitSlotFree(t, f.dsn, "walrelay", 10*time.Second)
	testenv.Exec(t, f.dsn, `SELECT pg_drop_replication_slot('walrelay')`)
	f.cfg.Outbox.OnSlotLoss = config.SlotLossHeal
	f.start(t)
	time.Sleep(2 * time.Second) // the heal waits for the other transaction
	if err := other.EndTransaction(t.Context(), kgo.TryAbort); err != nil {
		t.Fatalf("aborting the other producer's transaction: %v", err)
	}
	healed := f.logs.waitLog(t, "slot healed", nil, 60*time.Second)
	t.Logf("heal: rows %v, on_kafka %v", healed["rows"], healed["on_kafka"])
	requireOnce(t, f, append(before, after...))
	if onKafka, _ := healed["on_kafka"].(float64); onKafka < float64(len(after)) {
		t.Errorf("the heal found %v rows on Kafka, want at least the %d committed above the other transaction's start", onKafka, len(after))
	}
}
