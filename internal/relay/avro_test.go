package relay_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/deadletter"
	"github.com/walrelay/walrelay/internal/relay"
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
// payloads; each schema is registered once however many rows use it, by
// a client that says walrelay/<version> in its User-Agent.
func TestAvroKeysAndValuesWithRegistryIDs(t *testing.T) {
	reg := testenv.Registry(t)
	f := newFixture(t, avroConfig(reg))
	run := f.start(t, relay.Version("v9.9.9-test"))
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
	for _, q := range reg.Requests() {
		if strings.HasPrefix(q.Path, "/schemas/ids/") {
			continue // the test's own
		}
		if q.UserAgent != "walrelay/v9.9.9-test" {
			t.Errorf("%s %s with User-Agent %q, want walrelay/v9.9.9-test", q.Method, q.Path, q.UserAgent)
		}
	}
	if err := run.stop(); err != nil {
		t.Fatalf("relay: %v", err)
	}
}

// A registry that refuses a schema (an incompatible earlier version
// registered under BACKWARD: 409) is a schema_rejected row error: with
// relay.on_error.schema_rejected dlq (the default) the row goes to the
// dead-letter topic with the registry's message, and the rows after it
// (another topic) go on; with stop the relay stops naming the row, which
// stays unconfirmed.
func TestAvroSchemaRejected(t *testing.T) {
	const bad, good = "outbox.event.bad", "outbox.event.good"
	for _, policy := range []string{config.PolicyDLQ, config.PolicyStop} {
		t.Run(policy, func(t *testing.T) {
			reg := testenv.Registry(t)
			reg.Register(bad+"-value", `{"type":"record","name":"Earlier","fields":[{"name":"f","type":"int"}]}`)
			f := newFixture(t, func(c *config.Config) {
				avroConfig(reg)(c)
				c.Relay.OnError.SchemaRejected = policy
			})
			f.createProbe(t)
			run := f.start(t)
			badID, badXid := insertRow(t, f.dsn, "bad", "b-1", `{"a": 1}`)
			goodID, _ := insertRow(t, f.dsn, "good", "g-1", `{"a": 2}`)
			if policy == config.PolicyStop {
				err := run.wait(30 * time.Second)
				t.Logf("Run: %v", err)
				if !errors.Is(err, relay.ErrStopped) || !strings.Contains(err.Error(), badID) || !strings.Contains(err.Error(), "schema_rejected") ||
					!strings.Contains(err.Error(), "incompatible with an earlier schema") {
					t.Fatalf("Run = %v, want ErrStopped naming row %s, schema_rejected and the registry's message", err, badID)
				}
				if confirmed, _ := f.slot(t); confirmed >= f.txEnd(t, badXid) {
					t.Errorf("confirmed_flush_lsn %s passed the refused row's transaction end", confirmed)
				}
				return
			}
			dl := f.broker.ReadAll(t, []string{f.cfg.Relay.DeadLetterTopic}, 1, 30*time.Second)
			class, _ := header(dl[0], deadletter.HeaderErrorClass)
			msg, _ := header(dl[0], deadletter.HeaderErrorMessage)
			oid, _ := header(dl[0], deadletter.HeaderOutboxID)
			t.Logf("dead letter: class %s, outbox id %s, message %s", class, oid, msg)
			if class != "schema_rejected" || oid != badID || !strings.Contains(msg, "Schema being registered is incompatible with an earlier schema for subject") {
				t.Errorf("dead letter class %q outbox id %q message %q; want schema_rejected for %s with the registry's message", class, oid, msg, badID)
			}
			recs := f.broker.ReadAll(t, []string{good}, 1, 30*time.Second)
			if id, _ := header(recs[0], "id"); id != goodID {
				t.Errorf("record on %s is row %s, want %s", good, id, goodID)
			}
			f.waitCaughtUp(t, 15*time.Second)
			if err := run.stop(); err != nil {
				t.Fatalf("relay: %v", err)
			}
		})
	}
}

