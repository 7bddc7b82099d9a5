package main

import (
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/operator"
	"github.com/walrelay/walrelay/internal/testenv"
)

// slot peek shows the table-less outbox's logical messages among the
// rows, routed (id, topic, key) and marked as messages, and a bad one with
// its error class; messages it ignores (non-transactional, another
// prefix) it does not show, nor any message without outbox.message_prefix.
func TestSlotPeekShowsMessages(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	setupOutbox(t, dsn)
	rows := insertEvents(t, dsn, "order")
	testenv.Exec(t, dsn, `BEGIN;
		SELECT pg_logical_emit_message(true, 'outbox', '{"id":"m-1","aggregatetype":"customer","aggregateid":"c-1","payload":{"a":1}}');
		SELECT pg_logical_emit_message(false, 'outbox', '{"id":"m-nontx","aggregatetype":"customer","aggregateid":"c-1","payload":{}}');
		SELECT pg_logical_emit_message(true, 'other', '{"id":"m-other","aggregatetype":"customer","aggregateid":"c-1","payload":{}}');
		SELECT pg_logical_emit_message(true, 'outbox', '{"aggregatetype":"customer"}');
		COMMIT`)
	rows = append(rows, insertEvents(t, dsn, "order")...)

	env := childEnv("WALRELAY_POSTGRES_DSN="+dsn, "WALRELAY_OUTBOX_MESSAGE_PREFIX=outbox")
	res := decodeJSON[operator.PeekResult](t, wantOK(t, env, "slot", "peek", "walrelay", "-o", "json"))
	type ev struct {
		id, topic, key, table, class string
		message                      bool
	}
	var got []ev
	for _, e := range res.Events {
		k := ""
		if e.Key != nil {
			k = *e.Key
		}
		got = append(got, ev{e.ID, e.Topic, k, e.Table, e.ErrorClass, e.Message})
	}
	want := []ev{
		{rows[0], "outbox.event.order", "agg-0", "public.outbox", "", false},
		{"m-1", "outbox.event.customer", "c-1", "message:outbox", "", true},
		{"", "", "", "message:outbox", "payload_invalid", true},
		{rows[1], "outbox.event.order", "agg-0", "public.outbox", "", false},
	}
	if len(got) != len(want) {
		t.Fatalf("peek shows %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	out := wantOK(t, env, "slot", "peek", "walrelay")
	if !strings.Contains(out, "SOURCE") || !strings.Contains(out, "message:outbox") || !strings.Contains(out, "(cannot publish: payload_invalid, on_error=dlq)") {
		t.Errorf("slot peek output does not mark the messages:\n%s", out)
	}

	noMessages := decodeJSON[operator.PeekResult](t, wantOK(t, childEnv("WALRELAY_POSTGRES_DSN="+dsn), "slot", "peek", "walrelay", "-o", "json"))
	if len(noMessages.Events) != 2 {
		t.Errorf("without outbox.message_prefix, peek shows %d events, want the 2 rows: %+v", len(noMessages.Events), noMessages.Events)
	}
	if out := wantOK(t, childEnv("WALRELAY_POSTGRES_DSN="+dsn), "slot", "peek", "walrelay"); strings.Contains(out, "SOURCE") {
		t.Errorf("slot peek without messages shows a SOURCE column:\n%s", out)
	}

	// slot advance finds a message by its id and skips its transaction.
	wantOK(t, env, "slot", "advance", "walrelay", "--past-event", "m-1", "--yes")
	res = decodeJSON[operator.PeekResult](t, wantOK(t, env, "slot", "peek", "walrelay", "-o", "json"))
	if len(res.Events) != 1 || res.Events[0].ID != rows[1] {
		t.Errorf("after advancing past m-1, peek shows %+v, want only %s", res.Events, rows[1])
	}
}
