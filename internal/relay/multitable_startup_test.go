package relay_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/slotrecord"
	"github.com/walrelay/walrelay/internal/testenv"
)

// A table postgres.table lists that no publication publishes refuses the
// start: the relay would never stream its rows, while retention would
// prune them. The error names the table and the statement that fixes it.
func TestTwoTablesStartRefusesUnpublishedTable(t *testing.T) {
	f := newFixtureTables(t, nil)
	testenv.Exec(t, f.dsn, `ALTER PUBLICATION walrelay_outbox DROP TABLE billing.outbox`)
	err := f.start(t).wait(30 * time.Second)
	for _, want := range []string{"postgres.table (public.outbox, billing.outbox) lists billing.outbox", `ALTER PUBLICATION "walrelay_outbox" ADD TABLE "billing"."outbox";`} {
		if !errors.Is(err, relay.ErrTableNotPublished) || !strings.Contains(err.Error(), want) {
			t.Fatalf("Run = %v, want ErrTableNotPublished saying %q", err, want)
		}
	}
}

// A published table postgres.table does not list is relayed as before
// the list existed, with a warning naming it and the list: retention,
// partition upkeep and verify leave it alone.
func TestPublishedUnlistedTableWarnedAndRelayed(t *testing.T) {
	f := newFixture(t, nil) // postgres.table lists public.outbox only
	execTx(t, f.dsn,
		`CREATE SCHEMA billing`,
		`CREATE TABLE billing.outbox (LIKE public.outbox INCLUDING ALL)`,
		`ALTER PUBLICATION walrelay_outbox ADD TABLE billing.outbox`)
	run := f.start(t)
	f.logs.waitLog(t, "the publications publish tables postgres.table does not list",
		map[string]string{"tables": tableB, "postgres.table": tableA, "level": "WARN"}, 30*time.Second)
	id, _ := insertRowInto(t, f.dsn, tableB, "order", "k1", `{"n": 1}`)
	recs := f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)
	if got := testenv.Header(recs[0], "id"); got != id {
		t.Errorf("record of row %s, want %s (billing.outbox's)", got, id)
	}
	if err := run.stop(); err != nil {
		t.Fatalf("relay: %v", err)
	}
}

// The slot's record lives in the first listed table's schema. With the
// list reordered (billing.outbox first) the record is in public while
// walrelay would read billing: the relay refuses to start, whether the
// slot exists (it would baseline a new record, losing the recorded proof)
// or is missing (it would create the slot again, skipping the rows after
// the record), and writes no record in billing.
func TestTwoTablesMisplacedRecordRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, f *fixture)
	}{
		{"slot exists", nil},
		{"slot missing", func(t *testing.T, f *fixture) {
			testenv.Exec(t, f.dsn, `SELECT pg_drop_replication_slot('walrelay')`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixtureTables(t, nil)
			run := f.start(t) // records the slot in public.walrelay_slot_positions
			insertRowInto(t, f.dsn, tableB, "order", "k1", `{}`)
			f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)
			f.waitCaughtUp(t, 30*time.Second)
			if err := run.stop(); err != nil {
				t.Fatal(err)
			}
			if n := testenv.QueryValue[int64](t, f.dsn, `SELECT count(*) FROM public.walrelay_slot_positions WHERE slot_name = 'walrelay'`); n != 1 {
				t.Fatalf("%d records of the slot in public, want 1", n)
			}
			if tc.prepare != nil {
				tc.prepare(t, f)
			}
			f.cfg.Postgres.Table = config.StringList{tableB, tableA}
			err := f.start(t).wait(30 * time.Second)
			var mis *slotrecord.MisplacedError
			if !errors.As(err, &mis) || mis.Found != "public" || mis.Want != "billing" {
				t.Fatalf("Run = %v, want a MisplacedError (found in public, wanted in billing)", err)
			}
			if testenv.QueryValue[bool](t, f.dsn, `SELECT to_regclass('billing.walrelay_slot_positions') IS NOT NULL`) {
				t.Error("the refused start created billing.walrelay_slot_positions")
			}
			if n := testenv.QueryValue[int64](t, f.dsn, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'walrelay'`); tc.prepare != nil && n != 0 {
				t.Error("the refused start created the missing slot")
			}
			// walrelay slot heal refuses it the same way, not with "no record".
			heal := f.cfg
			heal.Outbox.OnSlotLoss = config.SlotLossHeal
			r, err := relay.New(heal, f.logs.logger(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Heal(t.Context()); !errors.As(err, &mis) {
				t.Errorf("Heal = %v, want a MisplacedError", err)
			}
		})
	}
}
