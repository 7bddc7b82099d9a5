package relay

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/checkpoint"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/internal/router"
)

// The benchmarks below cover the relay's per-row work that needs no
// network: routing a decoded outbox row, building the franz-go record and
// tracking it in the checkpoint. Producing (franz-go, the broker) is
// measured end to end by cmd/walrelay-bench.

// benchRel is the outbox table of sql/001_outbox_table.sql as a pgoutput
// Relation message.
var benchRel = &pglogrepl.RelationMessage{
	RelationID:   16385,
	Namespace:    "public",
	RelationName: "outbox",
	Columns: []*pglogrepl.RelationMessageColumn{
		{Name: "id", DataType: 2950, TypeModifier: -1, Flags: 1},
		{Name: "aggregatetype", DataType: 1043, TypeModifier: -1},
		{Name: "aggregateid", DataType: 1043, TypeModifier: -1},
		{Name: "type", DataType: 1043, TypeModifier: -1},
		{Name: "payload", DataType: 3802, TypeModifier: -1},
		{Name: "created_at", DataType: 1184, TypeModifier: -1},
	},
}

// benchPayload is a typical ~300-byte jsonb event as pgoutput sends it.
var benchPayload = `{"lines": [` + strings.Repeat(`{"qty": 2, "sku": "SKU-123", "price": 9.99}, `, 4) +
	`{"qty": 1, "sku": "SKU-9", "price": 1}], "total": 41.95, "orderId": "A-1", "customer": {"id": "C-77", "tier": "gold"}}`

func benchTuple() []*pglogrepl.TupleDataColumn {
	vals := []string{"6f1c2a9e-5d0b-4c39-9a57-3d2f1b8e7c41", "order", "1234567", "OrderCreated", benchPayload, "2026-11-21 10:00:00.123456+00"}
	cols := make([]*pglogrepl.TupleDataColumn, len(vals))
	for i, v := range vals {
		cols[i] = &pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeText, Length: uint32(len(v)), Data: []byte(v)}
	}
	return cols
}

var benchCommitTime = time.Date(2026, 11, 21, 10, 0, 0, 123456000, time.UTC)

func benchPlan(tb testing.TB) *router.Plan {
	tb.Helper()
	rt, err := router.New(router.DefaultConfig(), router.DefaultConverters())
	if err != nil {
		tb.Fatal(err)
	}
	plan, err := rt.Bind(router.RelationOf(benchRel))
	if err != nil {
		tb.Fatal(err)
	}
	return plan
}

func benchMessage(tb testing.TB) router.Message {
	tb.Helper()
	msg, err := benchPlan(tb).Route(benchTuple(), benchCommitTime)
	if err != nil {
		tb.Fatal(err)
	}
	return msg
}

// benchSink makes records escape to the heap as they do when handed to
// the producer.
var benchSink *outRecord

// BenchmarkRecord is routing a row into a franz-go record: "new" when no
// acknowledged record can be recycled (the record and its bytes are
// allocated), "recycled" with the record of an acknowledged row coming back
// each time, as in a steady stream.
func BenchmarkRecord(b *testing.B) {
	for _, recycle := range []bool{false, true} {
		name := map[bool]string{false: "new", true: "recycled"}[recycle]
		b.Run(name, func(b *testing.B) {
			plan := benchPlan(b)
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
				benchSink = rec
				if recycle {
					pool.put(rec)
				}
			}
		})
	}
}

// BenchmarkRecordSize is what a record counts against the in-flight bytes.
func BenchmarkRecordSize(b *testing.B) {
	msg := benchMessage(b)
	rec := new(outRecord)
	rec.set(&msg, 1, "public.outbox")
	b.ReportAllocs()
	for b.Loop() {
		if rec.bytes() == 0 {
			b.Fatal("zero size")
		}
	}
}

