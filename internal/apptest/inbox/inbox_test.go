package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/inbox"
	"github.com/walrelay/walrelay/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const topic = "outbox.event.account"

// fixture is a database with the inbox table and a business table whose
// effect is not idempotent (a balance that adds each credit), and a broker
// with the topic on 3 partitions.
type fixture struct {
	dsn    string
	pool   *pgxpool.Pool
	in     *inbox.Inbox
	broker *testenv.Broker
	calls  atomic.Int64 // handler calls that ran to the end
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{dsn: testenv.Postgres(t).NewDatabase(t)}
	pool, err := pgxpool.New(t.Context(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	f.pool = pool
	if f.in, err = inbox.New(inbox.Config{}); err != nil {
		t.Fatal(err)
	}
	if err := f.in.Create(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, f.dsn, `CREATE TABLE balances (account text PRIMARY KEY, cents bigint NOT NULL)`)
	f.broker = testenv.Kafka(t, kfake.SeedTopics(3, topic))
	return f
}

// credit is the business effect: it adds the record's amount (its value)
// to the balance of the account (its key).
func (f *fixture) credit(ctx context.Context, tx pgx.Tx, rec *kgo.Record) error {
	_, err := tx.Exec(ctx, `INSERT INTO balances VALUES ($1, $2::text::bigint)
		ON CONFLICT (account) DO UPDATE SET cents = balances.cents + excluded.cents`, string(rec.Key), string(rec.Value))
	if err == nil {
		f.calls.Add(1)
	}
	return err
}

// event is a record as walrelay publishes it: key = aggregate id, header id.
func event(id, account string, cents int) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: []byte(account), Value: []byte(fmt.Sprint(cents)),
		Headers: []kgo.RecordHeader{{Key: "type", Value: []byte("Credited")}, {Key: "id", Value: []byte(id)}}}
}

// events returns n events: event i credits i+1 cents to account i%4.
func events(n int) []*kgo.Record {
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, event(fmt.Sprintf("evt-%03d", i), fmt.Sprintf("acct-%d", i%4), i+1))
	}
	return recs
}

// total is the sum of the credits of n distinct events.
func total(n int) int64 { return int64(n * (n + 1) / 2) }

func (f *fixture) produce(t *testing.T, recs []*kgo.Record) {
	t.Helper()
	if err := f.broker.Client(t).ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// balance is the sum of every balance, and the inbox's row count.
func (f *fixture) balance(t *testing.T) (cents, ids int64) {
	t.Helper()
	return testenv.QueryValue[int64](t, f.dsn, `SELECT coalesce(sum(cents), 0)::bigint FROM balances`),
		testenv.QueryValue[int64](t, f.dsn, `SELECT count(*) FROM inbox`)
}

// consume runs Consume on a goroutine until the group has committed the
// end offset of every partition, then stops it and returns its error.
func (f *fixture) consume(t *testing.T, group string, cfg inbox.ConsumerConfig, h inbox.Handler, log *slog.Logger) error {
	t.Helper()
	cfg.Brokers, cfg.Group, cfg.Topics = f.broker.Addrs(), group, []string{topic}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- f.in.Consume(ctx, f.pool, cfg, h, log) }()
	adm := kadm.NewClient(f.broker.Client(t))
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case err := <-errc:
			return err
		case <-time.After(100 * time.Millisecond):
		}
		if f.committedAll(t, adm, group) {
			cancel()
			return <-errc
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s did not commit every offset within 20s", group)
		}
	}
}

