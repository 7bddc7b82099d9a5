package relay_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/testenv"
)

// snapshot.mode=initial with rows already in both tables and writers
// inserting into both before, during and after the snapshot: every row of
// each table is on Kafka exactly once across the slot's boundary (the
// snapshot reads both tables in the slot's exported snapshot; the stream
// sends the rows committed after it).
func TestTwoTablesInitialSnapshotWhileWriting(t *testing.T) {
	f := newFixtureTables(t, func(c *config.Config) {
		c.Snapshot.Mode = config.SnapshotInitial
		c.Snapshot.ProgressInterval = 500 * time.Millisecond
		c.Snapshot.ChunkRows = 500
	})
	dropUnusedSlot(t, f.dsn)
	const perTable = 3000
	fillTables(t, f.dsn, perTable, tableA, tableB)
	_, snapRows, written, _ := f.snapshotWhileWriting(t, 2*perTable, tableA, tableB)
	pub := f.logs.waitLog(t, "snapshot: publishing rows", nil, time.Second)
	if n, _ := pub["tables"].(float64); n != 2 {
		t.Errorf("the snapshot read %v tables, want 2", pub["tables"])
	}
	checkExactlyOnce(t, f, tableA, tableB)
	t.Logf("snapshot of %d rows in two tables; %d written by writers meanwhile", snapRows, written)
}

// walrelay snapshot (Backfill) reads every published table, both listed:
// each row of both tables once; with tables it reads only those, and it
// refuses a table that is not published.
func TestTwoTablesBackfill(t *testing.T) {
	f := newFixtureTables(t, nil)
	fillTables(t, f.dsn, 200, tableA, tableB)
	backfill := func(where string, tables ...string) (relay.BackfillResult, error) {
		r, err := relay.New(f.cfg, f.logs.logger(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return r.Backfill(t.Context(), where, tables, false, nil)
	}
	res, err := backfill("")
	if err != nil {
		t.Fatalf("Backfill: %v", err)
	}
	if want := []string{tableB, tableA}; !slices.Equal(res.Tables, want) || res.Rows != 400 {
		t.Fatalf("Backfill: tables %v, %d rows; want %v (schema, name order), 400", res.Tables, res.Rows, want)
	}
	checkExactlyOnce(t, f, tableA, tableB)

	// --table billing.outbox: a table added later that already had rows.
	res, err = backfill("", tableB)
	if err != nil {
		t.Fatalf("Backfill of %s: %v", tableB, err)
	}
	if !slices.Equal(res.Tables, []string{tableB}) || res.Rows != 200 {
		t.Fatalf("Backfill of %s: tables %v, %d rows; want [%s], 200", tableB, res.Tables, res.Rows, tableB)
	}
	recs := f.broker.ReadAll(t, []string{"outbox.event.snap"}, 600, time.Minute)
	fromB := testenv.QueryValue[[]string](t, f.dsn, `SELECT array_agg(id::text) FROM billing.outbox`)
	seen := map[string]int{}
	for _, r := range recs {
		seen[testenv.Header(r, "id")]++
	}
	for _, id := range fromB {
		if seen[id] != 2 {
			t.Fatalf("row %s of %s is on Kafka %d times after two backfills of it, want 2", id, tableB, seen[id])
		}
	}

	testenv.Exec(t, f.dsn, `CREATE TABLE public.unpublished (LIKE public.outbox INCLUDING ALL)`)
	_, err = backfill("", tableA, "public.unpublished")
	if !errors.Is(err, relay.ErrTableNotPublished) || !strings.Contains(err.Error(), "public.unpublished") {
		t.Fatalf("Backfill of an unpublished table: %v, want ErrTableNotPublished naming it", err)
	}
	if n := topicRecords(t, f, "outbox.event.snap"); n != 600 {
		t.Errorf("%d records after a refused backfill, want the 600 of the two before", n)
	}
}
