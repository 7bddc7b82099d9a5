package relay_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/snapshot"
	"github.com/walrelay/walrelay/internal/testenv"
)

// snapshotFixture is a fixture whose slot does not exist yet, with
// snapshot.mode=initial and rows outbox rows already in the table
// (aggregatetype snap, 50 aggregates).
func snapshotFixture(t *testing.T, rows int, mutate func(*config.Config)) *fixture {
	t.Helper()
	f := newFixture(t, func(c *config.Config) {
		c.Snapshot.Mode = config.SnapshotInitial
		c.Snapshot.ProgressInterval = 500 * time.Millisecond
		if mutate != nil {
			mutate(c)
		}
	})
	dropUnusedSlot(t, f.dsn)
	fillTables(t, f.dsn, rows, "outbox")
	return f
}

// fillTables inserts n rows (aggregatetype snap, 50 aggregates) into each
// of tables.
func fillTables(t *testing.T, dsn string, n int, tables ...string) {
	t.Helper()
	for _, table := range tables {
		testenv.Exec(t, dsn, `INSERT INTO `+table+` (aggregatetype, aggregateid, type, payload)
			SELECT 'snap', 'agg-' || (g % 50), 'T', jsonb_build_object('n', g) FROM generate_series(1, $1::int) g`, n)
	}
}

// writers inserts rows (aggregatetype snap), one per transaction, from
// one connection per table of tables (a table named twice: two
// connections) until the returned stop is called, and returns how many it
// inserted.
func writers(t *testing.T, dsn string, tables ...string) (stop func() int64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var n atomic.Int64
	for w, table := range tables {
		conn := testenv.Connect(t, dsn)
		wg.Go(func() {
			defer conn.Close(context.Background())
			for i := 0; ctx.Err() == nil; i++ {
				_, err := conn.Exec(ctx, `INSERT INTO `+table+` (aggregatetype, aggregateid, type, payload) VALUES ('snap', $1, 'T', '{"w": true}')`,
					"agg-"+string(rune('a'+w))+string(rune('0'+i%10)))
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("writer of %s: %v", table, err)
					}
					return
				}
				n.Add(1)
				time.Sleep(time.Millisecond)
			}
		})
	}
	stop = func() int64 {
		cancel()
		wg.Wait()
		return n.Load()
	}
	t.Cleanup(func() { stop() }) // before the connections close
	return stop
}

