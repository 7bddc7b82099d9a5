package relay_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/setup"
	"github.com/walrelay/walrelay/internal/testenv"
)

// Failover slots (postgres.slot_failover, PostgreSQL 17+): what walrelay
// run does with the slot, and on a standby's synchronized copy of it.

// With the default postgres.slot_failover (auto), run creates a missing
// slot as a failover slot (postgres.create_slot), and switches failover on
// for an existing slot without it (ALTER_REPLICATION_SLOT), saying so.
func TestRunMakesTheSlotAFailoverSlot(t *testing.T) {
	t.Run("creates", func(t *testing.T) {
		f := newFixture(t, func(c *config.Config) { c.Postgres.Slot = "walrelay_new" })
		testenv.SkipBefore17(t, f.dsn)
		f.start(t)
		f.logs.waitLog(t, "created replication slot", map[string]string{"slot": "walrelay_new"}, 30*time.Second)
		if !testenv.SlotFailover(t, f.dsn, "walrelay_new") {
			t.Errorf("slot walrelay_new created by run (create_slot) is not a failover slot")
		}
	})
	t.Run("switches an existing slot on", func(t *testing.T) {
		f := newFixture(t, nil) // setup made slot walrelay without failover
		testenv.SkipBefore17(t, f.dsn)
		if testenv.SlotFailover(t, f.dsn, "walrelay") {
			t.Fatal("the fixture's slot is a failover slot already")
		}
		f.start(t)
		f.logs.waitLog(t, "switched failover on for the replication slot", map[string]string{"slot": "walrelay"}, 30*time.Second)
		if !testenv.SlotFailover(t, f.dsn, "walrelay") {
			t.Errorf("slot walrelay is not a failover slot after run started")
		}
		// And it streams as before.
		insertRow(t, f.dsn, "order", "o-1", `{}`)
		f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)
	})
	t.Run("held by another instance", func(t *testing.T) {
		// Postgres switches failover only on a slot nobody holds: a relay
		// starting as the standby instance says so and waits for the
		// slot as before, instead of blocking in ALTER_REPLICATION_SLOT.
		f := newFixture(t, nil)
		testenv.SkipBefore17(t, f.dsn)
		holder := testenv.HoldSlot(t, f.dsn, "walrelay", "proto_version '1'", "publication_names 'walrelay_outbox'")
		run := f.start(t)
		f.logs.waitLog(t, "could not switch failover on for the replication slot", map[string]string{"slot": "walrelay"}, 30*time.Second)
		f.logs.waitLog(t, "found replication slot", map[string]string{"slot": "walrelay"}, 30*time.Second)
		if run.exited() {
			t.Fatalf("run stopped: %v", run.err)
		}
		_ = holder.Close(t.Context())
		insertRow(t, f.dsn, "order", "o-1", `{}`)
		f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 60*time.Second)
	})
	t.Run("initial snapshot", func(t *testing.T) {
		// The snapshot copies a temporary slot, and a copy never has
		// failover: run switches it on.
		f := newFixture(t, func(c *config.Config) {
			c.Postgres.Slot = "walrelay_snap"
			c.Snapshot.Mode = config.SnapshotInitial
		})
		testenv.SkipBefore17(t, f.dsn)
		insertRow(t, f.dsn, "order", "before", `{}`)
		f.start(t)
		f.logs.waitLog(t, "initial snapshot done", map[string]string{"slot": "walrelay_snap"}, 60*time.Second)
		if !testenv.SlotFailover(t, f.dsn, "walrelay_snap") {
			t.Errorf("slot walrelay_snap created by the initial snapshot is not a failover slot")
		}
		f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)
	})
	t.Run("false leaves it off", func(t *testing.T) {
		f := newFixture(t, func(c *config.Config) { c.Postgres.SlotFailover = config.FailoverFalse })
		testenv.SkipBefore17(t, f.dsn)
		f.start(t)
		insertRow(t, f.dsn, "order", "o-1", `{}`)
		f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)
		if testenv.SlotFailover(t, f.dsn, "walrelay") {
			t.Errorf("postgres.slot_failover=false, and run made slot walrelay a failover slot")
		}
	})
}

