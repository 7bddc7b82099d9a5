package reconcile_test

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/reconcile"
	"github.com/walrelay/walrelay/internal/testenv"
)

// The tables of a two-table fixture: two schemas, so the slot record's
// place (the first table's schema) is exercised too.
const (
	tableA = "public.outbox"
	tableB = "billing.outbox"
)

// newFixtureTables is newFixture with a second outbox table,
// billing.outbox, in the publication and listed second in postgres.table.
// Its columns are public.outbox's after one of its own (tenant), so that
// a row of it routed by public.outbox's plan (bound by column position)
// would not give the relay's record.
func newFixtureTables(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	for _, sql := range []string{
		`CREATE SCHEMA billing`,
		`CREATE TABLE billing.outbox (tenant text NOT NULL DEFAULT 'acme', LIKE public.outbox INCLUDING ALL)`,
		`ALTER PUBLICATION walrelay_outbox ADD TABLE billing.outbox`,
	} {
		testenv.Exec(t, f.dsn, sql)
	}
	f.cfg.Postgres.Table = config.StringList{tableA, tableB}
	return f
}

// insertInto commits n rows of aggregate type typ into table (as SQL
// names it) in one transaction, with created_at = at (now when zero), and
// returns their ids.
func (f *fixture) insertInto(t *testing.T, table, typ string, n int, at time.Time) []string {
	t.Helper()
	conn := testenv.Connect(t, f.dsn)
	rows, err := conn.Query(t.Context(), `INSERT INTO `+table+` (aggregatetype, aggregateid, type, payload, created_at)
		SELECT $1, 'agg-' || (i % 17), 'Happened', jsonb_build_object('i', i, 'table', $2::text), coalesce($4, now())
		FROM generate_series(1, $3::int) i RETURNING id::text`, typ, table, n, nullTime(at))
	if err != nil {
		t.Fatalf("inserting into %s: %v", table, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("inserting into %s: %v", table, err)
	}
	return ids
}

// deleteRecords deletes the records of topic's partition p before offset
// upTo.
func (f *fixture) deleteRecords(t *testing.T, topic string, p int32, upTo int64) {
	t.Helper()
	cut := kadm.Offsets{}
	cut.Add(kadm.Offset{Topic: topic, Partition: p, At: upTo})
	resp, err := kadm.NewClient(f.broker.Client(t)).DeleteRecords(t.Context(), cut)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("deleting records of %s[%d] before %d: %v", topic, p, upTo, err)
	}
}

