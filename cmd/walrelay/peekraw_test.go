package main

import (
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/operator"
	"github.com/walrelay/walrelay/internal/testenv"
)

// slot peek shows a row the router refuses (a NULL aggregatetype) with
// its real key and payload size, not "(null)" and 0 B.
func TestSlotPeekShowsUnroutableRow(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	setupOutbox(t, dsn)
	testenv.Exec(t, dsn, `ALTER TABLE outbox ALTER COLUMN aggregatetype DROP NOT NULL`)
	ids := insertEvents(t, dsn, "") // aggregateid agg-0, payload {"i": 0}
	env := childEnv("WALRELAY_POSTGRES_DSN=" + dsn)
	res := decodeJSON[operator.PeekResult](t, wantOK(t, env, "slot", "peek", "walrelay", "-o", "json"))
	if len(res.Events) != 1 {
		t.Fatalf("peek: %d events, want 1: %+v", len(res.Events), res.Events)
	}
	ev := res.Events[0]
	if ev.ID != ids[0] || ev.ErrorClass != "routing_value_missing" || ev.Key == nil || *ev.Key != "agg-0" || ev.PayloadBytes != len(`{"i": 0}`) {
		t.Errorf("peek -o json: %+v (key %v), want %s routing_value_missing with key agg-0 and an 8-byte payload", ev, ev.Key, ids[0])
	}
	out := wantOK(t, env, "slot", "peek", "walrelay")
	if !strings.Contains(out, "agg-0") || !strings.Contains(out, "8 B") || strings.Contains(out, "(null)") {
		t.Errorf("slot peek:\n%s", out)
	}
}
