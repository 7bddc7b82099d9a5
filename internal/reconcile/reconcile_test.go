package reconcile_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/reconcile"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/setup"
	"github.com/walrelay/walrelay/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// fixture is a database with walrelay's outbox, a kfake broker and the
// config of a relay between them.
type fixture struct {
	dsn     string
	broker  *testenv.Broker
	cfg     config.Config
	running bool // a relay runs until the test ends
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return fixtureOn(t, testenv.Postgres(t).NewDatabase(t))
}

// fixtureOn is newFixture on the database dsn (set up here).
func fixtureOn(t *testing.T, dsn string) *fixture {
	t.Helper()
	if _, err := setup.Run(t.Context(), testenv.Connect(t, dsn), setup.Names{Schema: "public", Table: "outbox", Publication: "walrelay_outbox", Slot: "walrelay"}); err != nil {
		t.Fatalf("setup: %v", err)
	}
	f := &fixture{dsn: dsn, broker: testenv.Kafka(t), cfg: config.Default()}
	f.cfg.Postgres.DSN = dsn
	f.cfg.Postgres.StatusInterval = 100 * time.Millisecond
	f.cfg.Kafka.Brokers = f.broker.Addrs()
	f.cfg.Kafka.TopicPartitions = 3
	f.cfg.Relay.ShutdownTimeout = 10 * time.Second
	return f
}

