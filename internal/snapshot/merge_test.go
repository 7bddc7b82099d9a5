package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/snapshot"
	"github.com/walrelay/walrelay/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// twoTables creates public.outbox and billing.outbox (id, tag, k, v) on a
// new database and returns its DSN and the two tables.
func twoTables(t testing.TB) (string, []snapshot.Table) {
	t.Helper()
	dsn := testenv.Postgres(t).NewDatabase(t)
	testenv.Exec(t, dsn, `
		CREATE TABLE public.outbox (id bigserial PRIMARY KEY, tag text, k bigint NOT NULL DEFAULT 0, v bigint);
		CREATE SCHEMA billing;
		CREATE TABLE billing.outbox (LIKE public.outbox INCLUDING ALL)`)
	var tables []snapshot.Table
	for _, n := range []string{"public.outbox", "billing.outbox"} {
		schema, name, _ := strings.Cut(n, ".")
		oid := testenv.QueryValue[uint32](t, dsn, `SELECT $1::regclass::oid`, n)
		tables = append(tables, snapshot.Table{Schema: schema, Name: name, OID: oid, Columns: []string{"id", "tag", "k", "v"}})
	}
	return dsn, tables
}

// tx runs stmts in one transaction on conn.
func tx(t *testing.T, conn *pgx.Conn, stmts ...string) {
	t.Helper()
	err := pgx.BeginFunc(t.Context(), conn, func(tx pgx.Tx) error {
		for _, s := range stmts {
			if _, err := tx.Exec(t.Context(), s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("transaction %q: %v", stmts, err)
	}
}

// openReader opens a snapshot reader in a snapshot of its own on a
// connection to dsn; both are closed at cleanup.
func openReader(t *testing.T, dsn string) *snapshot.Reader {
	t.Helper()
	conn, err := snapshot.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	rd, err := snapshot.Open(t.Context(), conn, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rd.Close(context.Background()) })
	return rd
}

// merged reads tables with MergeOrdered in a snapshot of its own and
// returns each row as "<table index>:<tag>" (tag NULL: "<null>").
func merged(t *testing.T, dsn string, tables []snapshot.Table, where string, order []snapshot.OrderKey, chunk int) ([]string, error) {
	t.Helper()
	rd := openReader(t, dsn)
	pks := make([][]string, len(tables))
	for i, tb := range tables {
		var err error
		if pks[i], err = rd.Check(t.Context(), tb, where); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	err := rd.MergeOrdered(t.Context(), tables, where, order, pks, chunk, func(i int, cols []*pglogrepl.TupleDataColumn) error {
		tag := "<null>"
		if cols[1].DataType == pglogrepl.TupleDataTypeText {
			tag = string(cols[1].Data)
		}
		got = append(got, fmt.Sprintf("%d:%s", i, tag))
		return nil
	})
	if err != nil {
		return got, err
	}
	// The cursors are closed: the transaction reads on (a second merge).
	if err := rd.MergeOrdered(t.Context(), tables, where, order, pks, chunk, func(int, []*pglogrepl.TupleDataColumn) error { return nil }); err != nil {
		t.Fatalf("a second merge in the same transaction: %v", err)
	}
	return got, nil
}

// The rows of two tables written in interleaved transactions (A, B, A, B)
// and within one transaction (A, B, A, then B, A in one more) come out of
// MergeOrdered in commit order across the tables, with xid then cmin as
// the keys (the heal's order without track_commit_timestamp), at every
// chunk size; read table by table they would not.
func TestMergeOrderedCommitOrder(t *testing.T) {
	dsn, tables := twoTables(t)
	conn := testenv.Connect(t, dsn)
	a := func(tag string) string { return `INSERT INTO public.outbox (tag) VALUES ('` + tag + `')` }
	b := func(tag string) string { return `INSERT INTO billing.outbox (tag) VALUES ('` + tag + `')` }
	tx(t, conn, a("1"))
	tx(t, conn, b("2"))
	tx(t, conn, a("3"))
	tx(t, conn, b("4"))
	tx(t, conn, a("5"), b("6"), a("7"))
	tx(t, conn, b("8"), `INSERT INTO public.outbox (tag) SELECT '9' UNION ALL SELECT '10'`, b("11"))
	want := []string{"0:1", "1:2", "0:3", "1:4", "0:5", "1:6", "0:7", "1:8", "0:9", "0:10", "1:11"}
	order := []snapshot.OrderKey{{Expr: "xmin::text::bigint"}, {Expr: "cmin::text::bigint"}}
	for _, chunk := range []int{1, 2, 3, 1000} {
		t.Run(fmt.Sprintf("chunk %d", chunk), func(t *testing.T) {
			got, err := merged(t, dsn, tables, "", order, chunk)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("merged %v, want %v", got, want)
			}
		})
	}
}

// The merge follows each key's direction, breaks ties on every key by the
// tables' order (then heap order within a table), applies the filter, and
// passes NULL and empty values through as pgoutput would.
func TestMergeOrderedKeys(t *testing.T) {
	dsn, tables := twoTables(t)
	testenv.Exec(t, dsn, `
		INSERT INTO public.outbox (tag, k, v) VALUES ('a1', 1, 10), ('a2', 2, 30), ('a3', 2, 20), (NULL, 3, 5), ('a5', 9, 0);
		INSERT INTO billing.outbox (tag, k, v) VALUES ('b1', 1, 10), ('', 2, 25), ('b3', 4, 1), ('b4', 9, 1)`)
	cases := []struct {
		name  string
		where string
		order []snapshot.OrderKey
		want  []string
	}{
		{"ascending, ties in table order", "", []snapshot.OrderKey{{Expr: "k"}},
			[]string{"0:a1", "1:b1", "0:a2", "0:a3", "1:", "0:<null>", "1:b3", "0:a5", "1:b4"}},
		{"a descending second key", "", []snapshot.OrderKey{{Expr: "k"}, {Expr: "v", Desc: true}},
			[]string{"0:a1", "1:b1", "0:a2", "1:", "0:a3", "0:<null>", "1:b3", "1:b4", "0:a5"}},
		{"descending first key", "", []snapshot.OrderKey{{Expr: "k", Desc: true}, {Expr: "v"}},
			[]string{"0:a5", "1:b4", "1:b3", "0:<null>", "0:a3", "1:", "0:a2", "0:a1", "1:b1"}},
		{"filtered, one table left empty", "k >= 3 AND id > 0 AND tag IS DISTINCT FROM 'b3' AND tag IS DISTINCT FROM 'b4'", []snapshot.OrderKey{{Expr: "k"}},
			[]string{"0:<null>", "0:a5"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, chunk := range []int{1, 2, 1000} {
				got, err := merged(t, dsn, tables, c.where, c.order, chunk)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, c.want) {
					t.Errorf("chunk %d: merged %v, want %v", chunk, got, c.want)
				}
			}
		})
	}
}

// A key that is NULL on a row cannot be ordered: the merge says so rather
// than place the row anywhere; an error of fn ends the merge.
func TestMergeOrderedErrors(t *testing.T) {
	dsn, tables := twoTables(t)
	testenv.Exec(t, dsn, `INSERT INTO public.outbox (tag, v) VALUES ('a1', 1), ('a2', NULL); INSERT INTO billing.outbox (tag, v) VALUES ('b1', 2)`)
	if _, err := merged(t, dsn, tables, "", []snapshot.OrderKey{{Expr: "v"}}, 10); err == nil || !strings.Contains(err.Error(), "order key 1 is NULL") {
		t.Errorf("a NULL key: %v, want an error naming it", err)
	}
	rd := openReader(t, dsn)
	stop := errors.New("stop")
	n := 0
	err := rd.MergeOrdered(t.Context(), tables, "", []snapshot.OrderKey{{Expr: "id"}}, [][]string{{"id"}, {"id"}}, 10, func(int, []*pglogrepl.TupleDataColumn) error {
		n++
		return stop
	})
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("fn failing: %v after %d rows, want its error after 1", err, n)
	}
}
