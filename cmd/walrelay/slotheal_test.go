package main

import (
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/testenv"
)

// walrelay slot heal (issue 33 item 5, the command form of
// outbox.on_slot_loss: heal): on a dropped slot walrelay had a record of,
// it creates the slot again and first republishes the outbox rows the
// record does not prove delivered (here every row: the record has no
// fence, no relay ran), then refuses a second heal (nothing to heal).
// slot create --accept-gap reports the gap it accepts.
func TestSlotHealAndAcceptGap(t *testing.T) {
	e := newE2E(t)
	e.setup(t, "created")
	for _, topic := range e.topics() {
		e.broker.CreateTopic(t, topic, 4)
	}
	conn := testenv.Connect(t, e.dsn)
	ids, _, err := writeTx(t.Context(), conn, 30)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, e.dsn, `SELECT pg_drop_replication_slot('walrelay')`)

	stdout, stderr, code := walrelay(t, e.env, "slot", "heal")
	if code != 0 || !strings.Contains(stdout, "healed slot walrelay (missing): created it at") || !strings.Contains(stdout, "republished 30 outbox rows") {
		t.Fatalf("walrelay slot heal: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	got := map[string]bool{}
	for _, r := range e.readAll(t) {
		for _, h := range r.Headers {
			if h.Key == "id" {
				got[string(h.Value)] = true
			}
		}
	}
	for _, id := range ids {
		if !got[id] {
			t.Errorf("row %s is not on Kafka after the heal", id)
		}
	}
	if !slotExists(t, e.dsn, "walrelay") {
		t.Fatal("the heal did not create the slot")
	}
	if note := testenv.QueryValue[string](t, e.dsn, `SELECT note || ' ' || (jumped_at IS NULL)::text FROM walrelay_slot_positions WHERE slot_name = 'walrelay'`); !strings.HasPrefix(note, "healed ") || !strings.HasSuffix(note, " true") {
		t.Errorf("record after the heal: %q, want a heal note and no jump", note)
	}
	stdout, stderr, code = walrelay(t, e.env, "slot", "heal")
	if code != 1 || !strings.Contains(stderr, "walrelay: nothing to heal") {
		t.Errorf("a second walrelay slot heal: exit %d, want 1 and nothing to heal\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	// The other way on: accept the gap, reported.
	if _, _, err := writeTx(t.Context(), conn, 5); err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, e.dsn, `SELECT pg_drop_replication_slot('walrelay')`)
	stdout, stderr, code = walrelay(t, e.env, "slot", "create", "walrelay", "--accept-gap")
	if code != 0 || !strings.Contains(stdout, "gap accepted: walrelay's record was at") || !strings.Contains(stdout, "the outbox holds 35 rows") {
		t.Fatalf("walrelay slot create --accept-gap: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}