// Item 3 (converter.value.avro.schema registry): the payload's JSON is
// encoded with the nested record schema registered for the subject. A
// matching payload lands as typed Avro (python3-avro decodes it, with the
// registry's schema for the id, equal to the JSON); a payload missing a
// required nested field is a payload_invalid dead letter naming
// address.city; a payload with a field the schema lacks lands without it
// (Avro's rule: a field only the writer's data has is ignored).
func TestAvroPayloadEncodedWithRegistrySchema(t *testing.T) {
	const topic = "outbox.event.order"
	const schema = `{"type":"record","name":"Order","namespace":"shop","fields":[` +
		`{"name":"id","type":"string"},` +
		`{"name":"address","type":{"type":"record","name":"Address","fields":[{"name":"street","type":"string"},{"name":"city","type":"string"}]}},` +
		`{"name":"items","type":{"type":"array","items":{"type":"record","name":"Item","fields":[{"name":"sku","type":"string"},{"name":"qty","type":"int"}]}}},` +
		`{"name":"note","type":["null","string"],"default":null}]}`
	reg := testenv.Registry(t)
	id, _ := reg.Register(topic+"-value", schema)
	keyID, _ := reg.Register(topic+"-key", `"string"`)
	f := newFixture(t, func(c *config.Config) {
		c.Converter.Value, c.Converter.ValueRegistryURL, c.Converter.ValueAvroSchema = "avro", reg.URL(), "registry"
		// The key (aggregateid, a text column) too: as a JSON string,
		// encoded with the key subject's "string" schema.
		c.Converter.Key, c.Converter.KeyRegistryURL, c.Converter.KeyAvroSchema = "avro", reg.URL(), "registry"
	})
	run := f.start(t)
	match := `{"id": "o-1", "address": {"street": "1 Main St", "city": "Lyon"}, "items": [{"sku": "A", "qty": 2}, {"sku": "B", "qty": 1}], "note": "gift"}`
	missing := `{"id": "o-2", "address": {"street": "2 Main St"}, "items": []}`
	extra := `{"id": "o-3", "address": {"street": "3 Main St", "city": "Nice", "zip": "06000"}, "items": [], "coupon": "X"}`
	matchID, _ := insertRow(t, f.dsn, "order", "o-1", match)
	missingID, _ := insertRow(t, f.dsn, "order", "o-2", missing)
	extraID, _ := insertRow(t, f.dsn, "order", "o-3", extra)

	recs := f.broker.ReadAll(t, []string{topic}, 2, 30*time.Second)
	values, ids := decodeAll(t, reg, recs, false)
	if len(ids) != 1 || !ids[uint32(id)] {
		t.Errorf("value ids %v, want the registered schema's %d", ids, id)
	}
	keys, kids := decodeAll(t, reg, recs, true)
	if len(kids) != 1 || !kids[uint32(keyID)] {
		t.Errorf("key ids %v, want the registered key schema's %d", kids, keyID)
	}
	for i, rec := range recs {
		if rid, _ := header(rec, "id"); (rid == matchID && keys[i] != "o-1") || (rid == extraID && keys[i] != "o-3") {
			t.Errorf("row %s: key decoded to %#v", rid, keys[i])
		}
	}
	want := map[string]string{
		matchID: match,
		// address.zip and coupon are not in the schema: dropped; note
		// absent: its default.
		extraID: `{"id": "o-3", "address": {"street": "3 Main St", "city": "Nice"}, "items": [], "note": null}`,
	}
	for i, rec := range recs {
		rid, _ := header(rec, "id")
		got, _ := json.Marshal(values[i])
		var g, w any
		_ = json.Unmarshal(got, &g)
		if err := json.Unmarshal([]byte(want[rid]), &w); err != nil {
			t.Fatalf("record %d: row %s is not one of the rows expected on %s", i, rid, topic)
		}
		if fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("row %s decoded to %s, want %s", rid, got, want[rid])
		}
	}
	dl := f.broker.ReadAll(t, []string{f.cfg.Relay.DeadLetterTopic}, 1, 30*time.Second)
	class, _ := header(dl[0], deadletter.HeaderErrorClass)
	msg, _ := header(dl[0], deadletter.HeaderErrorMessage)
	oid, _ := header(dl[0], deadletter.HeaderOutboxID)
	t.Logf("dead letter: class %s, outbox id %s, message %s", class, oid, msg)
	if class != "payload_invalid" || oid != missingID || !strings.Contains(msg, "address.city") {
		t.Errorf("dead letter class %q outbox id %q message %q; want payload_invalid for %s naming address.city", class, oid, msg, missingID)
	}
	f.waitCaughtUp(t, 15*time.Second)
	if err := run.stop(); err != nil {
		t.Fatalf("relay: %v", err)
	}
}

