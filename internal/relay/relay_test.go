package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/testenv"
)

var aggregateTypes = []string{"order", "customer", "invoice"}

const aggregatesPerType = 20 // 60 aggregates in all

// workloadSchema holds the business side of the workload: one row per
// aggregate whose version each event bumps under a row lock, so per
// aggregate the version order IS the commit order; and a ledger of what
// each committed event must look like on Kafka (payload as Postgres
// renders it), written in the same transaction as the event.
const workloadSchema = `
CREATE TABLE aggregates (type text, id text, version int NOT NULL DEFAULT 0, PRIMARY KEY (type, id));
INSERT INTO aggregates (type, id) SELECT t, t || '-' || i FROM unnest(ARRAY['order','customer','invoice']) t, generate_series(1, 20) i;
CREATE TABLE expected (id uuid PRIMARY KEY, aggregatetype text, aggregateid text, version int, payload text);
`

// eventSQL bumps the aggregate's version and inserts the outbox row and
// its ledger entry.
const eventSQL = `
WITH v AS (UPDATE aggregates SET version = version + 1 WHERE type = $1 AND id = $2 RETURNING version),
o AS (INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
      SELECT $1, $2, 'Bumped', jsonb_build_object('version', v.version) || $3::jsonb FROM v
      RETURNING id, payload)
INSERT INTO expected SELECT o.id, $1, $2, (o.payload->>'version')::int, o.payload::text FROM o
RETURNING id::text`

// payloads exercise JSON that must arrive byte-identical to Postgres's
// jsonb text: unicode, escapes, nesting, numbers jsonb keeps as written.
var payloads = []string{
	`{"note": "plain"}`,
	`{"note": "héllo ✓ \u00e9 \"quoted\" \\ back", "tags": ["a", "b"]}`,
	`{"amount": 1.50, "big": 12345678901234567890, "neg": -0.0001, "nested": {"deep": [1, [2, [3]]]}}`,
	`{"empty": {}, "list": [], "null": null, "bool": true}`,
}

type txPlan struct {
	rows     []row
	rollback bool
	delete   bool // insert-then-delete in the same transaction
}

type row struct{ typ, id, payload string }

func planWorkload(rng *rand.Rand, total int) []txPlan {
	var plans []txPlan
	for n := 0; n < total; {
		size := min(1+rng.IntN(100), total-n)
		p := txPlan{rollback: rng.IntN(20) == 0, delete: rng.IntN(10) == 0}
		for range size {
			typ := aggregateTypes[rng.IntN(len(aggregateTypes))]
			p.rows = append(p.rows, row{typ, fmt.Sprintf("%s-%d", typ, 1+rng.IntN(aggregatesPerType)), payloads[rng.IntN(len(payloads))]})
		}
		// Lock aggregates in one global order so concurrent writers
		// never deadlock.
		slices.SortStableFunc(p.rows, func(a, b row) int { return strings.Compare(a.typ+"/"+a.id, b.typ+"/"+b.id) })
		plans = append(plans, p)
		if !p.rollback {
			n += size
		}
	}
	return plans
}

// runWorkload executes plans with `writers` concurrent connections and
// returns the ids of rolled-back rows.
func runWorkload(t *testing.T, dsn string, plans []txPlan, writers int) (rolledBack []string) {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connecting writers: %v", err)
	}
	defer pool.Close()
	work := make(chan txPlan)
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	for range writers {
		wg.Go(func() {
			for p := range work {
				ids, err := writeTx(t.Context(), pool, p)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				if p.rollback {
					rolledBack = append(rolledBack, ids...)
				}
				mu.Unlock()
			}
		})
	}
	for _, p := range plans {
		work <- p
	}
	close(work)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d writer transactions failed; first: %v", len(errs), errs[0])
	}
	return rolledBack
}

