package relay

import (
	"encoding/binary"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/kafkaconf"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/internal/router"
)

// benchConverters are the router's converters for the benchmarks below:
// raw keys and values in the value converter named.
func benchConverters(value string) router.Converters {
	c := router.DefaultConverters()
	c.Value = value
	if value == "avro" {
		c.ValueRegistryURL = "http://127.0.0.1:1" // never asked: the ids are cached
	}
	return c
}

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
	if value != "avro" {
		return plan, nil
	}
	side := &kafkaconf.RegistrySide{}
	a := newAvroStage(nil, side, rt.Config(), metrics.New(prometheus.NewRegistry(), "bench", "bench").SchemaRegistry())
	var msg router.Message
	if err := plan.RouteTo(&msg, benchTuple(), benchCommitTime); err != nil {
		tb.Fatal(err)
	}
	if msg.ValueAvro.Schema == nil {
		tb.Fatal("the avro converter's message has no value schema")
	}
	a.ids[avroIDKey{topic: msg.Topic, schema: msg.ValueAvro.Schema}] = 7
	return plan, a
}

// A row whose schema's id is cached is finished without allocating: the
// id comes from the relay's map and is written into the header in place.
func TestAvroCachedIDAllocatesNothing(t *testing.T) {
	plan, a := avroBench(t, "avro")
	var (
		pool recordPool
		msg  router.Message
	)
	out, err := pool.route(plan, &msg, benchTuple(), benchCommitTime, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if err := a.finish(t.Context(), out, &msg); err != nil {
			t.Fatal(err)
		}
	})
	if id := binary.BigEndian.Uint32(out.rec.Value[1:5]); out.rec.Value[0] != 0 || id != 7 {
		t.Fatalf("value header %x, want magic 0 and the cached id 7", out.rec.Value[:5])
	}
	if allocs != 0 {
		t.Errorf("finishing a row with a cached id allocates %v times, want 0", allocs)
	}
}

// BenchmarkAvroRecord is routing a row into a recycled record with the
// json and the avro value converter, the avro one finished with its
// cached id, as the stream does in a steady state.
func BenchmarkAvroRecord(b *testing.B) {
	for _, value := range []string{"json", "avro"} {
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
