package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/operator"
	"github.com/walrelay/walrelay/internal/testenv"
)

// The incident the operator commands exist for: a row the relay cannot
// publish, with on_error=stop, halts `walrelay run`; `slot peek` shows it;
// `slot advance --past-event` skips exactly that event (alone in its
// transaction) and nothing before or after it; the restarted relay
// publishes every event after it. Along the way, advance refuses a slot in
// use, no --yes, backwards, past the WAL end and an unknown event.
func TestSlotAdvancePastPoisonedEvent(t *testing.T) {
	e := newE2E(t)
	e.env = append(e.env, "WALRELAY_RELAY_ON_ERROR_ROUTING_VALUE_MISSING=stop")
	e.setup(t, "created")
	testenv.Exec(t, e.dsn, `ALTER TABLE outbox ALTER COLUMN aggregatetype DROP NOT NULL`)
	for _, topic := range e.topics() {
		e.broker.CreateTopic(t, topic, 2)
	}

	relay := startChild(t, e.env, "run")
	before := insertEvents(t, e.dsn, "order", "customer")
	_, current := e.slot(t)
	e.waitConfirmed(t, current, 30*time.Second) // published and confirmed

	// While the relay holds the slot, advance and peek refuse.
	stdout, stderr, code := walrelay(t, e.env, "slot", "advance", "walrelay", "--to", current.String(), "--yes")
	wantFailure(t, stdout, stderr, code, 1, `slot "walrelay" is in use by pid`, "stop the relay")
	stdout, stderr, code = walrelay(t, e.env, "slot", "peek", "walrelay")
	wantFailure(t, stdout, stderr, code, 1, `slot "walrelay" is in use by pid`, "stop the relay or peek a copy")

	poison := insertEvents(t, e.dsn, "")[0]
	after := append(insertEvents(t, e.dsn, "order", "customer", "order"), insertEvents(t, e.dsn, "customer")...)
	if code := relay.wait(t, 30*time.Second); code != 1 {
		t.Fatalf("walrelay run exited %d on a routing_value_missing row with on_error=stop, want 1", code)
	}
	if !strings.Contains(relay.stderr.String(), poison) {
		t.Errorf("the relay's error should name the outbox id %s:\n%s", poison, relay.stderr.String())
	}
	stopped := slotLSN(t, e.dsn, "walrelay")

	// peek shows the poisoned event first, with its error and policy.
	res := decodeJSON[operator.PeekResult](t, wantOK(t, e.env, "slot", "peek", "walrelay", "-o", "json"))
	if len(res.Events) != 1+len(after) || res.Events[0].ID != poison || res.Events[0].ErrorClass != "routing_value_missing" || res.Events[0].OnError != "stop" {
		t.Fatalf("peek after the stop: %+v, want %s (routing_value_missing, on_error=stop) then %d events", res.Events, poison, len(after))
	}
	out := wantOK(t, e.env, "slot", "peek", "walrelay")
	if !strings.Contains(out, "(cannot publish: routing_value_missing, on_error=stop)") {
		t.Errorf("slot peek should flag the poisoned row:\n%s", out)
	}
	if got := slotLSN(t, e.dsn, "walrelay"); got != stopped {
		t.Fatalf("peek moved the slot from %s to %s", stopped, got)
	}

	// Refusals leave the slot alone.
	_, cur := e.slot(t)
	for _, c := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"no --yes", []string{"slot", "advance", "walrelay", "--past-event", poison}, 2, []string{"--yes"}},
		{"backwards", []string{"slot", "advance", "walrelay", "--to", "0/1", "--yes"}, 1, []string{"backwards", "0/1 is before", stopped}},
		{"past the WAL end", []string{"slot", "advance", "walrelay", "--to", "FFFFFFFF/0", "--yes"}, 1, []string{"past the current WAL end", "FFFFFFFF/0 is ahead of pg_current_wal_lsn()"}},
		{"unknown event", []string{"slot", "advance", "walrelay", "--past-event", "00000000-0000-0000-0000-000000000000", "--yes"}, 1, []string{"no pending INSERT", "00000000-0000-0000-0000-000000000000", "walrelay slot peek walrelay"}},
		{"published event", []string{"slot", "advance", "walrelay", "--past-event", before[0], "--yes"}, 1, []string{"no pending INSERT"}},
		{"malformed LSN", []string{"slot", "advance", "walrelay", "--to", "xyz", "--yes"}, 2, []string{`malformed LSN "xyz": want the form 0/16B3748`}},
		{"both targets", []string{"slot", "advance", "walrelay", "--to", cur.String(), "--past-event", poison, "--yes"}, 2, []string{"exactly one of --to LSN or --past-event ID"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := walrelay(t, e.env, c.args...)
			wantFailure(t, stdout, stderr, code, c.code, c.want...)
			if got := slotLSN(t, e.dsn, "walrelay"); got != stopped {
				t.Fatalf("a refused advance moved the slot from %s to %s", stopped, got)
			}
		})
	}

	// The advance lists exactly the poisoned event and moves the slot to
	// the end of its transaction.
	out = wantOK(t, e.env, "slot", "advance", "walrelay", "--past-event", poison, "--yes")
	if !strings.Contains(out, "skips 1 outbox event(s)") || !strings.Contains(out, poison) {
		t.Errorf("slot advance output should list the one skipped event:\n%s", out)
	}
	for _, id := range append(before, after...) {
		if strings.Contains(out, id) {
			t.Errorf("slot advance lists %s, which it does not skip:\n%s", id, out)
		}
	}
	moved := slotLSN(t, e.dsn, "walrelay")
	if moved != res.Events[0].TxEndLSN || !strings.Contains(out, "advanced slot walrelay to "+moved) {
		t.Errorf("slot is at %s, want the poisoned transaction's end %s; output:\n%s", moved, res.Events[0].TxEndLSN, out)
	}
	res = decodeJSON[operator.PeekResult](t, wantOK(t, e.env, "slot", "peek", "walrelay", "-o", "json"))
	if len(res.Events) != len(after) || res.Events[0].ID != after[0] {
		t.Errorf("after the advance, peek shows %+v, want the %d later events", res.Events, len(after))
	}

	// The restarted relay publishes everything after the poisoned event.
	relay = startChild(t, e.env, "run")
	_, current = e.slot(t)
	e.waitConfirmed(t, current, 30*time.Second)
	relay.signal(t, syscall.SIGTERM)
	if code := relay.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("restarted relay exited %d", code)
	}
	got := map[string]int{}
	for _, r := range e.broker.ReadAll(t, e.topics(), len(before)+len(after), 30*time.Second) {
		got[testenv.Header(r, "id")]++
	}
	for _, id := range append(before, after...) {
		if got[id] == 0 {
			t.Errorf("event %s was not published", id)
		}
	}
	if got[poison] != 0 || len(got) != len(before)+len(after) {
		t.Errorf("published ids %v; want exactly the %d events before and after the poisoned %s", got, len(before)+len(after), poison)
	}
}