// TestVerifyTwoTablesMissingInSecond: with two tables listed, verify reads
// both in its window; records of the second table's rows deleted from
// their topic are missing, and --republish sends each again through the
// second table's own plan: the same key, value and headers as the relay's
// record.
func TestVerifyTwoTablesMissingInSecond(t *testing.T) {
	f := newFixtureTables(t)
	const invoices = "outbox.event.invoice"
	a := f.insert(t, 20, time.Time{})
	b := f.insertInto(t, tableB, "invoice", 30, time.Time{})
	f.startRelay(t)
	all := append(slices.Clone(topics), invoices)
	recs := f.broker.ReadAll(t, all, len(a)+len(b), 60*time.Second)
	testenv.WaitCaughtUp(t, f.dsn, f.cfg.Postgres.Slot, 30*time.Second)

	rep := f.verify(t, false)
	wantTables := []string{`"public"."outbox"`, `"billing"."outbox"`}
	if !slices.Equal(rep.Tables, wantTables) || rep.Table != `"public"."outbox", "billing"."outbox"` {
		t.Errorf("tables %q table %q, want %q joined with \", \"", rep.Tables, rep.Table, wantTables)
	}
	if rep.Rows != int64(len(a)+len(b)) || rep.Records != int64(len(a)+len(b)) || len(rep.Missing)+len(rep.Unknown)+len(rep.Duplicates)+len(rep.Unroutable) != 0 {
		t.Fatalf("healthy run: rows %d records %d missing %v unknown %v duplicates %v unroutable %v; want %d rows and records, nothing else",
			rep.Rows, rep.Records, rep.Missing, rep.Unknown, rep.Duplicates, rep.Unroutable, len(a)+len(b))
	}
	if want := sorted(all); !slices.Equal(rep.Topics, want) {
		t.Errorf("topics %v, want %v", rep.Topics, want)
	}

	original := map[string]*kgo.Record{}
	var removed []string
	for _, r := range recs {
		if r.Topic == invoices && r.Partition == 1 && r.Offset < 4 {
			id := testenv.Header(r, "id")
			removed = append(removed, id)
			original[id] = r
		}
	}
	if len(removed) != 4 {
		t.Fatalf("%d records of %s[1] before offset 4, want 4 (partition too small?)", len(removed), invoices)
	}
	f.deleteRecords(t, invoices, 1, 4)
	rep = f.verify(t, true)
	if !slices.Equal(rep.Missing, sorted(removed)) || len(rep.Unknown)+len(rep.Duplicates) != 0 {
		t.Fatalf("after deleting 4 records of %s: missing %v unknown %v duplicates %v; want missing exactly %v", tableB, rep.Missing, rep.Unknown, rep.Duplicates, sorted(removed))
	}
	if r := rep.Republished; r == nil || r.Sent != len(removed) || r.Acknowledged != len(removed) || len(r.Failed) != 0 {
		t.Fatalf("republished %+v, want %d sent and acknowledged", rep.Republished, len(removed))
	}
	got := 0
	for _, r := range f.broker.ReadAll(t, []string{invoices}, len(b), 30*time.Second) {
		if testenv.Header(r, reconcile.HeaderRepublished) != "true" {
			continue
		}
		got++
		id := testenv.Header(r, "id")
		o := original[id]
		if o == nil {
			t.Errorf("republished %s, which was not removed", id)
			continue
		}
		if !bytes.Equal(r.Key, o.Key) || !bytes.Equal(r.Value, o.Value) || !slices.EqualFunc(r.Headers[:len(r.Headers)-1], o.Headers, sameHeader) {
			t.Errorf("republished %s: key %q value %s headers %v; the relay's record had key %q value %s headers %v",
				id, r.Key, r.Value, r.Headers, o.Key, o.Value, o.Headers)
		}
	}
	if got != len(removed) {
		t.Errorf("%d records republished on %s, want %d", got, invoices, len(removed))
	}
	if rep = f.verify(t, false); len(rep.Missing)+len(rep.Unknown)+len(rep.Duplicates) != 0 {
		t.Errorf("after republishing: missing %v unknown %v duplicates %v, want none", rep.Missing, rep.Unknown, rep.Duplicates)
	}
}

// TestVerifyTwoTablesUnknown: a record in the window whose row is outside
// it is unknown only when its id is in neither table.
func TestVerifyTwoTablesUnknown(t *testing.T) {
	f := newFixtureTables(t)
	old := f.insertInto(t, tableB, "order", 3, time.Now().Add(-3*time.Hour)) // rows outside the window, records inside
	a := f.insert(t, 10, time.Time{})
	f.relayAll(t, len(old)+len(a))
	const stranger = "6f1c1b4e-0000-4000-8000-000000000003"
	rec := &kgo.Record{Topic: topics[0], Key: []byte("x"), Value: []byte(`{}`), Headers: []kgo.RecordHeader{{Key: "id", Value: []byte(stranger)}}, Timestamp: time.Now()}
	if err := f.broker.Client(t).ProduceSync(t.Context(), rec).FirstErr(); err != nil {
		t.Fatalf("producing: %v", err)
	}
	rep := f.verify(t, false)
	if !slices.Equal(rep.Unknown, []string{stranger}) || len(rep.Missing)+len(rep.Duplicates) != 0 || rep.Rows != int64(len(a)) {
		t.Fatalf("rows %d unknown %v missing %v duplicates %v; want %d rows, unknown [%s] alone (%s's old rows %v are in %s)",
			rep.Rows, rep.Unknown, rep.Missing, rep.Duplicates, len(a), stranger, tableB, old, tableB)
	}
}

