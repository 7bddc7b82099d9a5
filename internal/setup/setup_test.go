package setup_test

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/setup"
	"github.com/walrelay/walrelay/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestRunIsIdempotent(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	conn := testenv.Connect(t, dsn)
	// Identifiers that need quoting must be quoted, not spliced.
	testenv.Exec(t, dsn, `CREATE SCHEMA "Events"`)
	names := setup.Names{Schema: "Events", Table: "Out box", Publication: `pub "x"`, Slot: testenv.UniqueName(t, "slot")}

	first, err := setup.Run(t.Context(), conn, names)
	if err != nil {
		t.Fatalf("first run: %v", err)
	}
	second, err := setup.Run(t.Context(), conn, names)
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	for i, want := range []string{"table", "publication", "records", "slot"} {
		if first[i].Object != want || !first[i].Created {
			t.Errorf("first run step %d = %+v, want %s created", i, first[i], want)
		}
		if !strings.Contains(second[i].String(), "already exists") || second[i].Created {
			t.Errorf("second run step %d = %q, want already exists", i, second[i])
		}
	}
	if got := testenv.QueryValue[bool](t, dsn, `SELECT pubinsert AND NOT pubupdate AND NOT pubdelete FROM pg_publication WHERE pubname = 'pub "x"'`); !got {
		t.Error("publication does not publish INSERTs only")
	}
	if got := testenv.QueryValue[string](t, dsn, `SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = 'pub "x"'`); got != "Events.Out box" {
		t.Errorf("publication holds %q", got)
	}
	if got := testenv.QueryValue[string](t, dsn, `SELECT plugin FROM pg_replication_slots WHERE slot_name = $1`, names.Slot); got != "pgoutput" {
		t.Errorf("slot plugin %q", got)
	}
}

// Slot names are cluster-wide: a slot of another database or plugin is
// an error, never reported as "already exists".
func TestRunRefusesForeignSlot(t *testing.T) {
	pg := testenv.Postgres(t)
	other := pg.NewDatabase(t)
	slot := testenv.UniqueName(t, "slot")
	testenv.Exec(t, other, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot)
	decoding := testenv.UniqueName(t, "td")
	dsn := pg.NewDatabase(t)
	testenv.Exec(t, dsn, `SELECT pg_create_logical_replication_slot($1, 'test_decoding')`, decoding)
	conn := testenv.Connect(t, dsn)

	for _, tc := range []struct{ slot, want string }{
		{slot, "already exists in database"},
		{decoding, `plugin "test_decoding"`},
	} {
		_, err := setup.Run(t.Context(), conn, setup.Names{Schema: "public", Table: "outbox", Publication: "walrelay_outbox", Slot: tc.slot})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("slot %s: Run = %v, want an error containing %q", tc.slot, err, tc.want)
		}
	}
}

// With Partitions, setup creates the partitioned outbox, the partition
// holding now and Ahead more, and a publication through the partition
// root; again it creates nothing, and a day later only the next partition.
func TestRunPartitionedIsIdempotent(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	conn := testenv.Connect(t, dsn)
	now := time.Date(2026, 11, 25, 13, 0, 0, 0, time.UTC)
	names := setup.Names{Schema: "public", Table: "outbox", Publication: "walrelay_outbox", Slot: testenv.UniqueName(t, "slot"),
		Partitions: &setup.Partitions{Column: "created_at", Interval: 24 * time.Hour, Ahead: 3, Now: now}}

	first, err := setup.Run(t.Context(), conn, names)
	if err != nil {
		t.Fatalf("first run: %v", err)
	}
	second, err := setup.Run(t.Context(), conn, names)
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	for i, want := range []string{"table", "partitions", "publication", "records", "slot"} {
		if first[i].Object != want || !first[i].Created {
			t.Errorf("first run step %d = %+v, want %s created", i, first[i], want)
		}
		if second[i].Object != want || second[i].Created {
			t.Errorf("second run step %d = %q, want %s already exists", i, second[i], want)
		}
	}
	if got := first[1].Name; got != "outbox_p20261125..outbox_p20261128" {
		t.Errorf("partitions step names %q", got)
	}
	if got := testenv.QueryValue[string](t, dsn, `SELECT string_agg(c.relname, ' ' ORDER BY c.relname) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'public.outbox'::regclass`); got != "outbox_p20261125 outbox_p20261126 outbox_p20261127 outbox_p20261128" {
		t.Errorf("partitions: %s", got)
	}
	if got := testenv.QueryValue[string](t, dsn, `SELECT relkind::text FROM pg_class WHERE oid = 'public.outbox'::regclass`); got != "p" {
		t.Errorf("outbox relkind %q, want p", got)
	}
	if got := testenv.QueryValue[bool](t, dsn, `SELECT pubviaroot AND pubinsert AND NOT pubupdate AND NOT pubdelete FROM pg_publication WHERE pubname = 'walrelay_outbox'`); !got {
		t.Error("publication does not publish INSERTs only through the partition root")
	}
	if got := testenv.QueryValue[string](t, dsn, `SELECT string_agg(schemaname || '.' || tablename, ' ') FROM pg_publication_tables WHERE pubname = 'walrelay_outbox'`); got != "public.outbox" {
		t.Errorf("publication lists %q, want the root alone", got)
	}

	names.Partitions.Now = now.Add(24 * time.Hour)
	third, err := setup.Run(t.Context(), conn, names)
	if err != nil || !third[1].Created || third[1].Name != "outbox_p20261126..outbox_p20261129" {
		t.Errorf("a day later: %v, %v; want outbox_p20261129 created", third, err)
	}
}

// outbox.partitioned does not convert a plain table, and says so.
func TestRunPartitionedRefusesPlainTable(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	conn := testenv.Connect(t, dsn)
	names := setup.Names{Schema: "public", Table: "outbox", Publication: "walrelay_outbox", Slot: testenv.UniqueName(t, "slot")}
	if _, err := setup.Run(t.Context(), conn, names); err != nil {
		t.Fatal(err)
	}
	names.Partitions = &setup.Partitions{Column: "created_at", Interval: time.Hour, Ahead: 3}
	steps, err := setup.Run(t.Context(), conn, names)
	if err == nil || !strings.Contains(err.Error(), "already exists as a plain table") || len(steps) != 1 {
		t.Errorf("setup with partitions over a plain table: %v, %v", steps, err)
	}
}

// LeaveSlot (snapshot.mode=initial) creates the table and publication but
// leaves a missing slot to walrelay run, and says so.
func TestRunLeavesSlotForTheInitialSnapshot(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	conn := testenv.Connect(t, dsn)
	names := setup.Names{Schema: "public", Table: "outbox", Publication: "pub", Slot: testenv.UniqueName(t, "slot"), LeaveSlot: true}
	steps, err := setup.Run(t.Context(), conn, names)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 4 || steps[3].Object != "slot" || steps[3].Created || !strings.Contains(steps[3].String(), "walrelay run creates it after the initial snapshot") {
		t.Fatalf("steps %q, want the slot left to walrelay run", steps)
	}
	if n := testenv.QueryValue[int64](t, dsn, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, names.Slot); n != 0 {
		t.Fatal("the slot was created")
	}
}