// topicRecords is how many records topic holds (the sum of its
// partitions' end offsets: at-least-once, nothing compacted).
func topicRecords(t *testing.T, f *fixture, topic string) int64 {
	t.Helper()
	adm := kadm.NewClient(f.broker.Client(t))
	ends, err := adm.ListEndOffsets(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// checkExactlyOnce reads every record of outbox.event.snap and checks
// that each row of tables is there once (ids are the id header), and
// nothing else.
func checkExactlyOnce(t *testing.T, f *fixture, tables ...string) {
	t.Helper()
	var all []string
	for _, table := range tables {
		all = append(all, `SELECT id FROM `+table)
	}
	ids := testenv.QueryValue[[]string](t, f.dsn, `SELECT coalesce(array_agg(id::text), '{}') FROM (`+strings.Join(all, ` UNION ALL `)+`) r`)
	onTopic := topicRecords(t, f, "outbox.event.snap")
	recs := f.broker.ReadAll(t, []string{"outbox.event.snap"}, int(onTopic), time.Minute)
	seen := make(map[string]int, len(recs))
	for _, r := range recs {
		seen[testenv.Header(r, "id")]++
	}
	dups := 0
	for _, c := range seen {
		dups += c - 1
	}
	missing := 0
	for _, id := range ids {
		if seen[id] == 0 {
			missing++
		}
	}
	if missing != 0 || dups != 0 || onTopic != int64(len(ids)) {
		t.Fatalf("%d rows in %s; %d records on the topic, %d read: %d rows missing, %d duplicates", len(ids), strings.Join(tables, " and "), onTopic, len(recs), missing, dups)
	}
}

// snapshotWhileWriting runs an initial snapshot of f (before rows in its
// tables) while writers insert into tables, from 200ms before the relay
// starts to 500ms after the snapshot is done; it waits until the slot
// caught up, stops the relay, and checks that the snapshot published the
// rows inserted before it and some, not all, of those written meanwhile.
// It returns the stopped relay, how many rows the snapshot published, how
// many the writers wrote, and how long the snapshot took from the start.
func (f *fixture) snapshotWhileWriting(t *testing.T, before int64, tables ...string) (run *running, snapRows, written int64, took time.Duration) {
	t.Helper()
	stopWriters := writers(t, f.dsn, tables...)
	time.Sleep(200 * time.Millisecond) // writers run before, during and after the snapshot's start
	began := time.Now()
	run = f.start(t)
	done := f.logs.waitLog(t, "initial snapshot done", nil, 3*time.Minute)
	took = time.Since(began)
	time.Sleep(500 * time.Millisecond)
	written = stopWriters()
	f.waitCaughtUp(t, time.Minute)
	if err := run.stop(); err != nil {
		t.Fatalf("relay: %v", err)
	}
	snapRows = int64(done["rows"].(float64))
	if snapRows < before || snapRows >= before+written {
		t.Fatalf("the snapshot published %d rows: want the %d inserted before it and some, not all, of the %d written meanwhile", snapRows, before, written)
	}
	return run, snapRows, written, took
}

// The initial snapshot publishes the rows already in the outbox, then the
// stream the rows committed after it, while writers keep inserting: every
// row is on Kafka exactly once (none missed at the boundary, none of the
// snapshot sent again by the stream).
func TestInitialSnapshotWhileWriting(t *testing.T) {
	f := snapshotFixture(t, snapshotRows, func(c *config.Config) { c.Snapshot.ChunkRows = 500 })
	run, snapRows, written, took := f.snapshotWhileWriting(t, snapshotRows, "outbox", "outbox")
	st := run.relay.SnapshotStatus()
	if st.Running || st.Done != snapRows || st.Total != snapRows {
		t.Fatalf("snapshot status %+v, want done, %d of %d", st, snapRows, snapRows)
	}
	if sn := run.relay.Status(t.Context()).Snapshot; sn == nil || sn.Done != snapRows || sn.Running {
		t.Fatalf("/status snapshot = %+v, want %d rows done", sn, snapRows)
	}
	for name, want := range map[string]int64{"walrelay_snapshot_rows_total": snapRows, "walrelay_snapshot_rows_planned": snapRows, "walrelay_snapshot_rows_remaining": 0} {
		if v, _ := testenv.FindMetric(t, f.reg, name, nil); int64(v) != want {
			t.Errorf("%s = %v, want %d", name, v, want)
		}
	}
	last := f.logs.lines("snapshot progress")
	if len(last) == 0 || int64(last[len(last)-1]["rows_done"].(float64)) != snapRows {
		t.Errorf("no final progress line with rows_done %d: %v", snapRows, last)
	}
	checkExactlyOnce(t, f, "outbox")
	checkSnapshotOrder(t, f)
	t.Logf("snapshot of %d rows (%d written by writers meanwhile, %d streamed) in %s", snapRows, written, snapshotRows+written-snapRows, took.Round(time.Millisecond))
	if !strings.Contains(testenv.QueryValue[string](t, f.dsn, `SELECT string_agg(slot_name || ':' || temporary::text, ',') FROM pg_replication_slots`), "walrelay:false") {
		t.Fatal("the permanent slot was not created")
	}
	if n := testenv.QueryValue[int64](t, f.dsn, `SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'walrelay_snapshot_%'`); n != 0 {
		t.Fatalf("%d temporary snapshot slots left", n)
	}
}

// A filter Postgres rejects and a table without a primary key fail at
// startup with errors naming them, before any slot exists.
func TestInitialSnapshotRefusesBadInput(t *testing.T) {
	cases := []struct {
		name  string
		where string
		sql   string
		want  error
		text  string
	}{
		{name: "bad where", where: "no_such_column IS NULL", want: snapshot.ErrBadWhere, text: `column "no_such_column" does not exist`},
		{name: "not boolean", where: "created_at", want: snapshot.ErrBadWhere, text: "boolean"},
		{name: "no primary key", sql: `ALTER TABLE outbox DROP CONSTRAINT outbox_pkey`, want: snapshot.ErrNoPrimaryKey, text: "public.outbox"},
		{name: "no table", sql: `ALTER PUBLICATION walrelay_outbox DROP TABLE outbox`, want: relay.ErrTableNotPublished, text: "walrelay_outbox"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := snapshotFixture(t, 10, func(cfg *config.Config) { cfg.Snapshot.Where = c.where })
			if c.sql != "" {
				testenv.Exec(t, f.dsn, c.sql)
			}
			run := f.start(t)
			err := run.wait(time.Minute)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
				t.Fatalf("Run: %v; want %v mentioning %q", err, c.want, c.text)
			}
			if n := testenv.QueryValue[int64](t, f.dsn, `SELECT count(*) FROM pg_replication_slots`); n != 0 {
				t.Fatalf("%d slots exist after a refused start", n)
			}
		})
	}
}

