package setup_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/setup"
	"github.com/walrelay/walrelay/internal/slotrecord"
	"github.com/walrelay/walrelay/internal/testenv"
)

// The two outbox tables of these tests: two schemas, so that the record's
// place (the first table's schema) is exercised.
var (
	public  = config.TableName{Schema: "public", Name: "outbox"}
	billing = config.TableName{Schema: "billing", Name: "outbox"}
)

// stepLines is steps as setup prints them, one string each.
func stepLines(steps []setup.Step) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = strings.Join(strings.Fields(s.String()), " ")
	}
	return out
}

// published is the publication's tables, sorted, space-separated.
func published(t *testing.T, dsn, pub string) string {
	t.Helper()
	return testenv.QueryValue[string](t, dsn, `SELECT coalesce(string_agg(schemaname || '.' || tablename, ' ' ORDER BY schemaname, tablename), '') FROM pg_publication_tables WHERE pubname = $1`, pub)
}

// Two tables in two schemas: setup creates both, one publication holding
// both and the records in the first table's schema; a second run creates
// nothing.
func TestRunTwoTablesIsIdempotent(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	conn := testenv.Connect(t, dsn)
	testenv.Exec(t, dsn, `CREATE SCHEMA billing`)
	names := setup.Names{Tables: []config.TableName{public, billing}, Publication: "walrelay_outbox", Slot: testenv.UniqueName(t, "slot")}

	first, err := setup.Run(t.Context(), conn, names)
	if err != nil {
		t.Fatalf("first run: %v", err)
	}
	want := []string{
		"table public.outbox created",
		"table billing.outbox created",
		"publication walrelay_outbox created",
		"records public.walrelay_slot_positions created",
		"slot " + names.Slot + " created",
	}
	if got := stepLines(first); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("first run:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	second, err := setup.Run(t.Context(), conn, names)
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	for i, s := range second {
		if s.Created || !strings.HasSuffix(s.String(), "already exists") {
			t.Errorf("second run step %d = %q, want already exists", i, s)
		}
	}
	if len(second) != len(want) {
		t.Errorf("second run: %d steps, want %d: %q", len(second), len(want), stepLines(second))
	}
	if got := published(t, dsn, "walrelay_outbox"); got != "billing.outbox public.outbox" {
		t.Errorf("publication holds %q, want both tables", got)
	}
	if got := testenv.QueryValue[bool](t, dsn, `SELECT pubinsert AND NOT pubupdate AND NOT pubdelete FROM pg_publication WHERE pubname = 'walrelay_outbox'`); !got {
		t.Error("publication does not publish INSERTs only")
	}
	if got := testenv.QueryValue[bool](t, dsn, `SELECT to_regclass('billing.walrelay_slot_positions') IS NULL`); !got {
		t.Error("setup created a record table in billing, the second table's schema")
	}
}

// A table listed later is added to the existing publication, one step per
// table, with a warning when it holds rows already (the stream will not
// carry them); a partitioned one first switches the publication to publish
// through the partition root. Run again, setup changes nothing.
func TestRunAddsTablesToPublication(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	conn := testenv.Connect(t, dsn)
	testenv.Exec(t, dsn, `CREATE SCHEMA billing`)
	testenv.Exec(t, dsn, `CREATE SCHEMA shipping`)
	names := setup.Names{Tables: []config.TableName{public}, Publication: "walrelay_outbox", Slot: testenv.UniqueName(t, "slot")}
	if _, err := setup.Run(t.Context(), conn, names); err != nil {
		t.Fatalf("setup with public.outbox: %v", err)
	}
	// A partitioned outbox made by hand (setup's outbox.partitioned would
	// refuse the plain public.outbox).
	testenv.Exec(t, dsn, `CREATE TABLE shipping.outbox (LIKE public.outbox) PARTITION BY RANGE (created_at)`)
	shipping := config.TableName{Schema: "shipping", Name: "outbox"}
	// billing.outbox already holds a row: the stream will not carry it.
	testenv.Exec(t, dsn, `CREATE TABLE billing.outbox (LIKE public.outbox INCLUDING ALL)`)
	testenv.Exec(t, dsn, `INSERT INTO billing.outbox (aggregatetype, aggregateid, type, payload, created_at) VALUES ('a', 'k', 'T', '{}', '2026-01-02T03:04:05.5Z')`)

	names.Tables = []config.TableName{public, billing, shipping}
	names.TimeColumn = "created_at"
	steps, err := setup.Run(t.Context(), conn, names)
	if err != nil {
		t.Fatalf("setup adding billing.outbox and shipping.outbox: %v", err)
	}
	got := strings.Join(stepLines(steps), "\n")
	for _, line := range []string{
		"table billing.outbox already exists",
		"table shipping.outbox already exists",
		"publication walrelay_outbox publish_via_partition_root switched on",
		"publication walrelay_outbox billing.outbox added",
		"warning billing.outbox holds 1 row committed before it was added (created_at 2026-01-02T03:04:05.5Z to 2026-01-02T03:04:05.5Z): not streamed; publish them with walrelay verify --republish --since 2026-01-02T03:04:05Z --until 2026-01-02T03:04:06Z, or walrelay snapshot --table billing.outbox",
		"publication walrelay_outbox shipping.outbox added",
		"slot " + names.Slot + " already exists",
	} {
		if !strings.Contains(got, line+"\n") && !strings.HasSuffix(got, line) {
			t.Errorf("steps lack %q:\n%s", line, got)
		}
	}
	if strings.Contains(got, "warning PostgreSQL") || strings.Contains(got, "warning shipping.outbox") {
		t.Errorf("a warning on a server with the decoding fix, or of an empty table:\n%s", got)
	}
	if got := published(t, dsn, "walrelay_outbox"); got != "billing.outbox public.outbox shipping.outbox" {
		t.Errorf("publication holds %q, want the three tables (the partitioned one by its root)", got)
	}
	if !testenv.QueryValue[bool](t, dsn, `SELECT pubviaroot FROM pg_publication WHERE pubname = 'walrelay_outbox'`) {
		t.Error("publication does not publish through the partition root")
	}

	again, err := setup.Run(t.Context(), conn, names)
	if err != nil {
		t.Fatalf("setup again: %v", err)
	}
	for _, s := range again {
		if s.Object == "publication" && (s.Created || s.Note != "") {
			t.Errorf("setup again: %q, want the publication as it is", s)
		}
	}
}

// A record of the slot in the schema of a table listed after the first
// (the list was reordered) is refused before anything is created: read
// as missing, it would let setup create the slot afresh.
func TestRunRefusesMisplacedRecord(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	conn := testenv.Connect(t, dsn)
	testenv.Exec(t, dsn, `CREATE SCHEMA billing`)
	slot := testenv.UniqueName(t, "slot")
	// walrelay ran with billing.outbox listed first: its record is there.
	if _, err := setup.Run(t.Context(), conn, setup.Names{Tables: []config.TableName{billing}, Publication: "walrelay_outbox", Slot: slot}); err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, dsn, `SELECT pg_drop_replication_slot($1)`, slot)

	steps, err := setup.Run(t.Context(), conn, setup.Names{Tables: []config.TableName{public, billing}, Publication: "walrelay_outbox", Slot: slot})
	var m *slotrecord.MisplacedError
	if !errors.As(err, &m) || m.Found != "billing" || m.Want != "public" {
		t.Fatalf("setup with public.outbox listed first: steps %q, err %v; want a MisplacedError naming billing", stepLines(steps), err)
	}
	t.Log(err)
	if len(steps) != 0 || testenv.QueryValue[bool](t, dsn, `SELECT to_regclass('public.outbox') IS NOT NULL OR to_regclass('public.walrelay_slot_positions') IS NOT NULL`) {
		t.Errorf("setup created something before refusing: %q", stepLines(steps))
	}
	if n := testenv.QueryValue[int64](t, dsn, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, slot); n != 0 {
		t.Error("setup created the slot")
	}
}

