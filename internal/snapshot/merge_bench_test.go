package snapshot_test

import (
	"context"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/snapshot"
	"github.com/walrelay/walrelay/internal/testenv"
)

// BenchmarkMergeOrdered reads 2 x 50,000 rows (written in 1,000
// transactions alternating between the tables) in the heal's order keys
// without commit timestamps (xid, cmin): merged across the tables, and
// table after table with the same keys (what the heal did before), to
// show what the merge costs. Reports rows/s.
func BenchmarkMergeOrdered(b *testing.B) {
	dsn, tables := twoTables(b)
	testenv.Exec(b, dsn, `DO $$ BEGIN FOR i IN 1..1000 LOOP
		IF i % 2 = 0 THEN INSERT INTO public.outbox (tag) SELECT repeat('x', 200) FROM generate_series(1, 100);
		ELSE INSERT INTO billing.outbox (tag) SELECT repeat('x', 200) FROM generate_series(1, 100); END IF;
		COMMIT; END LOOP; END $$`)
	order := []snapshot.OrderKey{{Expr: "xmin::text::bigint"}, {Expr: "cmin::text::bigint"}}
	read := func(b *testing.B, sets [][]snapshot.Table) {
		conn, err := snapshot.Connect(b.Context(), dsn)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close(context.Background())
		rows := 0
		for b.Loop() {
			rd, err := snapshot.Open(b.Context(), conn, "")
			if err != nil {
				b.Fatal(err)
			}
			for _, set := range sets {
				pks := make([][]string, len(set))
				for i := range pks {
					pks[i] = []string{"id"}
				}
				if err := rd.MergeOrdered(b.Context(), set, "", order, pks, 1000, func(int, []*pglogrepl.TupleDataColumn) error { rows++; return nil }); err != nil {
					b.Fatal(err)
				}
			}
			_ = rd.Close(b.Context())
		}
		b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
	}
	b.Run("merged", func(b *testing.B) { read(b, [][]snapshot.Table{tables}) })
	b.Run("table by table", func(b *testing.B) { read(b, [][]snapshot.Table{tables[:1], tables[1:]}) })
}
