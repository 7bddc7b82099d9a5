package retention_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/retention"
	"github.com/walrelay/walrelay/internal/testenv"
)

// unpublishedBilling creates public.outbox (walrelay setup, in the
// publication) and billing.outbox, which no publication publishes.
func unpublishedBilling(t *testing.T) db {
	t.Helper()
	d := plainOutbox(t)
	testenv.Exec(t, d.dsn, `CREATE SCHEMA billing;
		CREATE TABLE billing.outbox (LIKE public.outbox INCLUDING ALL)`)
	return d
}

// wantNotPublished reports an error unless err wraps ErrNotPublished and names
// billing.outbox.
func wantNotPublished(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, retention.ErrNotPublished) || !strings.Contains(err.Error(), "billing.outbox") {
		t.Errorf("%s: %v; want ErrNotPublished naming billing.outbox", what, err)
	}
}

// A listed table no publication publishes is never streamed, so the
// slot's position proves none of its rows delivered: Run's passes (Cycle)
// leave it alone, pass after pass, and say so (ErrNotPublished naming
// it), while the published table is pruned.
//
// Not parallel: see TestEveryTablePrunedByOneFence.
func TestCycleLeavesUnpublishedTable(t *testing.T) {
	d := unpublishedBilling(t)
	insertOldInto(t, d, "public.outbox", "pub", 5)
	insertOldInto(t, d, "billing.outbox", "bill", 4)
	p, _ := multiPruner(t, d, 100, nil)
	for pass := 1; pass <= 3; pass++ {
		res, err := p.Cycle(t.Context())
		wantNotPublished(t, "Cycle", err)
		if pass == 1 {
			t.Logf("said: %v", err)
		}
		if _, byTable := parts(t, res); byTable["billing.outbox"].Rows != 0 {
			t.Fatalf("pass %d removed %d rows of billing.outbox", pass, byTable["billing.outbox"].Rows)
		}
		advance(t, d)
	}
	if got := idsIn(t, d, "billing.outbox"); len(got) != 4 {
		t.Errorf("billing.outbox left %q, want its 4 rows", got)
	}
	if got := idsIn(t, d, "public.outbox"); len(got) != 0 {
		t.Errorf("public.outbox left %q, want none (it is published)", got)
	}
}

// walrelay outbox prune's pass (Once) leaves the unpublished table alone
// too, and prunes the published one.
//
// Not parallel: see TestEveryTablePrunedByOneFence.
func TestOnceLeavesUnpublishedTable(t *testing.T) {
	d := unpublishedBilling(t)
	insertOldInto(t, d, "public.outbox", "pub", 5)
	insertOldInto(t, d, "billing.outbox", "bill", 4)
	p, _ := multiPruner(t, d, 100, nil)
	advanced := make(chan struct{})
	go func() { defer close(advanced); time.Sleep(300 * time.Millisecond); advance(t, d) }()
	res, err := p.Once(t.Context(), 10*time.Second)
	<-advanced
	wantNotPublished(t, "Once", err)
	if errors.Is(err, retention.ErrNotConfirmed) {
		t.Fatalf("Once: %v; the fence was not confirmed", err)
	}
	if _, byTable := parts(t, res); byTable["public.outbox"].Rows != 5 || byTable["billing.outbox"].Rows != 0 {
		t.Errorf("Once: %+v; want public.outbox's 5 rows removed, none of billing.outbox", byTable)
	}
	if got := idsIn(t, d, "billing.outbox"); len(got) != 4 {
		t.Errorf("billing.outbox left %q, want its 4 rows", got)
	}
	if got := idsIn(t, d, "public.outbox"); len(got) != 0 {
		t.Errorf("public.outbox left %q, want none", got)
	}
}

