package partition_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/partition"
	"github.com/walrelay/walrelay/internal/testenv"
	sqlfiles "github.com/walrelay/walrelay/sql"
)

// columnsOf is a table's columns as the catalog describes them: name,
// type, NOT NULL and DEFAULT, one line each, in order.
func columnsOf(t *testing.T, dsn, table string) string {
	t.Helper()
	return testenv.QueryValue[string](t, dsn, `
		SELECT string_agg(format('%s %s %s %s', a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, coalesce(pg_get_expr(d.adbin, d.adrelid), '-')), E'\n' ORDER BY a.attnum)
		FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`, table)
}

// createRoot creates the partitioned root of table (created_at, by
// interval) on dsn with its scheme's RootStatement, and returns the
// scheme.
func createRoot(t *testing.T, dsn, table string, interval time.Duration) partition.Scheme {
	t.Helper()
	s, err := partition.NewScheme(table, "created_at", interval)
	if err != nil {
		t.Fatal(err)
	}
	ddl, err := s.RootStatement()
	if err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, dsn, ddl)
	return s
}

// The partitioned root has sql/001's columns, a primary key of (id,
// created_at), and is partitioned by range of created_at.
func TestRootStatement(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	testenv.Exec(t, dsn, sqlfiles.OutboxTable) // public.outbox, plain
	createRoot(t, dsn, "public.outbox_parted", 24*time.Hour)
	if plain, parted := columnsOf(t, dsn, "public.outbox"), columnsOf(t, dsn, "public.outbox_parted"); plain != parted {
		t.Errorf("partitioned root's columns differ from sql/001's:\n%s\nwant\n%s", parted, plain)
	}
	if got := testenv.QueryValue[string](t, dsn, `SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'public.outbox_parted'::regclass AND contype = 'p'`); got != "PRIMARY KEY (id, created_at)" {
		t.Errorf("primary key %q", got)
	}
	conn := testenv.Connect(t, dsn)
	for table, want := range map[string]string{"public.outbox_parted": "partitioned by range (created_at)", "outbox": "plain table"} {
		l, err := partition.Inspect(t.Context(), conn, table)
		if err != nil || l.String() != want {
			t.Errorf("Inspect(%s) = %v, %v, want %s", table, l, err, want)
		}
	}
	if _, err := partition.Inspect(t.Context(), conn, "public.nothing"); !errors.Is(err, partition.ErrNoTable) {
		t.Errorf("Inspect of a missing table: %v, want ErrNoTable", err)
	}
	other, _ := partition.NewScheme("outbox", "occurred_at", 24*time.Hour)
	if _, err := other.RootStatement(); err == nil || !strings.Contains(err.Error(), "set outbox.time_column=created_at") {
		t.Errorf("RootStatement on another column: %v", err)
	}
}

