package slotrecord_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/slotrecord"
	"github.com/walrelay/walrelay/internal/testenv"
)

// A record in the schema of a table listed after the first (the list was
// reordered) must be refused, not read as missing: a missing record lets
// setup and run start the slot afresh without the proof the record holds.
func TestLocate(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	conn := testenv.Connect(t, dsn)
	ctx := t.Context()
	testenv.Exec(t, dsn, `CREATE SCHEMA billing`)
	// Nothing recorded anywhere, and no record tables at all: fine.
	if err := slotrecord.Locate(ctx, conn, "public", []string{"public", "billing"}, "s"); err != nil {
		t.Fatalf("no record tables: %v", err)
	}
	record(t, conn, "billing", "s")
	err := slotrecord.Locate(ctx, conn, "public", []string{"public", "billing"}, "s")
	var m *slotrecord.MisplacedError
	if !errors.As(err, &m) || m.Found != "billing" || m.Want != "public" {
		t.Fatalf("record in billing, public listed first: got %v, want a MisplacedError naming billing", err)
	}
	t.Log(err)
	// Another slot's record there says nothing about s.
	if err := slotrecord.Locate(ctx, conn, "public", []string{"public", "billing"}, "other"); err != nil {
		t.Errorf("another slot's record: %v", err)
	}
	// Listed first, billing holds it where walrelay looks.
	if err := slotrecord.Locate(ctx, conn, "billing", []string{"billing", "public"}, "s"); err != nil {
		t.Errorf("record in the first table's schema: %v", err)
	}
	// Once public holds a record too (walrelay ran with public first), public's counts.
	record(t, conn, "public", "s")
	if err := slotrecord.Locate(ctx, conn, "public", []string{"public", "billing"}, "s"); err != nil {
		t.Errorf("record in both schemas, the first's found: %v", err)
	}
}

// record writes a record row of slot in schema's record table,
// creating the table first (Ensure) if needed.
func record(t *testing.T, conn *pgx.Conn, schema, slot string) {
	t.Helper()
	if _, err := (slotrecord.Table{Schema: schema}).Ensure(t.Context(), conn); err != nil {
		t.Fatal(err)
	}
	_, err := conn.Exec(t.Context(), `INSERT INTO `+pgx.Identifier{schema, slotrecord.TableName}.Sanitize()+`
		(slot_name, system_identifier, confirmed_lsn) VALUES ($1, (SELECT system_identifier::text FROM pg_control_system()), '0/1')`, slot)
	if err != nil {
		t.Fatal(err)
	}
}