// insert commits n outbox rows, alternating two aggregate types (two
// topics), in transactions of 100, with created_at = at (now when zero),
// and returns their ids.
func (f *fixture) insert(t *testing.T, n int, at time.Time) []string {
	t.Helper()
	ctx := t.Context()
	conn := testenv.Connect(t, f.dsn)
	var ids []string
	for start := 0; start < n; start += 100 {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload, created_at)
				SELECT CASE WHEN i % 2 = 0 THEN 'order' ELSE 'customer' END, 'agg-' || (i % 17), 'Happened',
				       jsonb_build_object('i', i), coalesce($3, now())
				FROM generate_series($1::int, $2::int) i RETURNING id::text`, start, min(start+100, n)-1, nullTime(at))
			if err != nil {
				return err
			}
			got, err := pgx.CollectRows(rows, pgx.RowTo[string])
			ids = append(ids, got...)
			return err
		})
		if err != nil {
			t.Fatalf("inserting outbox rows: %v", err)
		}
	}
	return ids
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

var topics = []string{"outbox.event.order", "outbox.event.customer"}

// startRelay starts the relay, which runs (and confirms what Kafka
// acknowledged, as in production while verify runs) until the test ends.
func (f *fixture) startRelay(t *testing.T) {
	t.Helper()
	if f.running {
		return
	}
	logs := &testenv.SyncBuffer{}
	r, err := relay.New(f.cfg, slog.New(slog.NewTextHandler(logs, nil)), nil)
	if err != nil {
		t.Fatalf("relay.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	f.running = true
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("relay: %v", err)
		}
		if t.Failed() {
			t.Logf("relay log:\n%s", logs.String())
		}
	})
}

// relayAll runs the relay (until the test ends) and returns every record
// once want records are on the topics and the slot confirmed them.
func (f *fixture) relayAll(t *testing.T, want int) []*kgo.Record {
	t.Helper()
	f.startRelay(t)
	recs := f.broker.ReadAll(t, topics, want, 60*time.Second)
	testenv.WaitCaughtUp(t, f.dsn, f.cfg.Postgres.Slot, 30*time.Second)
	return recs
}

// deadLetterOne inserts 4 rows into public.outbox and a row into table
// with no aggregatetype, which the router refuses (the column is made
// nullable), runs the relay until the 4 are on their topics, the refused
// row on the dead-letter topic and the slot caught up, and returns the 4
// rows' ids and the refused row's.
func (f *fixture) deadLetterOne(t *testing.T, table string) (ids []string, bad string) {
	t.Helper()
	testenv.Exec(t, f.dsn, `ALTER TABLE `+table+` ALTER COLUMN aggregatetype DROP NOT NULL`)
	ids = f.insert(t, 4, time.Time{})
	bad = testenv.QueryValue[string](t, f.dsn, `INSERT INTO `+table+` (aggregatetype, aggregateid, type, payload)
		VALUES (NULL, 'agg-x', 'Happened', '{}') RETURNING id::text`)
	f.startRelay(t)
	f.broker.ReadAll(t, topics, len(ids), 60*time.Second)
	f.broker.ReadAll(t, []string{f.cfg.Relay.DeadLetterTopic}, 1, 60*time.Second)
	testenv.WaitCaughtUp(t, f.dsn, f.cfg.Postgres.Slot, 30*time.Second)
	return ids, bad
}

// verify runs reconcile over the last hour up to a minute ahead, waiting
// up to 30s for the slot to confirm its fence.
func (f *fixture) verify(t *testing.T, republish bool) *reconcile.Report {
	t.Helper()
	return f.verifyWait(t, republish, 30*time.Second)
}

func (f *fixture) verifyWait(t *testing.T, republish bool, wait time.Duration) *reconcile.Report {
	t.Helper()
	now := time.Now()
	rep, err := reconcile.Run(t.Context(), f.cfg, reconcile.Options{Since: now.Add(-time.Hour), Until: now.Add(time.Minute), Republish: republish, Wait: wait}, nil)
	if err != nil {
		t.Fatalf("reconcile.Run: %v", err)
	}
	return rep
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestVerifyFindsDeletedRecordsAndRepublishes: a healthy run reports
// nothing; records deleted from a topic are reported exactly as missing;
// --republish sends them again with the header and the row's time as
// timestamp, and the next verify is clean.
func TestVerifyFindsDeletedRecordsAndRepublishes(t *testing.T) {
	f := newFixture(t)
	const n = 400
	f.insert(t, n, time.Time{})
	recs := f.relayAll(t, n)

	rep := f.verify(t, false)
	if rep.Rows != n || rep.Records != n || len(rep.Missing)+len(rep.Unknown)+len(rep.Duplicates)+len(rep.Unroutable) != 0 {
		t.Fatalf("healthy run: rows %d records %d missing %v unknown %v duplicates %v unroutable %v; want %d rows and records, nothing else",
			rep.Rows, rep.Records, rep.Missing, rep.Unknown, rep.Duplicates, rep.Unroutable, n)
	}
	if !slices.Equal(rep.Topics, sorted(topics)) {
		t.Errorf("topics = %v, want %v", rep.Topics, sorted(topics))
	}

	// Delete the first records of one partition of each topic.
	var removed []string
	cut := kadm.Offsets{}
	for i, topic := range topics {
		p, upTo := int32(i), int64(7+i)
		cut.Add(kadm.Offset{Topic: topic, Partition: p, At: upTo})
		for _, r := range recs {
			if r.Topic == topic && r.Partition == p && r.Offset < upTo {
				removed = append(removed, testenv.Header(r, "id"))
			}
		}
	}
	adm := kadm.NewClient(f.broker.Client(t))
	resp, err := adm.DeleteRecords(t.Context(), cut)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("deleting records: %v", err)
	}
	if len(removed) != 15 {
		t.Fatalf("removed %d records, want 15 (partitions too small?)", len(removed))
	}
	rep = f.verify(t, false)
	if !slices.Equal(rep.Missing, sorted(removed)) || len(rep.Unknown) != 0 || len(rep.Duplicates) != 0 {
		t.Fatalf("after deleting records: missing %v unknown %v duplicates %v; want missing exactly %v", rep.Missing, rep.Unknown, rep.Duplicates, sorted(removed))
	}

	// Records stamped after the window on every partition: the republished
	// records land after them, so only a read to the partitions' end (not
	// to the offset of the window's end by timestamp) finds them.
	var fillers []*kgo.Record
	for _, topic := range topics {
		for p := range f.cfg.Kafka.TopicPartitions {
			fillers = append(fillers, &kgo.Record{Topic: topic, Partition: p, Value: []byte(`{}`), Timestamp: time.Now().Add(2 * time.Hour),
				Headers: []kgo.RecordHeader{{Key: "id", Value: []byte("filler")}}})
		}
	}
	if err := f.broker.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(t.Context(), fillers...).FirstErr(); err != nil {
		t.Fatalf("producing fillers: %v", err)
	}
	rep = f.verify(t, true)
	if r := rep.Republished; r == nil || r.Sent != len(removed) || r.Acknowledged != len(removed) || len(r.Failed) != 0 {
		t.Fatalf("republished = %+v, want %d sent and acknowledged", rep.Republished, len(removed))
	}
	created := map[string]time.Time{}
	rows, err := testenv.Connect(t, f.dsn).Query(t.Context(), `SELECT id::text, created_at FROM outbox`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var at time.Time
		if err := rows.Scan(&id, &at); err != nil {
			t.Fatal(err)
		}
		created[id] = at
	}
	all := f.broker.ReadAll(t, topics, n+len(fillers), 30*time.Second)
	republished := map[string]bool{}
	for _, r := range all {
		if testenv.Header(r, reconcile.HeaderRepublished) != "true" {
			continue
		}
		id := testenv.Header(r, "id")
		republished[id] = true
		if want := created[id].UnixMilli(); r.Timestamp.UnixMilli() != want {
			t.Errorf("republished %s has timestamp %v, want its created_at %v", id, r.Timestamp, created[id])
		}
	}
	if len(republished) != len(removed) {
		t.Errorf("%d records carry %s: true, want %d", len(republished), reconcile.HeaderRepublished, len(removed))
	}
	for _, id := range removed {
		if !republished[id] {
			t.Errorf("%s was not republished", id)
		}
	}
	rep = f.verify(t, false)
	if len(rep.Missing) != 0 || len(rep.Duplicates) != 0 || len(rep.Unknown) != 0 {
		t.Fatalf("after republishing: missing %v duplicates %v unknown %v, want none", rep.Missing, rep.Duplicates, rep.Unknown)
	}
}

// TestVerifyUnknownDuplicatesAndMargins: a record whose id has no row is
// unknown; a second copy is a duplicate; a row outside the window whose
// record's timestamp (its commit time) is inside it is neither missing
// nor unknown.
func TestVerifyUnknownDuplicatesAndMargins(t *testing.T) {
	f := newFixture(t)
	old := f.insert(t, 10, time.Now().Add(-3*time.Hour)) // outside the window, records inside
	ids := f.insert(t, 20, time.Time{})
	recs := f.relayAll(t, 30)

	cl := f.broker.Client(t)
	var dup *kgo.Record
	for _, r := range recs {
		if testenv.Header(r, "id") == ids[3] {
			c := *r
			c.Partition, c.Offset = r.Partition, 0
			dup = &c
		}
	}
	const stranger = "6f1c1b4e-0000-4000-8000-000000000001"
	const early = "6f1c1b4e-0000-4000-8000-000000000002" // in the margin before the window: not looked at
	produce := []*kgo.Record{
		{Topic: dup.Topic, Key: dup.Key, Value: dup.Value, Headers: dup.Headers, Timestamp: time.Now()},
		{Topic: topics[0], Key: []byte("x"), Value: []byte(`{}`), Headers: []kgo.RecordHeader{{Key: "id", Value: []byte(stranger)}}, Timestamp: time.Now()},
		{Topic: topics[0], Key: []byte("x"), Value: []byte(`{}`), Timestamp: time.Now()}, // no id header
		{Topic: topics[1], Key: []byte("y"), Value: []byte(`{}`), Headers: []kgo.RecordHeader{{Key: "id", Value: []byte(early)}}, Timestamp: time.Now().Add(-time.Hour - time.Minute)},
	}
	if err := cl.ProduceSync(t.Context(), produce...).FirstErr(); err != nil {
		t.Fatalf("producing: %v", err)
	}
	rep := f.verify(t, false)
	if rep.Rows != 20 {
		t.Errorf("rows = %d, want 20 (the old rows are outside the window)", rep.Rows)
	}
	if len(rep.Missing) != 0 || !slices.Equal(rep.Unknown, []string{stranger}) || !slices.Equal(rep.Duplicates, []string{ids[3]}) || rep.Unparsed != 1 {
		t.Fatalf("missing %v unknown %v duplicates %v unparsed %d; want none, [%s], [%s], 1", rep.Missing, rep.Unknown, rep.Duplicates, rep.Unparsed, stranger, ids[3])
	}
	for _, id := range old {
		if slices.Contains(rep.Unknown, id) {
			t.Errorf("old row %s called unknown", id)
		}
	}
}

// TestVerifyPassesBoundMemory: with MaxIDs below the records, verify reads
// in several passes and finds the same missing events.
func TestVerifyPassesBoundMemory(t *testing.T) {
	f := newFixture(t)
	const n = 300
	f.insert(t, n, time.Time{})
	recs := f.relayAll(t, n)
	adm := kadm.NewClient(f.broker.Client(t))
	cut := kadm.Offsets{}
	cut.Add(kadm.Offset{Topic: topics[1], Partition: 2, At: 5})
	if _, err := adm.DeleteRecords(t.Context(), cut); err != nil {
		t.Fatal(err)
	}
	var removed []string
	for _, r := range recs {
		if r.Topic == topics[1] && r.Partition == 2 && r.Offset < 5 {
			removed = append(removed, testenv.Header(r, "id"))
		}
	}
	now := time.Now()
	rep, err := reconcile.Run(t.Context(), f.cfg, reconcile.Options{Since: now.Add(-time.Hour), Until: now.Add(time.Minute), MaxIDs: 50, PageRows: 7, Wait: 30 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Passes < n/50 || rep.MaxHeld > n/3 {
		t.Errorf("passes = %d holding at most %d records, want at least %d passes (records / MaxIDs) each holding its share", rep.Passes, rep.MaxHeld, n/50)
	}
	if !slices.Equal(rep.Missing, sorted(removed)) || len(rep.Unknown)+len(rep.Duplicates) != 0 || rep.Rows != n {
		t.Fatalf("rows %d missing %v unknown %v duplicates %v; want %d rows, missing %v", rep.Rows, rep.Missing, rep.Unknown, rep.Duplicates, n, sorted(removed))
	}
}

// TestVerifyDeletedTopicAndMissingTable: a routed topic that no longer
// exists makes each of its rows missing; an outbox table that does not
// exist is an error naming it.
func TestVerifyDeletedTopicAndMissingTable(t *testing.T) {
	f := newFixture(t)
	ids := f.insert(t, 20, time.Time{})
	f.relayAll(t, 20)
	var gone []string
	for i, id := range ids {
		if i%2 == 1 { // customer rows
			gone = append(gone, id)
		}
	}
	resp, err := kadm.NewClient(f.broker.Client(t)).DeleteTopics(t.Context(), topics[1])
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("deleting topic: %v", err)
	}
	rep := f.verify(t, false)
	if !slices.Equal(rep.Missing, sorted(gone)) || rep.Rows != 20 {
		t.Fatalf("after deleting %s: rows %d, missing %v; want 20 rows, missing %v", topics[1], rep.Rows, rep.Missing, sorted(gone))
	}

	f.cfg.Postgres.Table = config.StringList{"public.no_such_outbox"}
	_, err = reconcile.Run(t.Context(), f.cfg, reconcile.Options{Since: time.Now().Add(-time.Hour), Until: time.Now()}, nil)
	if err == nil || !strings.Contains(err.Error(), `"public"."no_such_outbox"`) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("verify of a missing table: %v, want an error naming it", err)
	}
}
