package relay

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/avrojson"
	"github.com/walrelay/walrelay/internal/kafkaconf"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/internal/router"
	"github.com/walrelay/walrelay/internal/schemareg"
)

// benchConverters are the router's converters for the benchmarks below:
// raw keys and values in the value converter named.
func benchConverters(value string) router.Converters {
	c := router.DefaultConverters()
	c.Value = value
	if value == "avro" || value == "avro-registry" {
		c.Value, c.ValueRegistryURL = "avro", "http://127.0.0.1:1" // never asked: the ids and schemas are cached
	}
	if value == "avro-registry" {
		c.ValueAvroSchema = "registry"
	}
	return c
}

// benchSchema is benchPayload's schema, as registered for item 3.
const benchSchema = `{"type":"record","name":"Order","fields":[` +
	`{"name":"lines","type":{"type":"array","items":{"type":"record","name":"Line","fields":[{"name":"qty","type":"int"},{"name":"sku","type":"string"},{"name":"price","type":"double"}]}}},` +
	`{"name":"total","type":"double"},{"name":"orderId","type":"string"},` +
	`{"name":"customer","type":{"type":"record","name":"Customer","fields":[{"name":"id","type":"string"},{"name":"tier","type":"string"}]}}]}`

// avroBench is a plan routing benchTuple with the value converter named,
// and, for avro, a stage whose cache holds the value schema's id.
func avroBench(tb testing.TB, value string) (*router.Plan, *avroStage) {
	tb.Helper()
	rt, err := router.New(router.DefaultConfig(), benchConverters(value))
	if err != nil {
		tb.Fatal(err)
	}
	plan, err := rt.Bind(router.RelationOf(benchRel))
	if err != nil {
		tb.Fatal(err)
	}
	if value != "avro" && value != "avro-registry" {
		return plan, nil
	}
	side := &kafkaconf.RegistrySide{Registry: value == "avro-registry"}
	a := newAvroStage(nil, side, rt.Config(), metrics.New(prometheus.NewRegistry(), "bench", "bench").SchemaRegistry())
	var msg router.Message
	if err := plan.RouteTo(&msg, benchTuple(), benchCommitTime); err != nil {
		tb.Fatal(err)
	}
	if side.Registry {
		if !msg.ValueAvro.Registry {
			tb.Fatal("the avro converter's message is not marked avro.schema registry")
		}
		codec, err := avrojson.Compile(benchSchema)
		if err != nil {
			tb.Fatal(err)
		}
		a.schemas[avroVersionKey{topic: msg.Topic}] = avroRegistered{subject: msg.Topic + "-value",
			reg: schemareg.Registered{ID: 7, Version: 1, Text: benchSchema}, codec: codec, at: time.Now().Add(time.Hour)}
		return plan, a
	}
	if msg.ValueAvro.Schema == nil {
		tb.Fatal("the avro converter's message has no value schema")
	}
	a.ids[avroIDKey{topic: msg.Topic, schema: msg.ValueAvro.Schema}] = 7
	return plan, a
}

// A row whose schema's id is cached is finished without allocating: the
// id comes from the relay's map and is written into the header in place;
// with avro.schema registry and the schema cached, the JSON is encoded
// into the record's reused buffer.
func TestAvroCachedIDAllocatesNothing(t *testing.T) {
	for _, value := range []string{"avro", "avro-registry"} {
		t.Run(value, func(t *testing.T) {
			plan, a := avroBench(t, value)
			var (
				pool recordPool
				msg  router.Message
			)
			out, err := pool.route(plan, &msg, benchTuple(), benchCommitTime, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			json := out.rec.Value
			allocs := testing.AllocsPerRun(1000, func() {
				out.rec.Value = json // the router's bytes, as each row has them
				if err := a.finish(t.Context(), out, &msg); err != nil {
					t.Fatal(err)
				}
			})
			if id := binary.BigEndian.Uint32(out.rec.Value[1:5]); out.rec.Value[0] != 0 || id != 7 {
				t.Fatalf("value header %x, want magic 0 and the cached id 7", out.rec.Value[:5])
			}
			if allocs != 0 && !raceEnabled { // avrojson's encoders are pooled
				t.Errorf("finishing a row with a cached id allocates %v times, want 0", allocs)
			}
		})
	}
}

// BenchmarkAvroRecord is routing a row into a recycled record with the
// json and the avro value converter, the avro one finished with its
// cached id, as the stream does in a steady state.
func BenchmarkAvroRecord(b *testing.B) {
	for _, value := range []string{"json", "avro", "avro-registry"} {
		b.Run(value, func(b *testing.B) {
			plan, a := avroBench(b, value)
			cols := benchTuple()
			var (
				pool recordPool
				msg  router.Message
			)
			b.ReportAllocs()
			for b.Loop() {
				rec, err := pool.route(plan, &msg, cols, benchCommitTime, 1, nil)
				if err != nil {
					b.Fatal(err)
				}
				if a != nil {
					if err := a.finish(b.Context(), rec, &msg); err != nil {
						b.Fatal(err)
					}
				}
				benchSink = rec
				pool.put(rec)
			}
		})
	}
}