// BenchmarkRowPath is the handler's work for one single-row transaction
// without the producer: Begin, route the Insert into a recycled record, Add
// it to the tracker, Commit, and the Ack and recycling franz-go's callback
// would do.
func BenchmarkRowPath(b *testing.B) {
	plan := benchPlan(b)
	cols := benchTuple()
	tr := checkpoint.New(checkpoint.Limits{MaxRecords: 20000, MaxBytes: 16 << 20})
	var (
		end  pglogrepl.LSN
		msg  router.Message
		pool recordPool
	)
	b.ReportAllocs()
	for b.Loop() {
		end++
		tx := tr.BeginAt(benchCommitTime)
		rec, err := pool.route(plan, &msg, cols, benchCommitTime, end, nil)
		if err != nil {
			b.Fatal(err)
		}
		benchSink = rec
		size := rec.bytes()
		tr.Add(tx, size)
		tr.Commit(tx, end)
		tr.Ack(tx, size)
		pool.put(rec)
	}
	if tr.Confirmed() != end {
		b.Fatalf("Confirmed = %v, want %v", tr.Confirmed(), end)
	}
}

// BenchmarkRowPath100 is the same per row for 100-row transactions: one op
// is one row.
func BenchmarkRowPath100(b *testing.B) {
	plan := benchPlan(b)
	cols := benchTuple()
	tr := checkpoint.New(checkpoint.Limits{MaxRecords: 20000, MaxBytes: 16 << 20})
	var (
		end  pglogrepl.LSN
		tx   *checkpoint.Tx
		recs = make([]*outRecord, 0, 100)
		msg  router.Message
		pool recordPool
	)
	b.ReportAllocs()
	for b.Loop() {
		if tx == nil {
			tx = tr.BeginAt(benchCommitTime)
		}
		rec, err := pool.route(plan, &msg, cols, benchCommitTime, end, nil)
		if err != nil {
			b.Fatal(err)
		}
		tr.Add(tx, rec.bytes())
		recs = append(recs, rec)
		if len(recs) == cap(recs) {
			end++
			tr.Commit(tx, end)
			for _, r := range recs {
				tr.Ack(tx, r.bytes())
				pool.put(r)
			}
			tx, recs = nil, recs[:0]
		}
	}
}

// BenchmarkTxLatencies is the per-transaction and per-record work around
// the producer that BenchmarkRowPath leaves out, on the handler's and the
// promise's real code: Begin (the commit-to-read histogram), Commit, and
// the promise of the transaction's one record (its ack, the produce-to-ack
// and commit-to-ack histograms, recycling).
func BenchmarkTxLatencies(b *testing.B) {
	r := &Relay{
		tracker: checkpoint.New(checkpoint.Limits{MaxRecords: 20000, MaxBytes: 16 << 20}),
		metrics: metrics.New(prometheus.NewRegistry(), "bench", "bench"),
		clock:   newMonoClock(),
	}
	r.delivery = newAtLeastOnce(r, nil) // the promise acks; nothing is produced
	h := newHandler(r)
	plan := benchPlan(b)
	cols := benchTuple()
	published := r.metrics.Published("outbox.event.order")
	begin := &pglogrepl.BeginMessage{CommitTime: time.Now()}
	var end pglogrepl.LSN
	b.ReportAllocs()
	for b.Loop() {
		end++
		begin.FinalLSN = end
		if err := h.Begin(b.Context(), begin); err != nil {
			b.Fatal(err)
		}
		out, err := r.records.route(plan, &h.msg, cols, h.commitTime, end, nil)
		if err != nil {
			b.Fatal(err)
		}
		out.tx, out.size, out.published, out.committed = h.tx, out.bytes(), published, h.commitAt
		r.tracker.Add(out.tx, out.size)
		out.produced = r.clock.now()
		if err := h.Commit(b.Context(), &pglogrepl.CommitMessage{CommitLSN: end, TransactionEndLSN: end}); err != nil {
			b.Fatal(err)
		}
		r.onProduced(&out.rec, nil)
	}
	if r.tracker.Confirmed() != end {
		b.Fatalf("Confirmed = %v, want %v", r.tracker.Confirmed(), end)
	}
}