// avroWriter inserts rows, one per transaction, until halted: on the warm
// topic only, then (once cold is set) alternately on the warm and the cold
// one, keys k0..k3; it records what it committed in commit order.
type avroWriter struct {
	mu   sync.Mutex
	rows []writtenRow
	cold atomic.Bool
	stop chan struct{}
	done chan struct{}
}

type writtenRow struct{ id, typ, key string }

func startAvroWriter(t *testing.T, dsn string) *avroWriter {
	w := &avroWriter{stop: make(chan struct{}), done: make(chan struct{})}
	conn := testenv.Connect(t, dsn)
	go func() {
		defer close(w.done)
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			typ := "warm"
			if w.cold.Load() && i%2 == 1 {
				typ = "cold"
			}
			key := fmt.Sprintf("k%d", i%4)
			var id string
			if err := conn.QueryRow(context.Background(), `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ($1, $2, 'T', jsonb_build_object('i', $3::int)) RETURNING id::text`,
				typ, key, i).Scan(&id); err != nil {
				t.Errorf("writer: %v", err)
				return
			}
			w.mu.Lock()
			w.rows = append(w.rows, writtenRow{id, typ, key})
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *avroWriter) halt() []writtenRow {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]writtenRow(nil), w.rows...)
}

// consumed reads topics from the start until n records arrived or
// timeout, and returns each partition's record ids in offset order.
func consumed(t *testing.T, b *testenv.Broker, topics []string, n int, timeout time.Duration) (ids map[string][]string, total int) {
	t.Helper()
	cl := b.Client(t, kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	ids = map[string][]string{}
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	for total < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			id, _ := header(r, "id")
			p := fmt.Sprintf("%s/%d", r.Topic, r.Partition)
			ids[p] = append(ids[p], id)
			total++
		})
	}
	return ids, total
}