// committedAll says whether group committed, on every partition of the
// topic, the partition's end offset.
func (f *fixture) committedAll(t *testing.T, adm *kadm.Client, group string) bool {
	t.Helper()
	ends, err := adm.ListEndOffsets(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := adm.FetchOffsets(t.Context(), group)
	if err != nil {
		return false // the group may not exist yet
	}
	all := true
	ends.Each(func(o kadm.ListedOffset) {
		c, ok := committed.Lookup(o.Topic, o.Partition)
		if o.Offset > 0 && (!ok || c.At < o.Offset) {
			all = false
		}
	})
	return all
}

// TestProcess: a record applied once, skipped the second time; a record
// without an id refused with nothing written.
func TestProcess(t *testing.T) {
	f := newFixture(t)
	rec := event("evt-1", "acct-1", 250)
	rec.Partition, rec.Offset = 2, 41
	for i, want := range []bool{true, false} {
		applied, err := f.in.Process(t.Context(), f.pool, rec, f.credit)
		if err != nil || applied != want {
			t.Fatalf("Process #%d = %v, %v; want applied %v", i+1, applied, err, want)
		}
	}
	if cents, ids := f.balance(t); cents != 250 || ids != 1 {
		t.Errorf("balance %d with %d inbox ids, want 250 with 1", cents, ids)
	}
	where := testenv.QueryValue[string](t, f.dsn, `SELECT concat_ws(' ', id, topic, kafka_partition, kafka_offset) FROM inbox`)
	if where != "evt-1 "+topic+" 2 41" {
		t.Errorf("inbox row = %q, want the event's id, topic, partition and offset", where)
	}

	noID := event("", "acct-1", 1)
	noID.Headers = noID.Headers[:1]
	if _, err := f.in.Process(t.Context(), f.pool, noID, f.credit); !errors.Is(err, inbox.ErrNoEventID) {
		t.Fatalf("Process(record without id) = %v, want ErrNoEventID", err)
	}
	if cents, ids := f.balance(t); cents != 250 || ids != 1 || f.calls.Load() != 1 {
		t.Errorf("after a record without id: balance %d, %d ids, %d handler calls; want 250, 1, 1", cents, ids, f.calls.Load())
	}
}

// TestHandlerFailureRollsBackTheInboxRow: the handler's change and the
// inbox row go together, so a failed event is processed again, once.
func TestHandlerFailureRollsBackTheInboxRow(t *testing.T) {
	f := newFixture(t)
	rec := event("evt-1", "acct-1", 250)
	failAfterWriting := func(ctx context.Context, tx pgx.Tx, rec *kgo.Record) error {
		if err := f.credit(ctx, tx, rec); err != nil {
			return err
		}
		return errors.New("downstream refused")
	}
	if applied, err := f.in.Process(t.Context(), f.pool, rec, failAfterWriting); applied || err == nil || !strings.Contains(err.Error(), "downstream refused") {
		t.Fatalf("Process with a failing handler = %v, %v; want not applied and the handler's error", applied, err)
	}
	if cents, ids := f.balance(t); cents != 0 || ids != 0 {
		t.Fatalf("after the failure: balance %d with %d inbox ids, want nothing", cents, ids)
	}
	if applied, err := f.in.Process(t.Context(), f.pool, rec, f.credit); !applied || err != nil {
		t.Fatalf("Process again = %v, %v; want applied", applied, err)
	}
	if cents, ids := f.balance(t); cents != 250 || ids != 1 {
		t.Errorf("after the retry: balance %d with %d inbox ids, want 250 with 1", cents, ids)
	}
}

// TestConsumeAppliesDuplicatesOnce: events produced twice (as a relay
// that restarted without confirming publishes them again), then the whole
// topic replayed from offset 0 by a new group: each event's effect once.
func TestConsumeAppliesDuplicatesOnce(t *testing.T) {
	f := newFixture(t)
	const n = 40
	recs := events(n)
	f.produce(t, recs)
	f.produce(t, events(n)[10:25]) // the same ids again
	var logs testenv.SyncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if err := f.consume(t, "g1", inbox.ConsumerConfig{MaxPollRecords: 7}, f.credit, log); err != nil {
		t.Fatalf("Consume: %v", err)
	}
	if cents, ids := f.balance(t); cents != total(n) || ids != n || f.calls.Load() != n {
		t.Fatalf("balance %d, %d inbox ids, %d effects; want %d, %d, %d", cents, ids, f.calls.Load(), total(n), n, n)
	}
	if skipped := strings.Count(logs.String(), "processed before; skipped"); skipped != 15 {
		t.Errorf("%d duplicates skipped, want the 15 produced twice", skipped)
	}

	// A new group reads everything again from offset 0.
	if err := f.consume(t, "g2", inbox.ConsumerConfig{}, f.credit, log); err != nil {
		t.Fatalf("Consume (replay): %v", err)
	}
	if cents, ids := f.balance(t); cents != total(n) || ids != n || f.calls.Load() != n {
		t.Errorf("after the replay: balance %d, %d inbox ids, %d effects; want %d, %d, %d", cents, ids, f.calls.Load(), total(n), n, n)
	}
	if skipped := strings.Count(logs.String(), "processed before; skipped"); skipped != 15+n+15 {
		t.Errorf("%d duplicates skipped in all, want %d", skipped, 15+n+15)
	}
}

// TestConsumeRetriesAFailedEvent: a handler failing twice on one event;
// Consume retries it (nothing after it is committed meanwhile) and applies
// it once. With MaxAttempts 1 Consume returns the error instead, without
// committing the event's offset, and the next Consume applies it.
func TestConsumeRetriesAFailedEvent(t *testing.T) {
	f := newFixture(t)
	const n = 12
	f.produce(t, events(n))
	var failures atomic.Int64
	flaky := func(limit int64) inbox.Handler {
		return func(ctx context.Context, tx pgx.Tx, rec *kgo.Record) error {
			if err := f.credit(ctx, tx, rec); err != nil {
				return err
			}
			if string(rec.Headers[1].Value) == "evt-005" && failures.Load() < limit {
				failures.Add(1)
				return errors.New("downstream refused")
			}
			return nil
		}
	}
	if err := f.consume(t, "g1", inbox.ConsumerConfig{RetryBackoff: time.Millisecond}, flaky(2), nil); err != nil {
		t.Fatalf("Consume: %v", err)
	}
	// calls counts the two failed attempts too: their changes rolled back.
	if cents, ids := f.balance(t); cents != total(n) || ids != n || failures.Load() != 2 || f.calls.Load() != n+2 {
		t.Fatalf("balance %d, %d inbox ids, %d failures, %d handler runs; want %d, %d, 2, %d", cents, ids, failures.Load(), f.calls.Load(), total(n), n, n+2)
	}

	// Again on a fresh database state and group, with MaxAttempts 1.
	testenv.Exec(t, f.dsn, `TRUNCATE balances, inbox`)
	failures.Store(0)
	err := f.consume(t, "g2", inbox.ConsumerConfig{MaxAttempts: 1}, flaky(1), nil)
	if err == nil || !strings.Contains(err.Error(), "downstream refused") {
		t.Fatalf("Consume with MaxAttempts 1 = %v, want the handler's error", err)
	}
	if f.committedAll(t, kadm.NewClient(f.broker.Client(t)), "g2") {
		t.Fatal("the group committed every offset although evt-005 failed")
	}
	if err := f.consume(t, "g2", inbox.ConsumerConfig{MaxAttempts: 1}, flaky(1), nil); err != nil {
		t.Fatalf("Consume after the failure: %v", err)
	}
	if cents, ids := f.balance(t); cents != total(n) || ids != n {
		t.Errorf("balance %d, %d inbox ids; want %d, %d", cents, ids, total(n), n)
	}
}

// TestConsumeReadsCommittedOnly: records of an aborted Kafka transaction
// are never processed.
func TestConsumeReadsCommittedOnly(t *testing.T) {
	f := newFixture(t)
	tcl := f.broker.Client(t, kgo.TransactionalID("inbox-test"))
	if err := tcl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tcl.ProduceSync(t.Context(), event("aborted-1", "acct-1", 1000), event("aborted-2", "acct-2", 1000)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := tcl.EndTransaction(t.Context(), kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	f.produce(t, events(5))
	if err := f.consume(t, "g1", inbox.ConsumerConfig{}, f.credit, nil); err != nil {
		t.Fatalf("Consume: %v", err)
	}
	if cents, ids := f.balance(t); cents != total(5) || ids != 5 {
		t.Errorf("balance %d, %d inbox ids; want %d, 5 (the aborted events never applied)", cents, ids, total(5))
	}
}

func TestNewAndConsumeRefuse(t *testing.T) {
	for _, table := range []string{"a.b.c", ".inbox", strings.Repeat("x", 51)} {
		if _, err := inbox.New(inbox.Config{Table: table}); !errors.Is(err, inbox.ErrInvalidConfig) {
			t.Errorf("New(Table %q) = %v, want ErrInvalidConfig", table, err)
		}
	}
	in, err := inbox.New(inbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg  inbox.ConsumerConfig
		want string
	}{
		{inbox.ConsumerConfig{Group: "g", Topics: []string{"t"}}, "Brokers is empty"},
		{inbox.ConsumerConfig{Brokers: []string{"b:9092"}, Topics: []string{"t"}}, "Group is empty"},
		{inbox.ConsumerConfig{Brokers: []string{"b:9092"}, Group: "g"}, "Topics is empty"},
		{inbox.ConsumerConfig{Brokers: []string{"b:9092"}, Group: "g", Topics: []string{"t"}, MaxAttempts: -1}, "MaxAttempts -1"},
	} {
		if err := in.Consume(t.Context(), nil, tc.cfg, nil, nil); !errors.Is(err, inbox.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Consume(%+v) = %v, want ErrInvalidConfig containing %q", tc.cfg, err, tc.want)
		}
	}
}

// TestPrune removes the ids processed before the cutoff, in batches.
func TestPrune(t *testing.T) {
	f := newFixture(t)
	for _, rec := range events(25) {
		if _, err := f.in.Process(t.Context(), f.pool, rec, f.credit); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Exec(t, f.dsn, `UPDATE inbox SET processed_at = now() - interval '8 days' WHERE id < 'evt-020'`)
	n, err := f.in.Prune(t.Context(), f.pool, time.Now().Add(-7*24*time.Hour), 6)
	if err != nil || n != 20 {
		t.Fatalf("Prune = %d, %v; want 20", n, err)
	}
	if _, ids := f.balance(t); ids != 5 {
		t.Errorf("%d ids left, want 5", ids)
	}
}