func writeTx(ctx context.Context, pool *pgxpool.Pool, p txPlan) ([]string, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx)
	ids := make([]string, 0, len(p.rows))
	for _, r := range p.rows {
		var id string
		if err := tx.QueryRow(ctx, eventSQL, r.typ, r.id, r.payload).Scan(&id); err != nil {
			return nil, fmt.Errorf("inserting event: %w", err)
		}
		ids = append(ids, id)
	}
	if p.delete {
		if _, err := tx.Exec(ctx, `DELETE FROM outbox WHERE id = ANY($1::uuid[])`, ids); err != nil {
			return nil, fmt.Errorf("deleting events: %w", err)
		}
	}
	if p.rollback {
		return ids, tx.Rollback(ctx)
	}
	return ids, tx.Commit(ctx)
}

type expectedEvent struct {
	typ, aggregate, payload string
	version                 int
}

func readExpected(t *testing.T, dsn string) map[string]expectedEvent {
	t.Helper()
	conn := testenv.Connect(t, dsn)
	rows, err := conn.Query(t.Context(), `SELECT id::text, aggregatetype, aggregateid, version, payload FROM expected`)
	if err != nil {
		t.Fatalf("reading expected events: %v", err)
	}
	out := map[string]expectedEvent{}
	for rows.Next() {
		var id string
		var e expectedEvent
		if err := rows.Scan(&id, &e.typ, &e.aggregate, &e.version, &e.payload); err != nil {
			t.Fatalf("scanning expected event: %v", err)
		}
		out[id] = e
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("reading expected events: %v", err)
	}
	return out
}

func topicsFor(types []string) []string {
	out := make([]string, len(types))
	for i, t := range types {
		out[i] = "outbox.event." + t
	}
	return out
}

func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// verify checks records against the ledger: every committed event arrived
// at least once on outbox.event.<type> with key = aggregate id, header id
// = event id and value = the payload text byte for byte; no rolled-back
// event arrived; per key, first occurrences are in commit (version) order
// on a single partition. It returns the number of duplicates.
func verify(t *testing.T, want map[string]expectedEvent, rolledBack []string, records []*kgo.Record) (duplicates int) {
	t.Helper()
	seen := map[string]bool{}
	lastVersion := map[string]int{}
	partitionOf := map[string]int32{}
	for _, r := range records {
		id, ok := header(r, "id")
		if !ok {
			t.Fatalf("record at %s/%d@%d has no id header", r.Topic, r.Partition, r.Offset)
		}
		e, ok := want[id]
		if !ok {
			t.Errorf("record %s (key %s) is not a committed event", id, r.Key)
			continue
		}
		if seen[id] {
			duplicates++
			continue
		}
		seen[id] = true
		if r.Topic != "outbox.event."+e.typ {
			t.Errorf("event %s on topic %q, want outbox.event.%s", id, r.Topic, e.typ)
		}
		if string(r.Key) != e.aggregate {
			t.Errorf("event %s key %q, want %q", id, r.Key, e.aggregate)
		}
		if string(r.Value) != e.payload {
			t.Errorf("event %s value\n got %s\nwant %s", id, r.Value, e.payload)
		}
		key := e.typ + "/" + e.aggregate
		if p, ok := partitionOf[key]; ok && p != r.Partition {
			t.Errorf("aggregate %s on partitions %d and %d", key, p, r.Partition)
		}
		partitionOf[key] = r.Partition
		if e.version != lastVersion[key]+1 {
			t.Errorf("aggregate %s: version %d arrived after %d (commit order broken)", key, e.version, lastVersion[key])
		}
		lastVersion[key] = e.version
	}
	for id := range want {
		if !seen[id] {
			t.Errorf("committed event %s never arrived", id)
		}
	}
	for _, id := range rolledBack {
		if seen[id] || want[id] != (expectedEvent{}) {
			t.Errorf("rolled-back event %s arrived", id)
		}
	}
	return duplicates
}

