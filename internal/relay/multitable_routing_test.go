package relay_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/testenv"
)

// One router for both tables, with Kafka Connect's JsonConverter (schemas
// on) for keys and values and an envelope placement: rows of either table
// with the same route value go to the same topic, with the same key bytes
// (so the same partition) and their id header; the envelope's Connect
// schema is named after each row's own table, as Debezium names it
// (<schema>.<table>.<route value>.Value).
func TestTwoTablesRoutingJSONEnvelope(t *testing.T) {
	f := newFixtureTables(t, func(c *config.Config) {
		c.Converter.Key, c.Converter.Value = "json", "json"
		c.Router.AdditionalPlacement = "type:envelope:eventType"
	})
	run := f.start(t)
	type row struct{ table, route, key string }
	rows := []row{
		{tableA, "order", "k1"}, {tableB, "order", "k1"},
		{tableA, "invoice", "k2"}, {tableB, "invoice", "k2"},
	}
	byID := map[string]row{}
	for _, r := range rows {
		id, _ := insertRowInto(t, f.dsn, r.table, r.route, r.key, `{"n": 1}`)
		byID[id] = r
	}
	for _, route := range []string{"order", "invoice"} {
		topic := "outbox.event." + route
		recs := f.broker.ReadAll(t, []string{topic}, 2, 30*time.Second)
		if len(recs) != 2 {
			t.Fatalf("%s: %d records, want 2", topic, len(recs))
		}
		tables := map[string]bool{}
		for _, rec := range recs {
			id := testenv.Header(rec, "id")
			r, ok := byID[id]
			if !ok {
				t.Fatalf("%s: a record with id header %q, which is no row's", topic, id)
			}
			tables[r.table] = true
			wantKey := `{"schema":{"type":"string","optional":false},"payload":"` + r.key + `"}`
			if string(rec.Key) != wantKey || rec.Partition != recs[0].Partition {
				t.Errorf("%s row %s: key %s on partition %d; want %s on partition %d (the other table's)", r.table, id, rec.Key, rec.Partition, wantKey, recs[0].Partition)
			}
			var v struct {
				Schema struct {
					Name string `json:"name"`
				} `json:"schema"`
				Payload struct {
					EventType string `json:"eventType"`
				} `json:"payload"`
			}
			if err := json.Unmarshal(rec.Value, &v); err != nil {
				t.Fatalf("%s row %s: value %s: %v", r.table, id, rec.Value, err)
			}
			if want := r.table + "." + route + ".Value"; v.Schema.Name != want || v.Payload.EventType != "T" {
				t.Errorf("%s row %s: envelope schema %q, eventType %q; want %q, \"T\"", r.table, id, v.Schema.Name, v.Payload.EventType, want)
			}
		}
		if !tables[tableA] || !tables[tableB] {
			t.Errorf("%s: records of %v, want one of each table", topic, tables)
		}
	}
	if err := run.stop(); err != nil {
		t.Fatalf("relay: %v", err)
	}
}