// EnsureAhead creates the partition of now and `ahead` more, once; List
// reads them back with their bounds whatever the session's time zone; rows
// land in the partition of their created_at.
func TestEnsureAheadAndList(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	testenv.Exec(t, dsn, `CREATE SCHEMA "Events"`)
	createRoot(t, dsn, `Events.Out box`, 6*time.Hour)
	conn := testenv.Connect(t, dsn)
	// pg_get_expr prints bounds in the session's zone: List must not care.
	if _, err := conn.Exec(t.Context(), `SET TimeZone = 'America/New_York'`); err != nil {
		t.Fatal(err)
	}
	now := utc("2026-11-25T13:45:00Z")
	created, err := partition.EnsureAhead(t.Context(), conn, `Events.Out box`, "created_at", 6*time.Hour, 3, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`Events.Out box_p20261125T12 [2026-11-25T12:00:00Z, 2026-11-25T18:00:00Z)`,
		`Events.Out box_p20261125T18 [2026-11-25T18:00:00Z, 2026-11-26T00:00:00Z)`,
		`Events.Out box_p20261126T00 [2026-11-26T00:00:00Z, 2026-11-26T06:00:00Z)`,
		`Events.Out box_p20261126T06 [2026-11-26T06:00:00Z, 2026-11-26T12:00:00Z)`,
	}
	if got := strings.Join(strs(created), "\n"); got != strings.Join(want, "\n") {
		t.Errorf("created:\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
	again, err := partition.EnsureAhead(t.Context(), conn, `Events.Out box`, "created_at", 6*time.Hour, 3, now.Add(5*time.Hour))
	if err != nil || len(again) != 1 || again[0].Name != "Out box_p20261126T12" {
		t.Errorf("five hours later EnsureAhead created %v, %v; want only the next partition", again, err)
	}
	listed, err := partition.List(t.Context(), conn, `Events.Out box`)
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, `Events.Out box_p20261126T12 [2026-11-26T12:00:00Z, 2026-11-26T18:00:00Z)`)
	if got := strings.Join(strs(listed), "\n"); got != strings.Join(want, "\n") {
		t.Errorf("List:\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
	// A row lands where the scheme says it does.
	testenv.Exec(t, dsn, `INSERT INTO "Events"."Out box" (aggregatetype, aggregateid, type, created_at) VALUES ('a', '1', 't', '2026-11-25 23:59:59.5+00')`)
	if got := testenv.QueryValue[string](t, dsn, `SELECT tableoid::regclass::text FROM "Events"."Out box"`); got != `"Events"."Out box_p20261125T18"` {
		t.Errorf("row landed in %s", got)
	}
}

// List reads what someone else created too: a DEFAULT partition, open
// bounds, and refuses bounds that are not a range of one time.
func TestListForeignBounds(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	testenv.Exec(t, dsn, `
		CREATE TABLE o (id int, created_at timestamptz NOT NULL) PARTITION BY RANGE (created_at);
		CREATE TABLE o_old PARTITION OF o FOR VALUES FROM (MINVALUE) TO ('2026-01-01 00:00:00+01');
		CREATE TABLE o_mid PARTITION OF o FOR VALUES FROM ('2026-01-01 00:00:00+01') TO ('2026-06-01 12:30:00.25+00');
		CREATE TABLE o_new PARTITION OF o FOR VALUES FROM ('2026-06-01 12:30:00.25+00') TO (MAXVALUE);
		CREATE TABLE o_def PARTITION OF o DEFAULT;
		CREATE TABLE l (k text) PARTITION BY LIST (k);
		CREATE TABLE l_a PARTITION OF l FOR VALUES IN ('a');
		CREATE TABLE plain (id int);`)
	conn := testenv.Connect(t, dsn)
	got, err := partition.List(t.Context(), conn, "o")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"public.o_old [MINVALUE, 2025-12-31T23:00:00Z)",
		"public.o_mid [2025-12-31T23:00:00Z, 2026-06-01T12:30:00.25Z)",
		"public.o_new [2026-06-01T12:30:00.25Z, MAXVALUE)",
		"public.o_def (DEFAULT)",
	}
	if strings.Join(strs(got), "\n") != strings.Join(want, "\n") {
		t.Errorf("List:\n%s\nwant\n%s", strings.Join(strs(got), "\n"), strings.Join(want, "\n"))
	}
	// Safe to compare with a cutoff: neither the open-ended nor the
	// DEFAULT partition is "older" than any time.
	cutoff := utc("2100-01-01T00:00:00Z")
	for _, p := range got {
		if old := p.To.Before(cutoff); old != (p.Name == "o_old" || p.Name == "o_mid") {
			t.Errorf("%s: To.Before(%s) = %v", p, cutoff, old)
		}
	}
	if _, err := partition.List(t.Context(), conn, "l"); err == nil || !strings.Contains(err.Error(), "is not a range") {
		t.Errorf("List of a list-partitioned table: %v", err)
	}
	if ps, err := partition.List(t.Context(), conn, "plain"); err != nil || len(ps) != 0 {
		t.Errorf("List of a plain table: %v, %v", ps, err)
	}
	if _, err := partition.List(t.Context(), conn, "nothing"); !errors.Is(err, partition.ErrNoTable) {
		t.Errorf("List of a missing table: %v", err)
	}
	// An existing partition covering the range is left alone; one that
	// overlaps part of it is Postgres's error, wrapped.
	if created, err := partition.EnsureAhead(t.Context(), conn, "o", "created_at", 24*time.Hour, 1, utc("2026-03-01T00:00:00Z")); err != nil || len(created) != 0 {
		t.Errorf("EnsureAhead inside o_mid created %v, %v", created, err)
	}
	if _, err := partition.EnsureAhead(t.Context(), conn, "o", "created_at", 24*time.Hour, 1, utc("2026-06-01T00:00:00Z")); err == nil || !strings.Contains(err.Error(), "creating partition public.o_p20260601") {
		t.Errorf("EnsureAhead across o_mid's end: %v", err)
	}
}

func strs[T fmt.Stringer](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.String()
	}
	return out
}
