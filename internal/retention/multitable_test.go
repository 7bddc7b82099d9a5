package retention_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/retention"
	"github.com/walrelay/walrelay/internal/testenv"
)

// The two outbox tables of the multi-table tests, in two schemas: the
// slot record lives in the first one's (public).
var bothTables = config.StringList{"public.outbox", "billing.outbox"}

// twoOutboxes creates walrelay's outbox (walrelay setup: public.outbox, the
// publication, the slot and its record table in public) and a second
// outbox billing.outbox in the publication: plain like the first, or
// partitioned by day of created_at (testenv.BillingOutboxByDay).
func twoOutboxes(t *testing.T, partitioned bool) db {
	t.Helper()
	d := plainOutbox(t)
	if partitioned {
		testenv.BillingOutboxByDay(t, d.dsn)
		return d
	}
	testenv.Exec(t, d.dsn, `CREATE SCHEMA billing;
		CREATE TABLE billing.outbox (LIKE public.outbox INCLUDING ALL);
		ALTER PUBLICATION walrelay_outbox ADD TABLE billing.outbox`)
	return d
}

// multiPruner returns the Pruner `walrelay run` builds (retention.FromConfig)
// for tables (both tables when nil) of d with a 1h retention, and its
// metrics' registry.
func multiPruner(t *testing.T, d db, batch int, tables config.StringList) (*retention.Pruner, *prometheus.Registry) {
	t.Helper()
	if tables == nil {
		tables = bothTables
	}
	cfg := config.Default()
	cfg.Postgres.DSN, cfg.Postgres.Slot, cfg.Postgres.Table = d.dsn, d.slot, tables
	cfg.Outbox.Retention, cfg.Outbox.PruneBatch = time.Hour, batch
	cfg.Outbox.PruneStatementTimeout, cfg.Outbox.PruneInterval = 5*time.Second, time.Second
	reg := prometheus.NewRegistry()
	p := retention.New(retention.FromConfig(cfg), nil, retention.MetricsOf(metrics.New(reg, "test", "walrelay")))
	t.Cleanup(func() { p.Close(context.Background()) })
	return p, reg
}

// insertOldInto commits n rows aged 2h into table with ids prefixed prefix.
func insertOldInto(t *testing.T, d db, table, prefix string, n int) {
	t.Helper()
	testenv.Exec(t, d.dsn, fmt.Sprintf(`INSERT INTO %s (aggregatetype, aggregateid, type, payload, created_at)
		SELECT 'order', '%s-' || g, 'T', '{}', now() - interval '2 hours' FROM generate_series(1, %d) g`, table, prefix, n))
}

// idsIn returns the aggregateids left in table, sorted.
func idsIn(t *testing.T, d db, table string) []string {
	t.Helper()
	return testenv.QueryValue[[]string](t, d.dsn, `SELECT coalesce(array_agg(aggregateid ORDER BY aggregateid), '{}') FROM `+table)
}

// tablePart is a table's part of a pass's result, as its JSON (walrelay
// outbox prune -o json) has it.
type tablePart struct {
	Table       string   `json:"table"`
	Partitioned bool     `json:"partitioned"`
	Rows        int64    `json:"rows"`
	Batches     int      `json:"batches"`
	Detached    []string `json:"detached"`
	Dropped     []string `json:"dropped"`
}