// Two processes (an active and a standby) starting together on a missing
// slot: one snapshots and creates the slot, the other waits for it (the
// snapshot lock), finds the slot and snapshots nothing. Every row is on
// Kafka once.
func TestInitialSnapshotTwoProcesses(t *testing.T) {
	f := snapshotFixture(t, 5000, nil)
	logsA, logsB := &logBuffer{}, &logBuffer{}
	a := runRelay(t, f.cfg, logsA, nil)
	b := runRelay(t, f.cfg, logsB, nil)
	deadline := time.Now().Add(time.Minute)
	for len(logsA.lines("initial snapshot done"))+len(logsB.lines("initial snapshot done")) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot done within a minute\nA:\n%s\nB:\n%s", logsA.String(), logsB.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	testenv.Exec(t, f.dsn, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) SELECT 'snap', 'after', 'T', '{}' FROM generate_series(1, 100)`)
	f.waitCaughtUp(t, time.Minute)
	for _, r := range []*running{a, b} {
		if err := r.stop(); err != nil {
			t.Fatalf("relay: %v", err)
		}
	}
	done := len(logsA.lines("initial snapshot done")) + len(logsB.lines("initial snapshot done"))
	skipped := len(logsA.lines("initial snapshot not needed")) + len(logsB.lines("initial snapshot not needed"))
	if done != 1 || skipped != 1 {
		t.Fatalf("%d processes snapshotted and %d found the slot created, want 1 and 1\nA:\n%s\nB:\n%s", done, skipped, logsA.String(), logsB.String())
	}
	checkExactlyOnce(t, f, "outbox")
}

