package faultsuite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/internal/verify"
)

var aggregateTypes = []string{"order", "customer", "invoice"}

const aggregatesPerType = 10

// workloadSchema is the business side: one row per aggregate whose version
// each event bumps under a row lock, so per aggregate the version order is
// the commit order; and the ledger `expected`, written in the same
// transaction as each event, so it holds exactly the committed events
// whatever happens to the writer's connection, with the md5 of each
// payload as Postgres renders it (what pgoutput sends and the record's
// value must be).
const workloadSchema = `
CREATE TABLE aggregates (id text PRIMARY KEY, version int NOT NULL DEFAULT 0);
INSERT INTO aggregates (id) SELECT t || '-' || i FROM unnest(ARRAY['order','customer','invoice']) t, generate_series(1, 10) i;
CREATE TABLE expected (id uuid PRIMARY KEY, aggregatetype text, aggregateid text NOT NULL, version int NOT NULL, digest text);
ALTER TABLE outbox ALTER COLUMN aggregatetype DROP NOT NULL; -- poison rows: NULL routing value
`

const eventSQL = `
WITH v AS (UPDATE aggregates SET version = version + 1 WHERE id = $2 RETURNING version),
o AS (INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
      SELECT $1, $2, 'Bumped', jsonb_build_object('version', v.version, 'note', $3::text) FROM v
      RETURNING id, (payload->>'version')::int AS version, md5(payload::text) AS digest)
INSERT INTO expected SELECT o.id, $1, $2, o.version, o.digest FROM o RETURNING id::text`

// poisonSQL inserts a row walrelay cannot publish as routed; its ledger
// entry has version 0 (no order check: it belongs on the dead-letter
// topic).
const poisonSQL = `
WITH o AS (INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
           VALUES ($1, $2, 'Poison', jsonb_build_object('pad', $3::text)) RETURNING id)
INSERT INTO expected SELECT o.id, $1, $2, 0 FROM o RETURNING id::text`

// prepareDB runs `walrelay setup` (outbox table, publication, slot) with
// the built binary and creates the workload schema.
func prepareDB(t *testing.T, dsn string) {
	t.Helper()
	runCLI(t, []string{"WALRELAY_POSTGRES_DSN=" + dsn, "WALRELAY_POSTGRES_SLOT=" + slotFor(dsn)}, "setup")
	testenv.Exec(t, dsn, workloadSchema)
}

// poisonRow is a row of a poison class the writers may add to a transaction.
type poisonRow struct {
	class         string // walrelay's error class, for the report
	aggregatetype *string
	payload       string
}

// workload is a set of concurrent writers committing outbox transactions
// until stopped.
type workload struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	pool   *pgxpool.Pool

	mu         sync.Mutex
	rolledBack []string
	committed  int // transactions whose COMMIT returned success
	failed     int // transactions that failed (server down, ...)
	poison     map[string]int
}

type workloadOpts struct {
	writers int
	pause   time.Duration // between a writer's transactions
	// poison, if set, is mixed into about one transaction in ten.
	poison []poisonRow
	// keepRows: no transaction deletes its outbox rows (a heal republishes
	// from the table, and cannot see deleted rows).
	keepRows bool
}

// startWorkload starts the writers. Transactions have 1-20 rows over
// several aggregates of the three types; one in ten is rolled back, one in
// ten deletes its outbox rows before committing (the INSERTs are still in
// the WAL). Errors (the server restarting) are counted and retried with the
// next transaction.
func startWorkload(t *testing.T, dsn string, o workloadOpts) *workload {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("parsing dsn: %v", err)
	}
	cfg.MaxConns = int32(o.writers + 1)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("connecting writers: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &workload{cancel: cancel, pool: pool, poison: map[string]int{}}
	for i := range o.writers {
		rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(i)))
		w.wg.Go(func() { w.write(ctx, rng, o) })
	}
	t.Cleanup(w.stop)
	return w
}

func (w *workload) write(ctx context.Context, rng *rand.Rand, o workloadOpts) {
	for ctx.Err() == nil {
		n := 1 + rng.IntN(20)
		ids := make([]string, 0, n)
		for range n {
			typ := aggregateTypes[rng.IntN(len(aggregateTypes))]
			ids = append(ids, fmt.Sprintf("%s-%d", typ, 1+rng.IntN(aggregatesPerType)))
		}
		slices.Sort(ids) // one lock order: writers never deadlock
		var poison *poisonRow
		if len(o.poison) > 0 && rng.IntN(10) == 0 {
			poison = &o.poison[rng.IntN(len(o.poison))]
		}
		rollback, del := rng.IntN(10) == 0, rng.IntN(10) == 0 && !o.keepRows
		got, err := writeTx(ctx, w.pool, ids, poison, rollback, del)
		w.mu.Lock()
		switch {
		case err != nil:
			w.failed++
		case rollback:
			w.rolledBack = append(w.rolledBack, got...)
		default:
			w.committed++
			if poison != nil {
				w.poison[poison.class]++
			}
		}
		w.mu.Unlock()
		pause := o.pause
		if err != nil {
			pause = 100 * time.Millisecond
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}

func writeTx(ctx context.Context, pool *pgxpool.Pool, aggregates []string, poison *poisonRow, rollback, del bool) ([]string, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.Background())
	b := &pgx.Batch{}
	for i, agg := range aggregates {
		if poison != nil && i == len(aggregates)/2 {
			b.Queue(poisonSQL, poison.aggregatetype, fmt.Sprintf("poison-%s", poison.class), poison.payload)
		}
		typ, _, _ := strings.Cut(agg, "-")
		b.Queue(eventSQL, typ, agg, "n")
	}
	res := tx.SendBatch(ctx, b)
	var ids []string
	for range b.Len() {
		var id string
		if err := res.QueryRow().Scan(&id); err != nil {
			_ = res.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	if err := res.Close(); err != nil {
		return nil, err
	}
	if del {
		if _, err := tx.Exec(ctx, `DELETE FROM outbox WHERE id = ANY($1::uuid[])`, ids); err != nil {
			return nil, err
		}
	}
	if rollback {
		return ids, tx.Rollback(ctx)
	}
	return ids, tx.Commit(ctx)
}

// stop stops the writers and waits for them. Safe to call twice.
func (w *workload) stop() {
	w.cancel()
	w.wg.Wait()
	w.pool.Close()
}

func (w *workload) stats() (committedTx, failedTx int, rolledBack []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.committed, w.failed, slices.Clone(w.rolledBack)
}

// readLedger returns every committed event.
func readLedger(t *testing.T, dsn string) []verify.Event {
	t.Helper()
	conn := testenv.Connect(t, dsn)
	rows, err := conn.Query(t.Context(), `SELECT id::text, aggregateid, version, coalesce(digest, '') FROM expected`)
	if err != nil {
		t.Fatalf("reading the ledger: %v", err)
	}
	events, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (verify.Event, error) {
		var e verify.Event
		err := r.Scan(&e.ID, &e.Key, &e.Version, &e.Digest)
		return e, err
	})
	if err != nil {
		t.Fatalf("reading the ledger: %v", err)
	}
	_ = conn.Close(t.Context())
	return events
}
