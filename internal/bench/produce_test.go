package bench

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/kafkaconf"
	"github.com/walrelay/walrelay/internal/publisher"
)

// BenchmarkProduce is the Kafka half of walrelay's drain without walrelay:
// b.N outbox-shaped records (topic per aggregate type, a key of 6 bytes,
// an "id" header of 36, a value of about 300) produced through walrelay's
// publisher, that is franz-go with walrelay's options and defaults
// (idempotent, acks=all, kafka.linger 5ms, no compression), to kfake in its
// own process. As in walrelay, GOMAXPROCS is 1 and at most
// relay.max_in_flight_records (2048 by default) records are in flight, each record's
// struct reused once its promise has run. There is no Postgres, routing or
// LSN tracking.
//
// Set against BenchmarkStreamDrain (internal/replication: reading the slot
// alone) and the harness's end-to-end drains, it splits walrelay's CPU per
// event three ways: reading the slot, franz-go, and walrelay's own code
// (what the end-to-end drain costs beyond the other two).
//
// One op is one record. Reported besides ns/op:
//
//   - cpu-µs/event: this process's CPU time (user and system) from the
//     first Produce to the last acknowledgement, per record; kfake's is not
//     in it;
//   - kfake-cpu-µs/event: the broker process's;
//   - events/s.
//
// Run it with a fixed count, e.g.
//
//	go test -run '^$' -bench Produce -benchtime 300000x ./internal/bench
func BenchmarkProduce(b *testing.B) {
	if testing.Short() {
		b.Skip("starts a broker process")
	}
	ctx := b.Context()
	brk, err := startBroker(ctx, []string{os.Args[0], "kfake"}, KfakeOptions{}, defaultKfakeHeapMiB(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer brk.close()
	defaults := config.Default()
	maxInFlight := defaults.Relay.MaxInFlightRecords
	// free holds the records whose promise has run: the relay's in-flight
	// cap and its record pool in one.
	free := make(chan *kgo.Record, maxInFlight)
	var failed atomic.Int64
	var firstErr atomic.Value
	done := func(r *kgo.Record, err error) {
		if err != nil && failed.Add(1) == 1 {
			firstErr.Store(err)
		}
		free <- r
	}
	k := defaults.Kafka
	k.Brokers = brk.addrs
	cfg, err := kafkaconf.PublisherConfig(k, kafkaconf.Options{})
	if err != nil {
		b.Fatal(err)
	}
	cfg.Done = done
	cfg.TopicPartitions = topicPartitions
	cfg.MaxBufferedRecords = 2*maxInFlight + 1 // as walrelay sets it
	pub, err := publisher.New(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer pub.Close()
	const topic = "outbox.event.order"
	if err := pub.Prepare(ctx, topic); err != nil {
		b.Fatal(err)
	}

	// The records' contents, built before the timer: keys as the
	// harness's rows have them ("A-" and a number under 10,000), one value
	// and one event id for all.
	keys := make([][]byte, 10000)
	for i := range keys {
		keys[i] = []byte("A-" + strconv.Itoa(i))
	}
	value := []byte(`{"order":` + strings.Repeat(`"x",`, 70) + `"y"}`)
	id := []byte("4f5c3c1e-0d2a-4b8e-9a57-3c1f0e6d2b71")
	stamp := time.Now()

	for range maxInFlight {
		free <- &kgo.Record{Topic: topic, Value: value, Headers: []kgo.RecordHeader{{Key: "id", Value: id}}}
	}

	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	kfake0 := brk.cpu()
	b.ResetTimer()
	cpu0 := SelfCPU()
	began := time.Now()
	for i := range b.N {
		r := <-free
		r.Key, r.Timestamp, r.Partition = keys[i%len(keys)], stamp, 0
		pub.Produce(r)
	}
	flushCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := pub.Flush(flushCtx); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(began)
	cpu := SelfCPU() - cpu0
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d records failed, the first with: %v", n, b.N, firstErr.Load())
	}
	events := float64(b.N)
	b.ReportMetric(cpu.Seconds()*1e6/events, "cpu-µs/event")
	b.ReportMetric(events/elapsed.Seconds(), "events/s")
	if k := brk.cpu() - kfake0; k > 0 {
		b.ReportMetric(k.Seconds()*1e6/events, "kfake-cpu-µs/event")
	}
}