// poll is one round of a classic polling publisher: it locks up to n
// unpublished rows, produces them (key aggregateid, header id, the payload
// as value) and marks them published, in one transaction. It returns how
// many it published.
func poll(t *testing.T, conn *pgx.Conn, cl *kgo.Client, n int) int {
	t.Helper()
	ctx := t.Context()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	rows, err := tx.Query(ctx, `SELECT id::text, aggregatetype, aggregateid, payload::text FROM outbox
		WHERE published_at IS NULL ORDER BY created_at, id FOR UPDATE SKIP LOCKED LIMIT $1`, n)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	var recs []*kgo.Record
	for rows.Next() {
		var id, typ, agg, payload string
		if err := rows.Scan(&id, &typ, &agg, &payload); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		recs = append(recs, &kgo.Record{Topic: "outbox.event." + typ, Key: []byte(agg), Value: []byte(payload),
			Headers: []kgo.RecordHeader{{Key: "id", Value: []byte(id)}}})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("poller: producing: %v", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE outbox SET published_at = now() WHERE id = ANY($1::uuid[])`, ids); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return len(ids)
}

// The cut-over from a polling publisher (docs/migrating-from-a-polling-
// publisher.md): a poller publishes part of the outbox and stops while the
// application keeps inserting; walrelay then starts on a new slot with
// snapshot.where `published_at IS NULL` and a publication of INSERTs only
// (the poller's UPDATEs are not streamed). The poller's records and
// walrelay's hold every row exactly once.
func TestCutOverFromPollingPublisher(t *testing.T) {
	f := snapshotFixture(t, 0, func(c *config.Config) { c.Snapshot.Where = "published_at IS NULL" })
	testenv.Exec(t, f.dsn, `ALTER TABLE outbox ADD COLUMN published_at timestamptz`)
	testenv.Exec(t, f.dsn, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
		SELECT 'snap', 'agg-' || (g % 20), 'T', jsonb_build_object('n', g) FROM generate_series(1, 3000) g`)
	if pub := testenv.QueryValue[bool](t, f.dsn, `SELECT pubinsert AND NOT pubupdate FROM pg_publication WHERE pubname = 'walrelay_outbox'`); !pub {
		t.Fatal("the publication publishes more than INSERTs")
	}
	stopWriters := writers(t, f.dsn, "outbox", "outbox")
	conn := testenv.Connect(t, f.dsn)
	f.broker.CreateTopic(t, "outbox.event.snap", 4)
	cl := f.broker.Client(t)
	polled := 0
	for range 15 {
		polled += poll(t, conn, cl, 100)
	}
	// The poller has stopped: its last transaction committed.
	run := f.start(t)
	done := f.logs.waitLog(t, "initial snapshot done", nil, time.Minute)
	time.Sleep(300 * time.Millisecond)
	written := stopWriters()
	f.waitCaughtUp(t, time.Minute)
	if err := run.stop(); err != nil {
		t.Fatalf("relay: %v", err)
	}
	unpublished := testenv.QueryValue[int64](t, f.dsn, `SELECT count(*) FROM outbox WHERE published_at IS NULL`)
	t.Logf("poller published %d rows; writers inserted %d; the snapshot published %v, the stream the rest of %d unpublished", polled, written, done["rows"], unpublished)
	checkExactlyOnce(t, f, "outbox")
	if polled != 1500 || int64(done["rows"].(float64)) >= unpublished {
		t.Fatalf("poller published %d rows (want 1500); snapshot %v of %d unpublished rows (want fewer: some streamed)", polled, done["rows"], unpublished)
	}
}

// checkSnapshotOrder checks that the records of each aggregate the
// snapshot alone published (agg-0 to agg-49: the writers use other keys)
// are in primary-key order in their partition.
func checkSnapshotOrder(t *testing.T, f *fixture) {
	t.Helper()
	recs := f.broker.ReadAll(t, []string{"outbox.event.snap"}, int(topicRecords(t, f, "outbox.event.snap")), time.Minute)
	last := map[string]string{}
	for _, r := range recs {
		key := string(r.Key)
		if len(key) < 5 || key[4] < '0' || key[4] > '9' {
			continue
		}
		id := testenv.Header(r, "id") // uuid text order is Postgres's uuid order
		if prev, ok := last[key]; ok && id <= prev {
			t.Fatalf("key %s: record %s after %s on partition %d: not in primary-key order", key, id, prev, r.Partition)
		}
		last[key] = id
	}
}

// A stop (SIGTERM) during the initial snapshot is a clean stop: Run
// returns nil and no slot is left; the next start snapshots again.
func TestInitialSnapshotStoppedCleanly(t *testing.T) {
	f := snapshotFixture(t, 5000, func(c *config.Config) {
		c.Relay.MaxInFlightRecords, c.Kafka.Linger = 50, 20*time.Millisecond // a snapshot of seconds
	})
	run := f.start(t)
	f.logs.waitLog(t, "snapshot: publishing rows", nil, time.Minute)
	time.Sleep(200 * time.Millisecond)
	if err := run.stop(); err != nil {
		t.Fatalf("Run after a stop during the snapshot: %v, want nil", err)
	}
	if len(f.logs.lines("initial snapshot done")) != 0 {
		t.Fatal("the snapshot finished before the stop")
	}
	f.logs.waitLog(t, "stopped during the initial snapshot", nil, time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for testenv.QueryValue[int64](t, f.dsn, `SELECT count(*) FROM pg_replication_slots`) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a slot is left after a stop during the snapshot")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