// postgres.slot_failover=true on a server older than PostgreSQL 17 stops
// run before it creates anything, with an error naming the option and the
// version; auto there runs without failover and says why once.
func TestRunFailoverTrueRefusedBefore17(t *testing.T) {
	t.Run("true", func(t *testing.T) {
		f := newFixture(t, func(c *config.Config) {
			c.Postgres.Slot = "walrelay_new"
			c.Postgres.SlotFailover = config.FailoverTrue
		})
		if major := testenv.ServerMajor(t, f.dsn); major >= 17 {
			t.Skipf("the server is PostgreSQL %d, which has failover slots; this test needs 14, 15 or 16", major)
		}
		run := f.start(t)
		err := run.wait(30 * time.Second)
		if !errors.Is(err, postgres.ErrFailoverUnsupported) {
			t.Fatalf("Run = %v, want ErrFailoverUnsupported", err)
		}
		for _, want := range []string{"postgres.slot_failover=true", "has no failover slots", "PostgreSQL 17"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Run = %v, want it to say %q", err, want)
			}
		}
		if n := testenv.QueryValue[int64](t, f.dsn, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'walrelay_new'`); n != 0 {
			t.Errorf("run created the slot before refusing")
		}
	})
	t.Run("auto", func(t *testing.T) {
		f := newFixture(t, nil)
		if major := testenv.ServerMajor(t, f.dsn); major >= 17 {
			t.Skipf("the server is PostgreSQL %d, which has failover slots; this test needs 14, 15 or 16", major)
		}
		f.start(t)
		f.logs.waitLog(t, "the replication slot is not a failover slot", map[string]string{"slot": "walrelay"}, 30*time.Second)
		insertRow(t, f.dsn, "order", "o-1", `{}`)
		f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)
	})
}

// Pointed at a standby whose slot is a synchronized copy of the primary's
// failover slot, run waits with one line saying so (and /readyz says the
// same), creates and writes nothing, and once the standby is promoted
// streams from the slot: a row committed on the promoted server reaches
// Kafka.
func TestRunWaitsOnSyncedCopyUntilPromotion(t *testing.T) {
	pair := testenv.StartFailoverPair(t)
	primary := pair.Primary.DSN("postgres")
	names := setup.Names{Schema: "public", Table: "outbox", Publication: "walrelay_outbox", Slot: "walrelay", LeaveSlot: true}
	if _, err := setup.Run(t.Context(), testenv.Connect(t, primary), names); err != nil {
		t.Fatalf("setup: %v", err)
	}
	testenv.Exec(t, primary, `SELECT pg_create_logical_replication_slot('walrelay', 'pgoutput', failover => true)`)
	pair.WaitSynced(t, "walrelay", time.Minute)

	f := newFixture(t, nil) // for its broker, logs and config
	f.cfg.Postgres.DSN = pair.Standby.DSN("postgres")
	run := f.start(t)
	const line = "on this standby is a synchronized copy"
	f.logs.waitLog(t, line, map[string]string{"slot": "walrelay"}, 30*time.Second)
	time.Sleep(3 * time.Second) // three more polls: a line per poll would show
	if n := len(f.logs.lines(line)); n != 1 {
		t.Errorf("%d log lines about the synchronized copy, want exactly 1", n)
	}
	err := run.relay.Ready(t.Context())
	for _, want := range []string{`slot "walrelay"`, "synchronized copy", "usable when this server is promoted", "waiting"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Ready = %v, want it to say %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "another process") {
		t.Errorf("Ready = %v: the slot sync worker is not another walrelay", err)
	}
	if run.exited() {
		t.Fatalf("run stopped on the synchronized copy: %v", run.err)
	}

	ctx := t.Context()
	if err := pair.Standby.Promote(ctx); err != nil {
		t.Fatalf("Promote: %v", err)
	}
	f.logs.waitLog(t, "the server was promoted", map[string]string{"slot": "walrelay"}, 30*time.Second)
	insertRow(t, pair.Standby.DSN("postgres"), "order", "after-promotion", `{}`)
	recs := f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 60*time.Second)
	if got := string(recs[0].Key); got != "after-promotion" {
		t.Errorf("record key %q, want after-promotion", got)
	}
}