// parts returns the pass's joined table list and its per-table parts, read
// from its JSON.
func parts(t *testing.T, res retention.Result) (string, map[string]tablePart) {
	t.Helper()
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Table  string      `json:"table"`
		Tables []tablePart `json:"tables"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	byTable := map[string]tablePart{}
	for _, p := range out.Tables {
		byTable[p.Table] = p
	}
	return out.Table, byTable
}

// One Pruner over two outbox tables in two schemas: one fence per pass,
// the slot record read in the first table's schema, and the rows of both
// tables the confirmed fence covers removed; a transaction writing both
// tables that commits after the fence keeps its rows in both until the
// slot confirms it. The result has a part per table and the sums; the
// metrics have a series per table.
//
// Not parallel, for TestLateCommitIsKeptUntilConfirmed's reason: another
// test's open transaction would rightly keep the early rows.
func TestEveryTablePrunedByOneFence(t *testing.T) {
	d := twoOutboxes(t, false)
	insertOldInto(t, d, "public.outbox", "pub", 25)
	insertOldInto(t, d, "billing.outbox", "bill", 12)
	testenv.Exec(t, d.dsn, `INSERT INTO public.outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'pub-young', 'T', '{}');
		INSERT INTO billing.outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'bill-young', 'T', '{}')`)
	// One transaction writing both tables, open across the fence.
	late := openTx(t, d,
		`INSERT INTO public.outbox (aggregatetype, aggregateid, type, payload, created_at) VALUES ('order', 'pub-late', 'T', '{}', now() - interval '3 hours')`,
		`INSERT INTO billing.outbox (aggregatetype, aggregateid, type, payload, created_at) VALUES ('order', 'bill-late', 'T', '{}', now() - interval '3 hours')`)

	p, reg := multiPruner(t, d, 10, nil)
	if res := cycle(t, p); res.Rows != 0 || res.Fence != nil {
		t.Fatalf("first pass removed %d rows (fence %v); it only takes a fence", res.Rows, res.Fence)
	}
	advance(t, d) // the slot passes the fence, not the late commit
	if err := late.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	res := cycle(t, p)
	joined, byTable := parts(t, res)
	t.Logf("second pass: %+v", byTable)
	if joined != "public.outbox,billing.outbox" {
		t.Errorf("result's table %q, want the list public.outbox,billing.outbox", joined)
	}
	if pub, bill := byTable["public.outbox"], byTable["billing.outbox"]; pub.Rows != 25 || pub.Batches != 3 || bill.Rows != 12 || bill.Batches != 2 {
		t.Errorf("second pass: public.outbox %d rows in %d batches, billing.outbox %d in %d; want 25 in 3 and 12 in 2 (batches of 10)", pub.Rows, pub.Batches, bill.Rows, bill.Batches)
	}
	if res.Rows != 37 || res.Batches != 5 {
		t.Errorf("second pass: %d rows in %d batches in all, want 37 in 5", res.Rows, res.Batches)
	}
	if got, want := idsIn(t, d, "public.outbox"), []string{"pub-late", "pub-young"}; !slices.Equal(got, want) {
		t.Errorf("public.outbox left %q, want %q", got, want)
	}
	if got, want := idsIn(t, d, "billing.outbox"), []string{"bill-late", "bill-young"}; !slices.Equal(got, want) {
		t.Errorf("billing.outbox left %q, want %q (the late commit is not confirmed)", got, want)
	}
	for table, want := range map[string]float64{"public.outbox": 25, "billing.outbox": 12} {
		if got := testenv.MetricValue(t, reg, "walrelay_outbox_rows_pruned_total", map[string]string{"table": table}); got != want {
			t.Errorf("walrelay_outbox_rows_pruned_total{table=%q} = %v, want %v", table, got, want)
		}
	}

	if res := cycle(t, p); res.Rows != 0 {
		t.Errorf("third pass removed %d rows before the slot confirmed the late commit", res.Rows)
	}
	advance(t, d)
	res = cycle(t, p)
	if _, byTable := parts(t, res); byTable["public.outbox"].Rows != 1 || byTable["billing.outbox"].Rows != 1 {
		t.Errorf("pass after the slot confirmed the late commit: %+v; want its row removed from each table", byTable)
	}
	for _, table := range bothTables {
		if got := idsIn(t, d, table); len(got) != 1 {
			t.Errorf("%s left %q, want its young row", table, got)
		}
		labels := map[string]string{"table": table}
		if age := testenv.MetricValue(t, reg, "walrelay_outbox_oldest_row_age_seconds", labels); age <= 0 || age > 600 {
			t.Errorf("walrelay_outbox_oldest_row_age_seconds{table=%q} = %v, want the young row's few seconds", table, age)
		}
		if size := testenv.MetricValue(t, reg, "walrelay_outbox_table_size_bytes", labels); size < 8192 {
			t.Errorf("walrelay_outbox_table_size_bytes{table=%q} = %v, want at least a page", table, size)
		}
	}
}

// A plain and a partitioned outbox table under one Pruner: the plain one's
// rows are deleted, the partitioned one's old partitions detached and then
// dropped, by the same fences.
//
// Not parallel: see TestEveryTablePrunedByOneFence.
func TestPlainAndPartitionedMixed(t *testing.T) {
	d := twoOutboxes(t, true)
	insertOldInto(t, d, "public.outbox", "pub", 6)
	testenv.Exec(t, d.dsn, `INSERT INTO billing.outbox (aggregatetype, aggregateid, type, created_at) VALUES
		('order', 'd1', 'T', '2020-01-01 12:00+00'), ('order', 'd2', 'T', '2020-01-02 12:00+00'), ('order', 'now', 'T', now())`)
	p, reg := multiPruner(t, d, 100, nil)
	if res := cycle(t, p); res.Fence != nil {
		t.Fatalf("first pass: %+v; want only a fence taken", res)
	}
	advance(t, d)
	res := cycle(t, p)
	_, byTable := parts(t, res)
	t.Logf("second pass: %+v", byTable)
	pub, bill := byTable["public.outbox"], byTable["billing.outbox"]
	if pub.Partitioned || pub.Rows != 6 {
		t.Errorf("public.outbox: %+v; want plain, 6 rows deleted", pub)
	}
	if want := []string{"billing.outbox_d1", "billing.outbox_d2"}; !bill.Partitioned || !slices.Equal(bill.Detached, want) || len(bill.Dropped) != 0 {
		t.Errorf("billing.outbox: %+v; want partitioned, %q detached, nothing dropped yet", bill, want)
	}
	if !res.Partitioned || !slices.Equal(res.Detached, bill.Detached) {
		t.Errorf("result partitioned %v, detached %q; want true and billing's", res.Partitioned, res.Detached)
	}
	advance(t, d)
	res = cycle(t, p)
	if _, byTable := parts(t, res); !slices.Equal(byTable["billing.outbox"].Dropped, []string{"billing.outbox_d1", "billing.outbox_d2"}) {
		t.Errorf("pass after the slot confirmed: %+v; want billing.outbox_d1 and _d2 dropped", byTable)
	}
	if got := testenv.QueryValue[[]string](t, d.dsn, `SELECT array_agg(relname::text ORDER BY relname) FROM pg_class WHERE relnamespace = 'billing'::regnamespace AND relkind = 'r'`); !slices.Equal(got, []string{"outbox_now"}) {
		t.Errorf("billing tables left %q, want outbox_now", got)
	}
	if got := idsIn(t, d, "public.outbox"); len(got) != 0 {
		t.Errorf("public.outbox left %q, want nothing", got)
	}
	if got := testenv.MetricValue(t, reg, "walrelay_outbox_partitions_dropped_total", map[string]string{"table": "billing.outbox"}); got != 2 {
		t.Errorf("walrelay_outbox_partitions_dropped_total{table=billing.outbox} = %v, want 2", got)
	}
	if got := testenv.MetricValue(t, reg, "walrelay_outbox_rows_pruned_total", map[string]string{"table": "public.outbox"}); got != 6 {
		t.Errorf("walrelay_outbox_rows_pruned_total{table=public.outbox} = %v, want 6", got)
	}
}

// A listed table that is missing is an error naming it, each pass, and
// does not keep the tables listed before and after it from being pruned.
//
// Not parallel: see TestEveryTablePrunedByOneFence.
func TestMissingTableDoesNotStopTheOthers(t *testing.T) {
	d := twoOutboxes(t, false)
	insertOldInto(t, d, "public.outbox", "pub", 3)
	insertOldInto(t, d, "billing.outbox", "bill", 4)
	p, _ := multiPruner(t, d, 100, config.StringList{"public.outbox", "billing.gone", "billing.outbox"})
	for pass := 1; pass <= 2; pass++ {
		res, err := p.Cycle(t.Context())
		if !errors.Is(err, retention.ErrTable) || !strings.Contains(err.Error(), "billing.gone does not exist") {
			t.Errorf("pass %d: %v; want ErrTable naming billing.gone", pass, err)
		}
		if pass == 1 && res.Fence != nil {
			t.Fatalf("first pass removed by fence %v; it only takes one", res.Fence)
		}
		advance(t, d)
	}
	for _, table := range bothTables {
		if got := idsIn(t, d, table); len(got) != 0 {
			t.Errorf("%s left %q, want nothing: a missing table listed with it stopped its pruning", table, got)
		}
	}
}

// The relay creates the four outbox series of every listed table at 0
// when it starts, with retention off too: a dashboard or alert on one
// table's series sees it from the start, and increase() its first prune.
func TestSeriesPerListedTable(t *testing.T) {
	t.Parallel()
	cfg := config.Default() // relay.New connects to nothing
	cfg.Postgres.Table = bothTables
	reg := prometheus.NewRegistry()
	if _, err := relay.New(cfg, nil, metrics.New(reg, "test", cfg.Postgres.Slot)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"walrelay_outbox_rows_pruned_total", "walrelay_outbox_partitions_dropped_total",
		"walrelay_outbox_oldest_row_age_seconds", "walrelay_outbox_table_size_bytes"} {
		for _, table := range bothTables {
			if v, ok := testenv.FindMetric(t, reg, name, map[string]string{"table": table}); !ok || v != 0 {
				t.Errorf("%s{table=%q}: %v (exists: %v); want a series at 0", name, table, v, ok)
			}
		}
	}
}
