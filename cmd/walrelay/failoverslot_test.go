package main

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/operator"
	"github.com/walrelay/walrelay/internal/testenv"
)

// Failover slots (postgres.slot_failover, PostgreSQL 17+) in setup, slot
// create, slot inspect and check.

// With the default postgres.slot_failover (auto), setup and slot create
// make failover slots (slot create says so), slot inspect shows it, and
// setup switches an existing slot without failover on, saying so.
func TestSetupAndSlotCreateMakeFailoverSlots(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	testenv.SkipBefore17(t, dsn)
	slot := testenv.UniqueName(t, "fs")
	env := childEnv("WALRELAY_POSTGRES_DSN="+dsn, "WALRELAY_POSTGRES_SLOT="+slot)

	wantOK(t, env, "setup")
	if !testenv.SlotFailover(t, dsn, slot) {
		t.Errorf("setup created slot %s without failover", slot)
	}
	if out := wantOK(t, env, "slot", "inspect", slot); !regexp1(out, `(?m)^failover\s+yes$`) || !regexp1(out, `(?m)^synced\s+no$`) {
		t.Errorf("slot inspect does not show failover yes:\n%s", out)
	}

	other := slot + "_b"
	out := wantOK(t, env, "slot", "create", other)
	if !strings.Contains(out, ", a failover slot") {
		t.Errorf("slot create output lacks \", a failover slot\":\n%s", out)
	}
	if !testenv.SlotFailover(t, dsn, other) {
		t.Errorf("slot create made %s without failover", other)
	}

	// An existing slot without failover: setup switches it on.
	plain := slot + "_c"
	testenv.Exec(t, dsn, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, plain)
	out = wantOK(t, childEnv("WALRELAY_POSTGRES_DSN="+dsn, "WALRELAY_POSTGRES_SLOT="+plain), "setup")
	if !strings.Contains(out, "failover switched on") {
		t.Errorf("setup output lacks \"failover switched on\":\n%s", out)
	}
	if !testenv.SlotFailover(t, dsn, plain) {
		t.Errorf("setup did not switch failover on for %s", plain)
	}

	// A slot a process streams from cannot be switched: setup says so
	// and succeeds.
	held := slot + "_e"
	testenv.Exec(t, dsn, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, held)
	holder := testenv.HoldSlot(t, dsn, held, "proto_version '1'", "publication_names 'walrelay_outbox'")
	out = wantOK(t, childEnv("WALRELAY_POSTGRES_DSN="+dsn, "WALRELAY_POSTGRES_SLOT="+held), "setup")
	if !strings.Contains(out, "failover still off: a process holds the slot") {
		t.Errorf("setup on a held slot does not say failover is still off:\n%s", out)
	}
	_ = holder.Close(t.Context())

	// postgres.slot_failover=false: neither creates a failover slot.
	off := slot + "_d"
	out = wantOK(t, childEnv("WALRELAY_POSTGRES_DSN="+dsn, "WALRELAY_POSTGRES_SLOT_FAILOVER=false"), "slot", "create", off)
	if strings.Contains(out, "a failover slot") || testenv.SlotFailover(t, dsn, off) {
		t.Errorf("postgres.slot_failover=false, and slot create made a failover slot:\n%s", out)
	}
}

// postgres.slot_failover=true on a server older than PostgreSQL 17: setup
// and slot create refuse before creating anything, naming the option and
// the version, and check fails its slot failover item. auto there creates
// the slot (slot create saying why it is not a failover slot).
func TestFailoverTrueRefusedBefore17(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	if major := testenv.ServerMajor(t, dsn); major >= 17 {
		t.Skipf("the server is PostgreSQL %d, which has failover slots; this test needs 14, 15 or 16", major)
	}
	slot := testenv.UniqueName(t, "fs")
	env := childEnv("WALRELAY_POSTGRES_DSN="+dsn, "WALRELAY_POSTGRES_SLOT="+slot, "WALRELAY_POSTGRES_SLOT_FAILOVER=true", "WALRELAY_KAFKA_BROKERS=127.0.0.1:1")
	for _, args := range [][]string{{"setup"}, {"slot", "create", slot}} {
		stdout, stderr, code := walrelay(t, env, args...)
		wantFailure(t, stdout, stderr, code, 1, "postgres.slot_failover=true", "has no failover slots", "PostgreSQL 17", "nothing was created")
		if n := testenv.QueryValue[int64](t, dsn, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, slot); n != 0 {
			t.Errorf("walrelay %v created the slot before refusing", args)
		}
		if n := testenv.QueryValue[int64](t, dsn, `SELECT count(*) FROM pg_class WHERE relname = 'outbox'`); n != 0 {
			t.Errorf("walrelay %v created the outbox table before refusing", args)
		}
	}
	c, code := checkJSON(t, env)
	if code != 1 {
		t.Errorf("check exit %d, want 1", code)
	}
	c.want(t, "slot failover", operator.Fail, []string{"postgres.slot_failover=true", "has no failover slots"}, []string{"postgres.slot_failover=auto"})

	autoEnv := childEnv("WALRELAY_POSTGRES_DSN="+dsn, "WALRELAY_POSTGRES_SLOT="+slot)
	wantOK(t, autoEnv, "setup")
	out := wantOK(t, autoEnv, "slot", "create", slot+"_b")
	if !strings.Contains(out, "not a failover slot: PostgreSQL") {
		t.Errorf("slot create with postgres.slot_failover=auto does not say why the slot is not a failover slot:\n%s", out)
	}
}

