package retention_test

import (
	"slices"
	"testing"

	"github.com/walrelay/walrelay/internal/testenv"
)

// partitionedOutbox creates a database with an outbox partitioned by day
// of created_at (two days in 2020, then one partition to 2100, and with
// def a DEFAULT partition), a publication through the partition root and
// a slot.
func partitionedOutbox(t *testing.T, def bool) db {
	t.Helper()
	d := db{testenv.Postgres(t).NewDatabase(t), testenv.UniqueName(t, "s")}
	testenv.Exec(t, d.dsn, `
		CREATE TABLE outbox (
			id uuid NOT NULL DEFAULT gen_random_uuid(), aggregatetype varchar(255) NOT NULL, aggregateid varchar(255) NOT NULL,
			type varchar(255) NOT NULL, payload jsonb, created_at timestamptz NOT NULL DEFAULT now(),
			PRIMARY KEY (id, created_at)) PARTITION BY RANGE (created_at);
		CREATE TABLE outbox_d1 PARTITION OF outbox FOR VALUES FROM ('2020-01-01 00:00+00') TO ('2020-01-02 00:00+00');
		CREATE TABLE outbox_d2 PARTITION OF outbox FOR VALUES FROM ('2020-01-02 00:00+00') TO ('2020-01-03 00:00+00');
		CREATE TABLE outbox_now PARTITION OF outbox FOR VALUES FROM ('2020-01-03 00:00+00') TO ('2100-01-01 00:00+00');
		CREATE PUBLICATION walrelay_outbox FOR TABLE outbox WITH (publish = 'insert', publish_via_partition_root = true);`)
	if def {
		testenv.Exec(t, d.dsn, `CREATE TABLE outbox_default PARTITION OF outbox DEFAULT`)
	}
	testenv.Exec(t, d.dsn, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, d.slot)
	return d
}

// tables lists the outbox_ tables of the database (attached or not).
func tables(t *testing.T, d db) []string {
	t.Helper()
	return testenv.QueryValue[[]string](t, d.dsn, `SELECT coalesce(array_agg(relname::text ORDER BY relname), '{}') FROM pg_class WHERE relname LIKE 'outbox_%' AND relkind = 'r'`)
}

// Partitions whose upper bound is older than the retention are detached
// and dropped only once the slot confirmed a fence taken after their
// detach: a row committed late into an old partition keeps it (detached,
// its rows intact) until the slot confirms it. The DEFAULT partition and
// partitions within the retention stay. Without a DEFAULT partition the
// detach is CONCURRENTLY, with one it is plain.
func TestPartitionsDroppedOnlyAfterConfirmation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		def  bool
	}{{"concurrently", false}, {"with a default partition", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := partitionedOutbox(t, tc.def)
			testenv.Exec(t, d.dsn, `INSERT INTO outbox (aggregatetype, aggregateid, type, created_at) VALUES
				('order', 'd1', 'T', '2020-01-01 12:00+00'), ('order', 'd2', 'T', '2020-01-02 12:00+00'), ('order', 'now', 'T', now())`)
			if tc.def {
				testenv.Exec(t, d.dsn, `INSERT INTO outbox (aggregatetype, aggregateid, type, created_at) VALUES ('order', 'default', 'T', '1999-01-01')`)
			}
			advance(t, d)
			// A transaction open across the first fence inserts into the
			// old partition d2.
			late := openTx(t, d, `INSERT INTO outbox (aggregatetype, aggregateid, type, created_at) VALUES ('order', 'late', 'T', '2020-01-02 13:00+00')`)
			p, reg := pruner(t, d, nil)
			if res := cycle(t, p); !res.Partitioned || len(res.Detached)+len(res.Dropped) != 0 {
				t.Fatalf("first pass: %+v; want a partitioned outbox and nothing removed", res)
			}
			advance(t, d) // confirms the first fence, not the late commit
			if err := late.Commit(t.Context()); err != nil {
				t.Fatal(err)
			}

			res := cycle(t, p)
			if want := []string{"public.outbox_d1", "public.outbox_d2"}; !slices.Equal(res.Detached, want) || len(res.Dropped) != 0 {
				t.Fatalf("second pass detached %q, dropped %q; want %q detached, nothing dropped", res.Detached, res.Dropped, want)
			}
			for range 2 { // the slot does not move: nothing is dropped
				if res := cycle(t, p); len(res.Dropped) != 0 {
					t.Fatalf("dropped %q before the slot confirmed the late commit", res.Dropped)
				}
			}
			if got := testenv.QueryValue[[]string](t, d.dsn, `SELECT array_agg(aggregateid ORDER BY aggregateid) FROM outbox_d2`); !slices.Equal(got, []string{"d2", "late"}) {
				t.Fatalf("detached outbox_d2 holds %q, want d2 and late", got)
			}

			advance(t, d)
			res = cycle(t, p)
			if want := []string{"public.outbox_d1", "public.outbox_d2"}; !slices.Equal(res.Dropped, want) {
				t.Fatalf("pass after the slot confirmed dropped %q, want %q", res.Dropped, want)
			}
			want := []string{"outbox_now"}
			if tc.def {
				want = []string{"outbox_default", "outbox_now"}
			}
			if got := tables(t, d); !slices.Equal(got, want) {
				t.Errorf("tables left %q, want %q", got, want)
			}
			if got := testenv.MetricValue(t, reg, "walrelay_outbox_partitions_dropped_total", outboxLabel); got != 2 {
				t.Errorf("walrelay_outbox_partitions_dropped_total = %v, want 2", got)
			}
		})
	}
}
