package relay_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/deadletter"
	"github.com/walrelay/walrelay/internal/testenv"
)

// avroConfig sets both the key and value converters to avro with reg as
// their registry.
func avroConfig(reg *testenv.SchemaRegistry) func(*config.Config) {
	return func(c *config.Config) {
		c.Converter.Key, c.Converter.KeyRegistryURL = "avro", reg.URL()
		c.Converter.Value, c.Converter.ValueRegistryURL = "io.confluent.connect.avro.AvroConverter", reg.URL()
	}
}

// schemaByID is the registry's GET /schemas/ids/{id}: the schema text a
// consumer's deserializer decodes a record with.
func schemaByID(t *testing.T, reg *testenv.SchemaRegistry, id uint32) string {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("%s/schemas/ids/%d", reg.URL(), id))
	if err != nil {
		t.Fatalf("GET /schemas/ids/%d: %v", id, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /schemas/ids/%d: %s: %s", id, resp.Status, body)
	}
	var s struct {
		Schema string `json:"schema"`
	}
	if err := json.Unmarshal(body, &s); err != nil {
		t.Fatalf("GET /schemas/ids/%d: %v: %s", id, err, body)
	}
	return s.Schema
}

// confluent splits Confluent's wire format: magic byte 0, the big-endian
// schema id, the Avro body.
func confluent(t *testing.T, what string, b []byte) (id uint32, body []byte) {
	t.Helper()
	if len(b) < 5 || b[0] != 0 {
		t.Fatalf("%s %x: not Confluent's wire format (magic byte 0 and a 4-byte id)", what, b)
	}
	return binary.BigEndian.Uint32(b[1:5]), b[5:]
}

// decodeAll decodes each record's key (key) or value with python3-avro,
// using the schema the registry returns for the record's id; it returns
// the decoded values in record order and the ids seen.
func decodeAll(t *testing.T, reg *testenv.SchemaRegistry, recs []*kgo.Record, key bool) ([]any, map[uint32]bool) {
	t.Helper()
	byID := map[uint32][]int{}
	bodies := make([][]byte, len(recs))
	for i, r := range recs {
		b, what := r.Value, "value"
		if key {
			b, what = r.Key, "key"
		}
		id, body := confluent(t, what, b)
		byID[id] = append(byID[id], i)
		bodies[i] = body
	}
	out := make([]any, len(recs))
	ids := map[uint32]bool{}
	for id, idx := range byID {
		ids[id] = true
		batch := make([][]byte, len(idx))
		for j, i := range idx {
			batch[j] = bodies[i]
		}
		for j, v := range testenv.DecodeAvroBatch(t, schemaByID(t, reg, id), batch) {
			out[idx[j]] = v
		}
	}
	return out, ids
}

// gauge reads a gauge's value from reg (0 when absent).
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				return metricValue(m)
			}
		}
	}
	return 0
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	}
	return 0
}

// Avro keys and values land with the ids the registry gave the subjects
// <topic>-key and <topic>-value, and decode (python3-avro, with the schema
// the registry returns for the id) to the rows' aggregate ids and
// payloads; each schema is registered once however many rows use it.
func TestAvroKeysAndValuesWithRegistryIDs(t *testing.T) {
	reg := testenv.Registry(t)
	f := newFixture(t, avroConfig(reg))
	run := f.start(t)
	type row struct{ id, key, payload string }
	var rows []row
	for i := range 6 {
		typ := []string{"order", "invoice"}[i%2]
		id, _ := insertRow(t, f.dsn, typ, fmt.Sprintf("%s-%d", typ, i), fmt.Sprintf(`{"n": %d, "name": "é\"x"}`, i))
		rows = append(rows, row{id: id})
	}
	for i := range rows {
		rows[i].key = testenv.QueryValue[string](t, f.dsn, `SELECT aggregateid FROM outbox WHERE id::text = $1`, rows[i].id)
		rows[i].payload = testenv.QueryValue[string](t, f.dsn, `SELECT payload::text FROM outbox WHERE id::text = $1`, rows[i].id)
	}
	recs := f.broker.ReadAll(t, []string{"outbox.event.order", "outbox.event.invoice"}, len(rows), 30*time.Second)
	keys, keyIDs := decodeAll(t, reg, recs, true)
	values, valueIDs := decodeAll(t, reg, recs, false)
	byID := map[string]row{}
	for _, r := range rows {
		byID[r.id] = r
	}
	for i, rec := range recs {
		id, _ := header(rec, "id")
		want, ok := byID[id]
		if !ok {
			t.Fatalf("record %d: id %q is no row's", i, id)
		}
		if keys[i] != want.key || values[i] != want.payload {
			t.Errorf("record %d (row %s): key %#v value %#v, want %q and %q", i, id, keys[i], values[i], want.key, want.payload)
		}
		kid, _ := confluent(t, "key", rec.Key)
		vid, _ := confluent(t, "value", rec.Value)
		ks, _ := reg.Schema(rec.Topic+"-key", -1)
		vs, _ := reg.Schema(rec.Topic+"-value", -1)
		if int(kid) != ks.ID || int(vid) != vs.ID {
			t.Errorf("record %d on %s: key id %d value id %d, want the registry's %d (%s-key) and %d (%s-value)", i, rec.Topic, kid, vid, ks.ID, rec.Topic, vs.ID, rec.Topic)
		}
	}
	t.Logf("%d records; key ids %v, value ids %v; value schema %s", len(recs), keyIDs, valueIDs, schemaByID(t, reg, func() uint32 { id, _ := confluent(t, "value", recs[0].Value); return id }()))
	for _, topic := range []string{"outbox.event.order", "outbox.event.invoice"} {
		for _, side := range []string{"-key", "-value"} {
			if n := reg.Count(http.MethodPost, "/subjects/"+topic+side+"/versions"); n != 1 {
				t.Errorf("%d registrations under %s%s, want 1 (the relay caches the id)", n, topic, side)
			}
		}
	}
	if err := run.stop(); err != nil {
		t.Fatalf("relay: %v", err)
	}
}

var _ = sort.Strings
var _ = strings.Contains
var _ = deadletter.HeaderErrorClass
