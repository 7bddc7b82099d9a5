package main

import (
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/testenv"
)

// A slot walrelay confirmed through is not created again silently: slot
// create and setup refuse and say what to run (heal, or accept the gap);
// slot create --replace (the alias of --accept-gap) creates it and leaves retention stopped; outbox prune says why;
// slot adopt resumes it and notes who adopted it.
func TestSlotCreateReplaceAndAdopt(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	setupOutbox(t, dsn)
	env := childEnv("WALRELAY_POSTGRES_DSN="+dsn, "WALRELAY_OUTBOX_RETENTION=1h")
	testenv.Exec(t, dsn, `SELECT pg_drop_replication_slot('walrelay')`)

	stdout, stderr, code := walrelay(t, env, "slot", "create", "walrelay")
	wantFailure(t, stdout, stderr, code, 1, "walrelay confirmed through a slot of this name before", "walrelay slot create walrelay --accept-gap", "walrelay slot heal", "walrelay slot adopt walrelay")
	stdout, stderr, code = walrelay(t, env, "setup")
	wantFailure(t, stdout, stderr, code, 1, "walrelay confirmed through a slot of this name before", "--accept-gap", "walrelay slot heal")
	if slotExists(t, dsn, "walrelay") {
		t.Fatal("slot create or setup recreated the slot")
	}

	out := wantOK(t, env, "slot", "create", "walrelay", "--replace")
	if !strings.Contains(out, "created slot walrelay") || !strings.Contains(out, "retention stays stopped") {
		t.Errorf("slot create --replace printed:\n%s", out)
	}
	stdout, stderr, code = walrelay(t, env, "outbox", "prune", "--wait", "1s")
	wantFailure(t, stdout, stderr, code, 1, "replaced by walrelay slot create --accept-gap", "walrelay slot adopt walrelay")

	out = wantOK(t, env, "slot", "adopt", "walrelay", "--by", "oncall")
	if !strings.Contains(out, "adopted slot walrelay") || !strings.Contains(out, "replaced by walrelay slot create --accept-gap") {
		t.Errorf("slot adopt printed:\n%s", out)
	}
	if by := testenv.QueryValue[string](t, dsn, `SELECT adopted_by || ' ' || (jumped_at IS NULL)::text FROM walrelay_slot_positions WHERE slot_name = 'walrelay'`); by != "oncall true" {
		t.Errorf("record after adopt: adopted_by, jump cleared = %q, want \"oncall true\"", by)
	}
	// Nobody confirms the fence (no relay runs), but the slot's position is
	// walrelay's again: prune waits for the slot instead of refusing.
	stdout, stderr, code = walrelay(t, env, "outbox", "prune", "--wait", "500ms")
	wantFailure(t, stdout, stderr, code, 1, "has not confirmed the fence")
	wantOK(t, env, "slot", "acknowledge", "walrelay") // the alias, idempotent
	out = wantOK(t, env, "slot", "inspect", "walrelay")
	if !regexp1(out, `(?m)^adopted\s+\S+ by `) || !regexp1(out, `(?m)^retention\s+ok: prunes by this slot's position$`) {
		t.Errorf("slot inspect does not show walrelay's record, adopted, retention ok:\n%s", out)
	}
}
