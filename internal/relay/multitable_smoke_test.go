package relay_test

import (
	"testing"
	"time"
)

// The two-table fixture relays a row of each table (the base for the
// multi-table tests of issue 37).
func TestTwoTableFixtureRelaysBoth(t *testing.T) {
	f := newFixtureTables(t, nil)
	f.start(t)
	insertRowInto(t, f.dsn, tableA, "order", "k1", `{"n":1}`)
	insertRowInto(t, f.dsn, tableB, "order", "k1", `{"n":2}`)
	recs := f.broker.ReadAll(t, []string{"outbox.event.order"}, 2, 30*time.Second)
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	// jsonb gives its own text: {"n": 1}.
	if string(recs[0].Value) != `{"n": 1}` || string(recs[1].Value) != `{"n": 2}` {
		t.Errorf("values %s, %s; want {\"n\": 1}, {\"n\": 2}", recs[0].Value, recs[1].Value)
	}
}