func TestRelayDeliversEveryCommittedEventInOrder(t *testing.T) {
	t.Run(config.AtLeastOnce, func(t *testing.T) { deliversEveryEventInOrder(t, nil) })
	// Exactly once: a read_committed consumer sees the same, from Kafka
	// transactions (and the slot is confirmed only after their commits).
	t.Run(config.ExactlyOnce, func(t *testing.T) { deliversEveryEventInOrder(t, exactlyOnce) })
}

func deliversEveryEventInOrder(t *testing.T, mutate func(*config.Config)) {
	f := newFixture(t, mutate)
	testenv.Exec(t, f.dsn, workloadSchema)
	run := f.start(t)

	rng := rand.New(rand.NewPCG(1, 2))
	plans := planWorkload(rng, 10000)
	rolledBack := runWorkload(t, f.dsn, plans, 6)

	want := readExpected(t, f.dsn)
	if len(want) != 10000 {
		t.Fatalf("workload committed %d events, want 10000", len(want))
	}
	if len(rolledBack) == 0 {
		t.Fatal("workload rolled nothing back; the rollback check would be vacuous")
	}
	reader := f.broker
	if f.cfg.Relay.ExactlyOnce() {
		reader = f.broker.As(kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	records := reader.ReadAll(t, topicsFor(aggregateTypes), len(want), 90*time.Second)
	dups := verify(t, want, rolledBack, records)
	if dups != 0 {
		t.Errorf("%d duplicates without any fault", dups)
	}
	f.waitCaughtUp(t, 30*time.Second)
	if err := run.stop(); err != nil {
		t.Fatalf("relay stopped with error: %v", err)
	}
	t.Logf("%d events in %d transactions (%d rolled-back events) delivered in order", len(want), len(plans), len(rolledBack))
}

// A payload must not be re-encoded: jsonb arrives as Postgres's text,
// text as UTF-8, and not as a JSON string holding JSON.
func TestRelayPayloadIsNotDoubleEncoded(t *testing.T) {
	f := newFixture(t, nil)
	run := f.start(t)
	testenv.Exec(t, f.dsn, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'o-1', 'Created', '{"a": [1, 2], "b": "x"}')`)
	recs := f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)
	var v map[string]any
	if err := json.Unmarshal(recs[0].Value, &v); err != nil {
		t.Fatalf("value %q is not a JSON object: %v", recs[0].Value, err)
	}
	if got := string(recs[0].Value); got != `{"a": [1, 2], "b": "x"}` {
		t.Errorf("value = %s", got)
	}
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}

// With a converter other than raw, a column's NOT NULL and DEFAULT come
// from the catalog (pgoutput does not carry them): read at startup, and
// read again at the Relation message Postgres sends after an ALTER TABLE,
// as Debezium's decoder does, so the key's Connect schema follows the
// table.
func TestRelayConnectSchemasFollowTheCatalog(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Converter.Key = "json" })
	run := f.start(t)
	testenv.Exec(t, f.dsn, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'o-1', 'Created', '{}')`)
	// The catalog is read when the Relation message is: as for Debezium,
	// rows still in the slot when the table changes get the new schema.
	f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)
	testenv.Exec(t, f.dsn, `ALTER TABLE outbox ALTER COLUMN aggregateid DROP NOT NULL, ALTER COLUMN aggregateid SET DEFAULT 'none'`)
	testenv.Exec(t, f.dsn, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'o-2', 'Created', '{}')`)
	recs := f.broker.ReadAll(t, []string{"outbox.event.order"}, 2, 30*time.Second)
	want := []string{
		`{"schema":{"type":"string","optional":false},"payload":"o-1"}`,
		`{"schema":{"type":"string","optional":true,"default":"none"},"payload":"o-2"}`,
	}
	got := map[string]bool{}
	for _, r := range recs {
		got[string(r.Key)] = true
	}
	for _, w := range want {
		if !got[w] {
			t.Errorf("no record with key %s; keys: %v", w, got)
		}
	}
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}