// check on a primary with a hot standby (PostgreSQL 17+): the slot is a
// failover slot, synchronized_standby_slots names the standby's physical
// slot (and a warning says what is at risk when it does not), the standby
// is listed. On the standby: the slot is a synchronized copy run cannot
// use until promotion (a failure, not ok), and the standby keeps copies.
func TestCheckFailoverItems(t *testing.T) {
	pair := testenv.StartFailoverPair(t)
	primary := pair.Primary.DSN("postgres")
	broker := testenv.Kafka(t)
	brokers := "WALRELAY_KAFKA_BROKERS=" + strings.Join(broker.Addrs(), ",")
	wantOK(t, childEnv("WALRELAY_POSTGRES_DSN="+primary, brokers), "setup")
	pair.WaitSynced(t, "walrelay", time.Minute)

	env := childEnv("WALRELAY_POSTGRES_DSN="+primary, brokers)
	c, _ := checkJSON(t, env)
	c.want(t, "slot failover", operator.OK, []string{"is a failover slot"}, nil)
	c.want(t, "synchronized_standby_slots", operator.OK, []string{pair.StandbySlot}, nil)
	c.want(t, "standbys", operator.OK, []string{"1 attached", "slot " + pair.StandbySlot, "streaming"}, nil)

	testenv.Exec(t, primary, `ALTER SYSTEM RESET synchronized_standby_slots`)
	testenv.Exec(t, primary, `SELECT pg_reload_conf()`)
	deadline := time.Now().Add(10 * time.Second)
	for testenv.QueryValue[string](t, primary, `SHOW synchronized_standby_slots`) != "" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	c, _ = checkJSON(t, env)
	c.want(t, "synchronized_standby_slots", operator.Warn, []string{"empty", pair.StandbySlot, "no longer exist"}, []string{"ALTER SYSTEM SET synchronized_standby_slots = '" + pair.StandbySlot + "'"})

	c, code := checkJSON(t, childEnv("WALRELAY_POSTGRES_DSN="+pair.Standby.DSN("postgres"), brokers))
	if code != 1 {
		t.Errorf("check on the standby: exit %d, want 1 (run cannot use the synchronized copy)", code)
	}
	c.want(t, "slot walrelay", operator.Fail, []string{"synchronized copy", "usable when this server is promoted"}, []string{"primary"})
	c.want(t, "slot sync (standby)", operator.OK, []string{"sync_replication_slots=on", "hot_standby_feedback=on", "primary_slot_name=" + pair.StandbySlot}, nil)

	// A standby that does not synchronize slots: a warning saying what is
	// missing and that walrelay's slot would be missing after its
	// promotion; on the primary, its physical slot is one
	// synchronized_standby_slots leaves out.
	testenv.Exec(t, primary, `ALTER SYSTEM SET synchronized_standby_slots = '`+pair.StandbySlot+`'`)
	testenv.Exec(t, primary, `SELECT pg_reload_conf()`)
	plain, err := pair.Primary.NewStandby(t.Context(), localpg.StandbyOptions{Slot: "plain_standby", Settings: map[string]string{"sync_replication_slots": "off", "hot_standby_feedback": "off"}})
	if err != nil {
		t.Fatalf("NewStandby: %v", err)
	}
	t.Cleanup(func() { _ = plain.Close() })
	c, _ = checkJSON(t, childEnv("WALRELAY_POSTGRES_DSN="+plain.DSN("postgres"), brokers))
	c.want(t, "slot sync (standby)", operator.Warn, []string{"sync_replication_slots is off", "hot_standby_feedback is off", "after its promotion walrelay's slot is missing"},
		[]string{"ALTER SYSTEM SET sync_replication_slots = on;", "ALTER SYSTEM SET hot_standby_feedback = on;"})
	deadline = time.Now().Add(10 * time.Second)
	for testenv.QueryValue[string](t, primary, `SHOW synchronized_standby_slots`) == "" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	c, _ = checkJSON(t, env)
	c.want(t, "synchronized_standby_slots", operator.Warn, []string{"does not name physical slots plain_standby"}, []string{"plain_standby"})
	c.want(t, "standbys", operator.OK, []string{"2 attached", "slot plain_standby"}, nil)
}