// A table dropped from the publication after a pass (ALTER PUBLICATION …
// DROP TABLE) is left alone from the next pass on: the rows committed
// since are not streamed, yet the fence the next pass removes by, taken
// before, would cover those committed before the fence.
//
// Not parallel: see TestEveryTablePrunedByOneFence.
func TestTableDroppedFromPublicationLeftAlone(t *testing.T) {
	d := twoOutboxes(t, false)
	insertOldInto(t, d, "public.outbox", "pub", 3)
	insertOldInto(t, d, "billing.outbox", "bill", 2)
	p, _ := multiPruner(t, d, 100, nil)
	cycle(t, p) // the fence
	advance(t, d)
	if res := cycle(t, p); res.Rows != 5 {
		t.Fatalf("pass with both published removed %d rows, want 5", res.Rows)
	}
	testenv.Exec(t, d.dsn, `ALTER PUBLICATION walrelay_outbox DROP TABLE billing.outbox`)
	insertOldInto(t, d, "public.outbox", "pub2", 3)
	insertOldInto(t, d, "billing.outbox", "bill2", 2) // never streamed
	for pass := 1; pass <= 2; pass++ {
		advance(t, d)
		res, err := p.Cycle(t.Context())
		wantNotPublished(t, "Cycle after the drop", err)
		if _, byTable := parts(t, res); byTable["billing.outbox"].Rows != 0 {
			t.Fatalf("pass %d after the drop removed %d rows of billing.outbox", pass, byTable["billing.outbox"].Rows)
		}
	}
	if got := idsIn(t, d, "billing.outbox"); len(got) != 2 {
		t.Errorf("billing.outbox left %q, want the 2 rows written after the drop", got)
	}
	if got := idsIn(t, d, "public.outbox"); len(got) != 0 {
		t.Errorf("public.outbox left %q, want none", got)
	}
}

// A table published by another of postgres.publications, FOR TABLES IN
// SCHEMA (Postgres 15+), counts as published: membership is what
// pg_publication_tables lists for any of them, so both tables are pruned.
//
// Not parallel: see TestEveryTablePrunedByOneFence.
func TestTablePublishedBySchemaIsPruned(t *testing.T) {
	d := unpublishedBilling(t)
	if major := testenv.ServerMajor(t, d.dsn); major < 15 {
		t.Skipf("FOR TABLES IN SCHEMA needs Postgres 15+, the server is %d", major)
	}
	testenv.Exec(t, d.dsn, `CREATE PUBLICATION billing_pub FOR TABLES IN SCHEMA billing`)
	insertOldInto(t, d, "public.outbox", "pub", 3)
	insertOldInto(t, d, "billing.outbox", "bill", 2)
	cfg := config.Default()
	cfg.Postgres.DSN, cfg.Postgres.Slot, cfg.Postgres.Table = d.dsn, d.slot, bothTables
	cfg.Postgres.Publications = config.StringList{"walrelay_outbox", "billing_pub"}
	cfg.Outbox.Retention, cfg.Outbox.PruneBatch = time.Hour, 100
	cfg.Outbox.PruneStatementTimeout = 5 * time.Second
	p := retention.New(retention.FromConfig(cfg), nil, retention.Metrics{})
	t.Cleanup(func() { p.Close(context.Background()) })
	cycle(t, p)
	advance(t, d)
	if res := cycle(t, p); res.Rows != 5 {
		t.Errorf("pass removed %d rows, want both tables' 5", res.Rows)
	}
}

// A partitioned table whose publication publishes its partitions under
// their own names (publish_via_partition_root off) is not published as
// the relay decides it (it refuses to start so, relay.ErrPublicationLeaves):
// retention leaves it alone, no partition detached or dropped, and says so.
//
// Not parallel: see TestEveryTablePrunedByOneFence.
func TestPartitionsPublishedAsLeavesLeftAlone(t *testing.T) {
	d := twoOutboxes(t, true)
	testenv.Exec(t, d.dsn, `ALTER PUBLICATION walrelay_outbox SET (publish_via_partition_root = false);
		INSERT INTO billing.outbox (aggregatetype, aggregateid, type, created_at) VALUES
		('order', 'd1', 'T', '2020-01-01 12:00+00'), ('order', 'd2', 'T', '2020-01-02 12:00+00')`)
	p, _ := multiPruner(t, d, 100, nil)
	for pass := 1; pass <= 3; pass++ {
		res, err := p.Cycle(t.Context())
		wantNotPublished(t, "Cycle", err)
		if _, byTable := parts(t, res); len(byTable["billing.outbox"].Detached) != 0 || len(byTable["billing.outbox"].Dropped) != 0 {
			t.Fatalf("pass %d: billing.outbox %+v; want no partition detached or dropped", pass, byTable["billing.outbox"])
		}
		advance(t, d)
	}
	if got := idsIn(t, d, "billing.outbox"); len(got) != 2 {
		t.Errorf("billing.outbox left %q, want its 2 rows", got)
	}
}