// A listed table the publication already publishes through its schema
// (FOR TABLES IN SCHEMA, PostgreSQL 15+) is not added again.
func TestRunTableInPublishedSchema(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	if v := testenv.QueryValue[int](t, dsn, `SELECT current_setting('server_version_num')::int`); v < 150000 {
		t.Skipf("server_version_num %d: FOR TABLES IN SCHEMA needs PostgreSQL 15", v)
	}
	conn := testenv.Connect(t, dsn)
	testenv.Exec(t, dsn, `CREATE SCHEMA billing`)
	slot := testenv.UniqueName(t, "slot")
	if _, err := setup.Run(t.Context(), conn, setup.Names{Tables: []config.TableName{public}, Publication: "walrelay_outbox", Slot: slot}); err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, dsn, `ALTER PUBLICATION walrelay_outbox ADD TABLES IN SCHEMA billing`)
	steps, err := setup.Run(t.Context(), conn, setup.Names{Tables: []config.TableName{public, billing}, Publication: "walrelay_outbox", Slot: slot})
	if err != nil {
		t.Fatalf("setup: %v (steps %q)", err, stepLines(steps))
	}
	for _, s := range steps {
		if s.Object == "publication" && (s.Created || s.Note != "") {
			t.Errorf("step %q: billing.outbox is published through its schema already", s)
		}
	}
	if got := published(t, dsn, "walrelay_outbox"); got != "billing.outbox public.outbox" {
		t.Errorf("publication holds %q", got)
	}
}
