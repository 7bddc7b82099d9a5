package slotrecord_test

import (
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/slotrecord"
	"github.com/walrelay/walrelay/internal/testenv"
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
