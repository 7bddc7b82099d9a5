package setup_test

import (
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/pkg/setup"
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
	for i, want := range []string{"table", "publication", "slot"} {
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
