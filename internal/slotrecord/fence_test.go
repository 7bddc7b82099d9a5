package slotrecord_test

import (
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/slotrecord"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/internal/txfence"
)

// A record table of an earlier walrelay (without the fence columns) still
// reads and records, and Ensure adds the columns: then a relay's Raise
// makes a pending fence the covered one once it passes its LSN.
func TestRecordTableOfAnEarlierVersion(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	conn := testenv.Connect(t, dsn)
	testenv.Exec(t, dsn, `CREATE TABLE public.walrelay_slot_positions (
		slot_name text PRIMARY KEY, system_identifier text NOT NULL, confirmed_lsn pg_lsn NOT NULL, created_lsn pg_lsn,
		updated_at timestamptz NOT NULL DEFAULT now(), note text, jumped_at timestamptz, jump text, jumped_from_lsn pg_lsn,
		adopted_at timestamptz, adopted_by text)`)
	testenv.Exec(t, dsn, `SELECT pg_create_logical_replication_slot('s', 'pgoutput')`)
	tbl := slotrecord.Table{Schema: "public"}
	if _, _, err := slotrecord.Baseline(t.Context(), conn, tbl, "s", "test"); err != nil {
		t.Fatalf("baseline on a table of an earlier version: %v", err)
	}
	st, err := slotrecord.Read(t.Context(), conn, tbl, "s")
	if err != nil || st.Record == nil || st.Fences {
		t.Fatalf("read: %+v, fences %v, %v; want the record, no fence columns", st.Record, st.Fences, err)
	}
	if _, _, err := slotrecord.Raise(t.Context(), conn, tbl, "s", st.SlotConfirmed); err != nil {
		t.Fatalf("raise on a table of an earlier version: %v", err)
	}
	if _, err := tbl.Ensure(t.Context(), conn); err != nil {
		t.Fatalf("ensure: %v", err)
	}
	if st, err = slotrecord.Read(t.Context(), conn, tbl, "s"); err != nil || !st.Fences {
		t.Fatalf("read after ensure: fences %v, %v; want the columns added", st.Fences, err)
	}
	lsn := testenv.QueryValue[string](t, dsn, `SELECT pg_current_wal_insert_lsn()::text`)
	testenv.Exec(t, dsn, `UPDATE walrelay_slot_positions SET fence_xmin = 1000, fence_lsn = $1::pg_lsn`, lsn)
	to := testenv.QueryValue[string](t, dsn, `SELECT pg_current_wal_insert_lsn()::text`)
	if _, _, err := slotrecord.Raise(t.Context(), conn, tbl, "s", mustLSN(t, to)); err != nil {
		t.Fatal(err)
	}
	st, err = slotrecord.Read(t.Context(), conn, tbl, "s")
	if err != nil || st.Record.Covered == nil || st.Record.Covered.Xmin != 1000 || st.Record.Pending != nil || st.HealFence() == nil || st.Record.Timeline == 0 {
		t.Fatalf("after a raise past the fence: covered %+v, pending %+v, timeline %d, %v; want fence 1000 covered, none pending, the timeline", st.Record.Covered, st.Record.Pending, st.Record.Timeline, err)
	}
}

func mustLSN(t *testing.T, s string) pglogrepl.LSN {
	t.Helper()
	l, err := pglogrepl.ParseLSN(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// GapRows sums the rows of every listed table that do not precede the
// record's covered fence (bounded), or every row without one.
func TestGapRowsOverTables(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	conn := testenv.Connect(t, dsn)
	testenv.Exec(t, dsn, `CREATE SCHEMA billing`)
	testenv.Exec(t, dsn, `CREATE TABLE public.outbox (id int)`)
	testenv.Exec(t, dsn, `CREATE TABLE billing.outbox (id int)`)
	testenv.Exec(t, dsn, `INSERT INTO public.outbox SELECT generate_series(1, 2)`)
	testenv.Exec(t, dsn, `INSERT INTO billing.outbox SELECT generate_series(1, 3)`)
	f, err := txfence.TakeFence(t.Context(), conn)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, dsn, `INSERT INTO public.outbox VALUES (10)`)
	testenv.Exec(t, dsn, `INSERT INTO billing.outbox SELECT generate_series(10, 13)`)
	tables := []string{"public.outbox", "billing.outbox"}

	st := slotrecord.State{System: f.System, Record: &slotrecord.Record{System: f.System, Covered: &f}}
	if n, bounded, err := slotrecord.GapRows(t.Context(), conn, tables, st); err != nil || n != 5 || !bounded {
		t.Errorf("with a covered fence: %d rows, bounded %t, %v; want the 1+4 after the fence, bounded", n, bounded, err)
	}
	if n, bounded, err := slotrecord.GapRows(t.Context(), conn, tables, slotrecord.State{System: f.System}); err != nil || n != 10 || bounded {
		t.Errorf("without a fence: %d rows, bounded %t, %v; want all 3+7, not bounded", n, bounded, err)
	}
}