// TestVerifyTwoTablesDeadLetteredInSecond: a row of the second table the
// router refuses, which the relay dead-letters, is dead-lettered with its
// class: not missing, not unroutable.
func TestVerifyTwoTablesDeadLetteredInSecond(t *testing.T) {
	f := newFixtureTables(t)
	a, bad := f.deadLetterOne(t, tableB)

	rep := f.verify(t, false)
	want := []reconcile.DeadLettered{{ID: bad, Class: "routing_value_missing"}}
	if !slices.Equal(rep.DeadLettered, want) || len(rep.Unroutable)+len(rep.Missing) != 0 || rep.Rows != int64(len(a)+1) {
		t.Errorf("rows %d dead_lettered %+v unroutable %v missing %v, want %d rows and %+v alone", rep.Rows, rep.DeadLettered, rep.Unroutable, rep.Missing, len(a)+1, want)
	}
}

// TestVerifyTwoTablesSameID: one event id in both tables (two modules
// reusing ids). Records are matched by id alone, each row taking one:
// with the relay's two records both rows are seen, nothing else; with one
// of them deleted the records are fewer than the rows and which row lost
// its record cannot be told, so both rows are missing and --republish
// sends each through its own table's plan (a duplicate of the row whose
// record was there, never a loss); with no record at all, both are
// missing again.
func TestVerifyTwoTablesSameID(t *testing.T) {
	f := newFixtureTables(t)
	const id = "6f1c1b4e-0000-4000-8000-000000000004"
	for _, table := range []string{tableA, tableB} {
		testenv.Exec(t, f.dsn, `INSERT INTO `+table+` (id, aggregatetype, aggregateid, type, payload)
			VALUES ($1, 'order', 'agg-shared', 'Happened', jsonb_build_object('table', $2::text))`, id, table)
	}
	recs := f.relayAll(t, 2)
	if recs[0].Partition != recs[1].Partition || recs[0].Offset != 0 || recs[1].Offset != 1 {
		t.Fatalf("records at %d/%d and %d/%d, want offsets 0 and 1 of one partition", recs[0].Partition, recs[0].Offset, recs[1].Partition, recs[1].Offset)
	}
	p := recs[0].Partition

	rep := f.verify(t, false)
	if rep.Rows != 2 || rep.Records != 2 || len(rep.Duplicates)+len(rep.Missing)+len(rep.Unknown) != 0 {
		t.Errorf("two records: rows %d records %d duplicates %v missing %v unknown %v; want 2 rows, 2 records, nothing else", rep.Rows, rep.Records, rep.Duplicates, rep.Missing, rep.Unknown)
	}

	f.deleteRecords(t, topics[0], p, 1) // one row's record (which one, verify cannot tell)
	rep = f.verify(t, true)
	if rep.Records != 1 || !slices.Equal(rep.Missing, []string{id, id}) || len(rep.Duplicates)+len(rep.Unknown) != 0 {
		t.Fatalf("one record left: records %d missing %v duplicates %v unknown %v; want 1 record, missing [%s %s] (every row of the id)", rep.Records, rep.Missing, rep.Duplicates, rep.Unknown, id, id)
	}
	if r := rep.Republished; r == nil || r.Sent != 2 || r.Acknowledged != 2 || len(r.Failed) != 0 {
		t.Fatalf("republished %+v, want 2 sent and acknowledged", rep.Republished)
	}
	var values []string
	for _, r := range f.broker.ReadAll(t, topics[:1], 3, 30*time.Second) {
		if testenv.Header(r, reconcile.HeaderRepublished) == "true" {
			values = append(values, string(r.Value))
		}
	}
	slices.Sort(values)
	if want := []string{`{"table": "billing.outbox"}`, `{"table": "public.outbox"}`}; !slices.Equal(values, want) {
		t.Errorf("republished values %q, want %q", values, want)
	}
	rep = f.verify(t, false)
	if rep.Records != 3 || !slices.Equal(rep.Duplicates, []string{id}) || len(rep.Missing)+len(rep.Unknown) != 0 {
		t.Errorf("after republishing: records %d duplicates %v missing %v unknown %v; want 3 records, duplicates [%s], nothing missing", rep.Records, rep.Duplicates, rep.Missing, rep.Unknown, id)
	}

	f.deleteRecords(t, topics[0], p, 4)
	rep = f.verify(t, false)
	if !slices.Equal(rep.Missing, []string{id, id}) || len(rep.Duplicates)+len(rep.Unknown) != 0 {
		t.Errorf("no record left: missing %v duplicates %v unknown %v; want missing [%s %s] (one per row)", rep.Missing, rep.Duplicates, rep.Unknown, id, id)
	}
}