// A registry down for 30 s under load (a writer inserting continuously)
// is backpressure, never a loss or a dead letter: while the schemas the
// rows need are cached the stream goes on (warm cache); the first row
// that needs the registry (a new topic's subject) makes the stream wait,
// walrelay_schema_registry_waiting 1, the slot's confirmed_flush_lsn
// short of that row's transaction; the session is kept alive past
// wal_sender_timeout (10 s here: reconnects_total stays 0); once the
// registry is up every row is on Kafka in commit order per key,
// waiting is 0 and the dead-letter topic is empty.
func TestAvroRegistryDownUnderLoad(t *testing.T) {
	reg := testenv.Registry(t)
	f := fixtureOnCluster(t, map[string]string{"wal_sender_timeout": "10s"}, avroConfig(reg))
	f.createProbe(t)
	run := f.start(t)
	const warm, cold = "outbox.event.warm", "outbox.event.cold"
	insertRow(t, f.dsn, "warm", "k0", `{"first": true}`)
	f.broker.ReadAll(t, []string{warm}, 1, 30*time.Second) // the warm topic's schemas are cached

	w := startAvroWriter(t, f.dsn)
	reg.Down()
	downAt := time.Now()
	_, before := consumed(t, f.broker, []string{warm}, 1<<30, 3*time.Second)
	_, after := consumed(t, f.broker, []string{warm}, 1<<30, 2*time.Second)
	t.Logf("registry down: %d then %d records on %s (warm cache)", before, after, warm)
	if after <= before {
		t.Errorf("with the registry down and the schemas cached, %s did not grow (%d then %d records)", warm, before, after)
	}
	_, coldXid := insertRow(t, f.dsn, "cold", "c0", `{"cold": true}`)
	w.cold.Store(true)
	coldEnd := f.txEnd(t, coldXid)
	sawWaiting, sawNotReady := false, ""
	for time.Since(downAt) < 30*time.Second {
		if gauge(t, f.reg, "walrelay_schema_registry_waiting") == 1 {
			sawWaiting = true
		}
		if st := run.relay.Status(t.Context()); st.SchemaRegistryWaiting != nil && *st.SchemaRegistryWaiting && !st.Ready {
			sawNotReady = st.NotReadyReason
		}
		if confirmed, _ := f.slot(t); confirmed >= coldEnd {
			t.Fatalf("confirmed_flush_lsn %s passed the end %s of the row waiting for the registry", confirmed, coldEnd)
		}
		if run.exited() {
			t.Fatalf("the relay stopped while the registry was down: %v", run.err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	reg.Up()
	time.Sleep(2 * time.Second) // load goes on with the registry back
	rows := w.halt()
	topics := []string{warm, cold}
	got, total := consumed(t, f.broker, topics, len(rows)+2, 60*time.Second) // + the first warm and the cold row
	seen := map[string]bool{}
	for _, ids := range got {
		for _, id := range ids {
			seen[id] = true
		}
	}
	lost := 0
	for _, r := range rows {
		if !seen[r.id] {
			lost++
		}
	}
	// Per key, the records' order in their partition is the commit order.
	pos := map[string]int{}
	for _, ids := range got {
		for i, id := range ids {
			pos[id] = i
		}
	}
	last := map[string]int{}
	disorder := 0
	for _, r := range rows {
		k := r.typ + "/" + r.key
		if p, ok := pos[r.id]; ok {
			if prev, ok := last[k]; ok && p < prev {
				disorder++
			}
			last[k] = p
		}
	}
	dl, _ := consumed(t, f.broker, []string{f.cfg.Relay.DeadLetterTopic}, 1, 2*time.Second)
	f.waitCaughtUp(t, 30*time.Second)
	waiting := gauge(t, f.reg, "walrelay_schema_registry_waiting")
	reconnects := gauge(t, f.reg, "walrelay_reconnects_total")
	t.Logf("while waiting: /status not ready: %q", sawNotReady)
	if !strings.Contains(sawNotReady, "waiting for the schema registry") {
		t.Errorf("/status while the stream waited: not ready reason %q, want it to say the relay waits for the schema registry", sawNotReady)
	}
	if st := run.relay.Status(t.Context()); st.SchemaRegistryWaiting == nil || *st.SchemaRegistryWaiting || !st.Ready {
		t.Errorf("/status after the registry is back: schema_registry_waiting %v, ready %t (%s); want false and ready", st.SchemaRegistryWaiting, st.Ready, st.NotReadyReason)
	}
	t.Logf("rows written %d (+2), records %d, lost %d, out of order %d, dead letters %d, waiting seen %t and now %v, reconnects %v",
		len(rows), total, lost, disorder, len(dl), sawWaiting, waiting, reconnects)
	if lost != 0 || disorder != 0 || len(dl) != 0 {
		t.Errorf("lost %d, out of order %d, dead-letter partitions %d: want 0, 0, 0", lost, disorder, len(dl))
	}
	if !sawWaiting || waiting != 0 {
		t.Errorf("walrelay_schema_registry_waiting: seen 1 %t, now %v; want it 1 while down and 0 after", sawWaiting, waiting)
	}
	if reconnects != 0 {
		t.Errorf("reconnects_total %v: the session was lost while the stream waited (wal_sender_timeout 10s)", reconnects)
	}
	if err := run.stop(); err != nil {
		t.Fatalf("relay: %v", err)
	}
}

// The other two ways rows reach the relay finish their Avro the same
// way: the initial snapshot's rows and the table-less outbox's logical
// messages land with the registry's ids (decoded by python3-avro with the
// schema the registry returns for them).
func TestAvroSnapshotAndMessages(t *testing.T) {
	check := func(t *testing.T, reg *testenv.SchemaRegistry, recs []*kgo.Record, wantKey string, wantValue func(string) bool) {
		t.Helper()
		keys, _ := decodeAll(t, reg, recs, true)
		values, _ := decodeAll(t, reg, recs, false)
		for i, rec := range recs {
			kid, _ := confluent(t, "key", rec.Key)
			vid, _ := confluent(t, "value", rec.Value)
			ks, _ := reg.Schema(rec.Topic+"-key", -1)
			vs, _ := reg.Schema(rec.Topic+"-value", -1)
			v, _ := values[i].(string)
			k, _ := keys[i].(string)
			if int(kid) != ks.ID || int(vid) != vs.ID || !strings.HasPrefix(k, wantKey) || !wantValue(v) {
				t.Fatalf("record %d on %s: ids %d/%d (registry %d/%d), key %#v, value %#v", i, rec.Topic, kid, vid, ks.ID, vs.ID, keys[i], values[i])
			}
		}
	}
	t.Run("initial snapshot", func(t *testing.T) {
		reg := testenv.Registry(t)
		f := snapshotFixture(t, 20, avroConfig(reg))
		run := f.start(t)
		recs := f.broker.ReadAll(t, []string{"outbox.event.snap"}, 20, 60*time.Second)
		check(t, reg, recs, "agg-", func(v string) bool { return strings.HasPrefix(v, `{"n": `) })
		if err := run.stop(); err != nil {
			t.Fatalf("relay: %v", err)
		}
	})
	t.Run("logical messages", func(t *testing.T) {
		reg := testenv.Registry(t)
		f := newFixture(t, func(c *config.Config) {
			avroConfig(reg)(c)
			withMessages(c)
		})
		run := f.start(t)
		execTx(t, f.dsn, emitEvent("m-1", "order", "A-1", 1), emitEvent("m-2", "order", "A-2", 2))
		recs := f.broker.ReadAll(t, []string{"outbox.event.order"}, 2, 30*time.Second)
		check(t, reg, recs, "A-", func(v string) bool { return strings.Contains(v, `"seq"`) })
		if err := run.stop(); err != nil {
			t.Fatalf("relay: %v", err)
		}
	})
}

// Item 3 with converter.value.avro.schema.version.column: a row encodes
// with the registry version its column names, the latest when NULL; a
// version the subject lacks is a schema_rejected dead letter (the
// registry's 404), the rows after it go on.
func TestAvroPayloadSchemaVersionColumn(t *testing.T) {
	const topic = "outbox.event.order"
	reg := testenv.Registry(t)
	v1, _ := reg.Register(topic+"-value", `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"}]}`)
	v2, _ := reg.Register(topic+"-value", `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"note","type":["null","string"],"default":null}]}`)
	f := newFixture(t, func(c *config.Config) {
		c.Converter.Value, c.Converter.ValueRegistryURL, c.Converter.ValueAvroSchema = "avro", reg.URL(), "registry"
		c.Converter.ValueAvroVersionColumn = "schema_version"
	})
	testenv.Exec(t, f.dsn, `ALTER TABLE outbox ADD COLUMN schema_version int`)
	run := f.start(t)
	insert := func(id, version string) string {
		return fmt.Sprintf(`INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, schema_version) VALUES ('%s', 'order', 'o', 'T', '{"id": "o", "note": "n"}', %s)`, id, version)
	}
	const latest, first, missing = "00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002", "00000000-0000-4000-8000-000000000003"
	execTx(t, f.dsn, insert(latest, "NULL"))
	execTx(t, f.dsn, insert(first, "1"))
	execTx(t, f.dsn, insert(missing, "9"))
	recs := f.broker.ReadAll(t, []string{topic}, 2, 30*time.Second)
	values, _ := decodeAll(t, reg, recs, false)
	want := map[string]struct {
		id    int
		value string
	}{latest: {v2, `map[id:o note:n]`}, first: {v1, `map[id:o]`}}
	for i, rec := range recs {
		rid, _ := header(rec, "id")
		id, _ := confluent(t, "value", rec.Value)
		if w := want[rid]; int(id) != w.id || fmt.Sprint(values[i]) != w.value {
			t.Errorf("row %s: id %d value %v, want id %d value %s", rid, id, values[i], w.id, w.value)
		}
	}
	dl := f.broker.ReadAll(t, []string{f.cfg.Relay.DeadLetterTopic}, 1, 30*time.Second)
	class, _ := header(dl[0], deadletter.HeaderErrorClass)
	msg, _ := header(dl[0], deadletter.HeaderErrorMessage)
	oid, _ := header(dl[0], deadletter.HeaderOutboxID)
	t.Logf("ids: v1 %d, v2 %d; dead letter: class %s, message %s", v1, v2, class, msg)
	if class != "schema_rejected" || oid != missing || !strings.Contains(msg, "404") {
		t.Errorf("dead letter class %q outbox id %q message %q; want schema_rejected for %s with the registry's 404", class, oid, msg, missing)
	}
	f.waitCaughtUp(t, 15*time.Second)
	if err := run.stop(); err != nil {
		t.Fatalf("relay: %v", err)
	}
}

// A registry that refuses walrelay's credentials (401) is waited out like
// one that is down, never a dead letter: the row waits, unconfirmed, the
// relay is not ready and says why; once the registry accepts the
// credentials (here its password changed to walrelay's), the row lands.
func TestAvroRegistryRefusingCredentialsIsWaitedOut(t *testing.T) {
	reg := testenv.Registry(t, testenv.RegistryBasicAuth("walrelay", "rotated"))
	f := newFixture(t, func(c *config.Config) {
		avroConfig(reg)(c)
		c.Converter.KeyBasicAuthSource, c.Converter.KeyBasicAuthUserInfo = "USER_INFO", "walrelay:s3cret"
		c.Converter.ValueBasicAuthSource, c.Converter.ValueBasicAuthUserInfo = "USER_INFO", "walrelay:s3cret"
	})
	f.createProbe(t)
	run := f.start(t)
	id, xid := insertRow(t, f.dsn, "order", "o-1", `{"a": 1}`)
	end := f.txEnd(t, xid)
	deadline := time.Now().Add(30 * time.Second)
	var st relay.Status
	for st = run.relay.Status(t.Context()); st.SchemaRegistryWaiting == nil || !*st.SchemaRegistryWaiting; st = run.relay.Status(t.Context()) {
		if time.Now().After(deadline) {
			t.Fatalf("the relay never waited for the registry refusing its credentials: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // several refused attempts
	if confirmed, _ := f.slot(t); confirmed >= end {
		t.Fatalf("confirmed_flush_lsn %s passed the waiting row's transaction end %s", confirmed, end)
	}
	if _, n := consumed(t, f.broker, []string{f.cfg.Relay.DeadLetterTopic, "outbox.event.order"}, 1, time.Second); n != 0 {
		t.Fatalf("%d records while the registry refused the credentials, want none (no dead letter)", n)
	}
	errs := f.logs.lines("refuses walrelay's credentials")
	t.Logf("not ready: %s; %d error log lines", st.NotReadyReason, len(errs))
	if st.Ready || len(errs) == 0 || strings.Contains(f.logs.String(), "s3cret") {
		t.Errorf("ready %t, %d log lines about the credentials, password logged %t; want not ready, logged, never the password",
			st.Ready, len(errs), strings.Contains(f.logs.String(), "s3cret"))
	}
	reg.SetBasicAuth("walrelay", "s3cret")
	recs := f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)
	if got, _ := header(recs[0], "id"); got != id {
		t.Errorf("record %s, want the row %s", got, id)
	}
	f.waitCaughtUp(t, 15*time.Second)
	if err := run.stop(); err != nil {
		t.Fatalf("relay: %v", err)
	}
}

// With exactly-once delivery too, a registry outage is a wait: the rows
// behind the one that needs the registry (a new topic's subject) are
// committed once, after it, to a read_committed consumer, with the
// registry's ids, and the slot catches up.
func TestAvroExactlyOnceRegistryOutage(t *testing.T) {
	reg := testenv.Registry(t)
	f := newFixture(t, func(c *config.Config) {
		avroConfig(reg)(c)
		exactlyOnce(c)
	})
	run := f.start(t)
	first, _ := insertRow(t, f.dsn, "order", "o-0", `{"n": 0}`)
	f.readCommitted(t, []string{"outbox.event.order"}, 1)
	reg.Down()
	want := []string{first}
	for i, typ := range []string{"order", "order", "invoice", "order", "order"} {
		id, _ := insertRow(t, f.dsn, typ, fmt.Sprint(typ, "-", i), fmt.Sprintf(`{"n": %d}`, i+1))
		want = append(want, id)
	}
	time.Sleep(5 * time.Second) // longer than the Kafka transaction loop lingers
	if _, n := consumed(t, f.broker.As(kgo.FetchIsolationLevel(kgo.ReadCommitted())), []string{"outbox.event.invoice"}, 1, time.Second); n != 0 {
		t.Fatalf("%d records on outbox.event.invoice while its schema could not be registered", n)
	}
	reg.Up()
	recs := f.readCommitted(t, []string{"outbox.event.order", "outbox.event.invoice"}, len(want))
	got, dup := ids(recs)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) || len(dup) > 0 {
		t.Errorf("read_committed consumer got %v (duplicates %v), want %v once each", got, dup, want)
	}
	values, vids := decodeAll(t, reg, recs, false)
	t.Logf("%d records committed once each; value ids %v; first value %v", len(recs), vids, values[0])
	f.waitCaughtUp(t, 30*time.Second)
	if err := run.stop(); err != nil {
		t.Fatalf("relay: %v", err)
	}
}

// With envelope placements the value is a record, so RecordNameStrategy
// and TopicRecordNameStrategy apply (schema-serializer's
// subject/RecordNameStrategy.java, TopicRecordNameStrategy.java): the
// value's schema is registered under the record's full name
// (<topic.prefix>.<schema>.<table>.<routing value>.Value, EventRouterDelegate's
// getSchemaName) or <topic>-<full name>, the record carries that subject's
// id, and it decodes (python3-avro) to the row's payload and placement.
func TestAvroRecordNameStrategies(t *testing.T) {
	for _, tc := range []struct{ strategy, subject string }{
		{"RecordNameStrategy", "srv.public.outbox.order.Value"},
		{"io.confluent.kafka.serializers.subject.TopicRecordNameStrategy", "outbox.event.order-srv.public.outbox.order.Value"},
	} {
		t.Run(tc.strategy, func(t *testing.T) {
			reg := testenv.Registry(t)
			f := newFixture(t, func(c *config.Config) {
				avroConfig(reg)(c)
				c.Router.AdditionalPlacement = "type:envelope:eventType"
				c.Converter.TopicPrefix = "srv"
				c.Converter.ValueSubjectStrategy = tc.strategy
			})
			run := f.start(t)
			id, _ := insertRow(t, f.dsn, "order", "o-1", `{"total": 12}`)
			payload := testenv.QueryValue[string](t, f.dsn, `SELECT payload::text FROM outbox WHERE id::text = $1`, id)
			recs := f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)
			vid, _ := confluent(t, "value", recs[0].Value)
			s, ok := reg.Schema(tc.subject, -1)
			if !ok {
				t.Fatalf("subject %s holds no schema: the value's schema was not registered under the strategy's subject", tc.subject)
			}
			if int(vid) != s.ID {
				t.Errorf("value id %d, want %d, the id of %s", vid, s.ID, tc.subject)
			}
			if _, ok := reg.Schema("outbox.event.order-value", -1); ok {
				t.Errorf("the value was also registered under TopicNameStrategy's outbox.event.order-value")
			}
			values, _ := decodeAll(t, reg, recs, false)
			got, _ := values[0].(map[string]any)
			if got["payload"] != payload || got["eventType"] != "T" {
				t.Errorf("decoded value %#v, want payload %q and eventType %q", values[0], payload, "T")
			}
			if err := run.stop(); err != nil {
				t.Fatalf("relay: %v", err)
			}
		})
	}
}
