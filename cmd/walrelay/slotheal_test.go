package main

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

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

// walrelay slot heal with relay.delivery=exactly_once: the republished
// rows are in Kafka transactions (a read_committed consumer sees each
// once), and a second heal of the slot dropped again finds every row of
// the gap on Kafka (read_committed, after its fence) and republishes none.
func TestSlotHealExactlyOnce(t *testing.T) {
	e := newE2E(t)
	e.setup(t, "created")
	for _, topic := range e.topics() {
		e.broker.CreateTopic(t, topic, 4)
	}
	env := append(append([]string(nil), e.env...), "WALRELAY_RELAY_DELIVERY=exactly_once")
	conn := testenv.Connect(t, e.dsn)
	ids, _, err := writeTx(t.Context(), conn, 30)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"republished 30 outbox rows", "republished 0 outbox rows"} {
		testenv.Exec(t, e.dsn, `SELECT pg_drop_replication_slot('walrelay')`)
		stdout, stderr, code := walrelay(t, env, "slot", "heal")
		if code != 0 || !strings.Contains(stdout, "healed slot walrelay (missing): created it at") || !strings.Contains(stdout, want) {
			t.Fatalf("walrelay slot heal #%d: exit %d, want %q\nstdout:\n%s\nstderr:\n%s", i+1, code, want, stdout, stderr)
		}
	}
	b := e.broker.As(kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	recs := b.ReadAll(t, e.topics(), len(ids), 30*time.Second)
	recs = append(recs, b.ReadAll(t, e.topics(), 0, time.Second)[len(recs):]...)
	got := map[string]int{}
	for _, r := range recs {
		got[testenv.Header(r, "id")]++
	}
	for _, id := range ids {
		if got[id] != 1 {
			t.Errorf("row %s read %d times by a read_committed consumer, want once", id, got[id])
		}
	}
	t.Logf("read_committed: %d records for %d rows", len(recs), len(ids))
}