func sameHeader(a, b kgo.RecordHeader) bool { return a.Key == b.Key && bytes.Equal(a.Value, b.Value) }

// TestVerifyTwoTablesSameIDUnconfirmed: an id shared by a row whose
// transaction the slot confirmed and one it cannot have confirmed yet
// (committed while an older transaction is open), with one record left:
// the record may be the confirmed row's, so nothing is missing and the
// unconfirmed row is unconfirmed; once the old transaction ends, both
// rows are confirmed, fewer records than rows, and both are missing.
func TestVerifyTwoTablesSameIDUnconfirmed(t *testing.T) {
	f := newFixtureTables(t)
	const id = "6f1c1b4e-0000-4000-8000-000000000005"
	insert := func(table string) {
		testenv.Exec(t, f.dsn, `INSERT INTO `+table+` (id, aggregatetype, aggregateid, type, payload)
			VALUES ($1, 'order', 'agg-shared', 'Happened', jsonb_build_object('table', $2::text))`, id, table)
	}
	insert(tableA)
	open, err := testenv.Connect(t, f.dsn).Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = open.Rollback(t.Context()) }()
	if _, err := open.Exec(t.Context(), `SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	insert(tableB)
	recs := f.relayAll(t, 2)
	if recs[0].Partition != recs[1].Partition || recs[0].Offset != 0 || recs[1].Offset != 1 {
		t.Fatalf("records at %d/%d and %d/%d, want offsets 0 and 1 of one partition", recs[0].Partition, recs[0].Offset, recs[1].Partition, recs[1].Offset)
	}
	f.deleteRecords(t, topics[0], recs[0].Partition, 1)

	rep := f.verify(t, true)
	if !rep.FenceConfirmed || rep.Records != 1 || !slices.Equal(rep.Unconfirmed, []string{id}) || len(rep.Missing)+len(rep.Duplicates) != 0 || rep.Republished != nil && rep.Republished.Sent != 0 {
		t.Fatalf("one record, one row unconfirmed: fence confirmed %t records %d unconfirmed %v missing %v duplicates %v republished %+v; want 1 record, unconfirmed [%s], nothing missing or republished",
			rep.FenceConfirmed, rep.Records, rep.Unconfirmed, rep.Missing, rep.Duplicates, rep.Republished, id)
	}

	if err := open.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	rep = f.verify(t, false)
	if !rep.FenceConfirmed || !slices.Equal(rep.Missing, []string{id, id}) || len(rep.Unconfirmed)+len(rep.Duplicates) != 0 {
		t.Fatalf("after the transaction ended: fence confirmed %t missing %v unconfirmed %v duplicates %v; want missing [%s %s]",
			rep.FenceConfirmed, rep.Missing, rep.Unconfirmed, rep.Duplicates, id, id)
	}
}
