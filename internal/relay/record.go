package relay

import (
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/checkpoint"
	"github.com/walrelay/walrelay/internal/deadletter"
	"github.com/walrelay/walrelay/internal/replication"
	"github.com/walrelay/walrelay/internal/router"
)

// outRecord is one record on its way to Kafka together with everything its
// promise needs, in a single allocation: the franz-go record, up to two
// headers inline, its place in the tracker and its origin. It is also the
// record's Context, so one promise function (Relay.onProduced) serves every
// record without a closure each. franz-go only asks the Context for Done,
// which is nil: a record is never cancelled (a shutdown drains it).
//
// Its key, value and header values are where the row arrived, in the
// stream's receive buffer, which the record holds until its promise (held);
// what needed decoding (bytea) is in buf. Once the broker has acknowledged
// it, an outRecord and buf go back to a recordPool for a later row: in a
// steady stream routing a row copies and allocates nothing, which keeps the
// garbage collector (and so walrelay's CPU and memory) small at high rates.
type outRecord struct {
	rec     kgo.Record
	headers [2]kgo.RecordHeader
	held    *replication.Buffer // the receive buffer the row's bytes are in; nil: none held
	buf     []byte              // the router's bytes: what it decoded, or all of them (held is nil)
	// avroBuf holds an Avro key or value encoded from JSON with the
	// registry's schema (avro.go); kept with buf when recycled.
	avroBuf []byte

	tx        *checkpoint.Tx
	size      int
	lsn       pglogrepl.LSN
	table     string
	manual    bool          // rec.Partition was set by the router
	produced  time.Duration // Relay.clock when handed to the producer
	committed time.Duration // the transaction's commit time on Relay.clock
	published prometheus.Counter
	// dead is set on a dead letter: what it was built from, to build it
	// again without its value if it is too large.
	dead *deadLetterJob
	// pos is where the row is in its Postgres transaction, and disp what
	// its Kafka transaction makes of it (exactly-once delivery only).
	pos  rowPos
	disp disposition
}

// rowPos places a row in the WAL: its transaction (commit LSN, xid) and
// its place among the transaction's events handed on (INSERTs and
// table-less outbox messages alike, 1-based), which is what a checkpoint
// inside a transaction counts.
type rowPos struct {
	final pglogrepl.LSN
	xid   uint32
	at    time.Time // the transaction's commit time
	row   int
}

// maxPooledBuf is the largest byte buffer a recycled record keeps: rows with
// bigger payloads are rare enough that holding their buffers is not worth
// the memory.
const maxPooledBuf = 16 << 10

// recordPool recycles outRecords from acknowledged records to new rows.
type recordPool struct{ p sync.Pool }

// route routes one row into a record: one from the pool, its buffer given
// to the router for the bytes it decodes. msg is the router's reused
// Message. The row's bytes are in in: the record holds it and leaves them
// there, unless in is nil or will not be held (replication.Buffer.Hold),
// and then they are copied into the record's buffer.
func (p *recordPool) route(plan *router.Plan, msg *router.Message, cols []*pglogrepl.TupleDataColumn, commitTime time.Time, lsn pglogrepl.LSN, in *replication.Buffer) (*outRecord, error) {
	out, _ := p.p.Get().(*outRecord)
	if out == nil {
		out = new(outRecord)
	}
	msg.Buf = out.buf
	var err error
	if in != nil && in.Hold() {
		out.held = in
		err = plan.RouteInPlace(msg, cols, commitTime)
	} else {
		err = plan.RouteTo(msg, cols, commitTime)
	}
	out.buf, msg.Buf = msg.Buf, nil // the bytes are the record's now
	if err != nil {
		p.put(out)
		return nil, err
	}
	out.set(msg, lsn, plan.Table())
	return out, nil
}

// put returns a record nothing refers to any more: franz-go has called its
// promise, and the promise kept none of its bytes. The receive buffer the
// record held is released.
func (p *recordPool) put(out *outRecord) {
	out.release()
	buf, avroBuf := out.buf[:0], out.avroBuf[:0]
	if cap(buf) > maxPooledBuf {
		buf = nil
	}
	if cap(avroBuf) > maxPooledBuf {
		avroBuf = nil
	}
	*out = outRecord{buf: buf, avroBuf: avroBuf}
	p.p.Put(out)
}

// set fills out from a routed message whose bytes are in out.buf. The
// message's header slice may be reused by the router.
func (out *outRecord) set(m *router.Message, lsn pglogrepl.LSN, table string) {
	out.lsn, out.table = lsn, table
	out.rec = kgo.Record{Topic: m.Topic, Key: m.Key, Value: m.Value, Timestamp: m.Timestamp, Context: out}
	if len(m.Headers) <= len(out.headers) {
		out.rec.Headers = out.headers[:len(m.Headers):len(m.Headers)]
	} else {
		out.rec.Headers = make([]kgo.RecordHeader, len(m.Headers))
	}
	for i, hd := range m.Headers {
		out.rec.Headers[i] = kgo.RecordHeader{Key: hd.Key, Value: hd.Value}
	}
	if m.HasPartition {
		out.rec.Partition, out.manual = m.Partition, true
	}
}

// release lets go of the receive buffer the record's bytes are in, if it
// holds one: nothing may read them afterwards.
func (out *outRecord) release() {
	if out.held != nil {
		out.held.Release()
		out.held = nil
	}
}

// origin is the row behind the record, for logs and dead letters.
func (o *outRecord) origin() deadletter.Origin {
	return deadletter.Origin{LSN: o.lsn, ID: headerValue(&o.rec, deadletter.HeaderEventID), Table: o.table}
}

// size is what a record counts against relay.max_in_flight_bytes.
func (o *outRecord) bytes() int {
	n := len(o.rec.Key) + len(o.rec.Value) + len(o.rec.Topic)
	for _, h := range o.rec.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// context.Context, for franz-go; publisher.PartitionHint, for the partitioner.
func (o *outRecord) Deadline() (time.Time, bool) { return time.Time{}, false }
func (o *outRecord) Done() <-chan struct{}       { return nil }
func (o *outRecord) Err() error                  { return nil }
func (o *outRecord) Value(any) any               { return nil }
func (o *outRecord) ManualPartition() bool       { return o.manual }

// onProduced is every record's outcome (publisher.Config.Done): refused
// decides what becomes of a record Kafka did not take, and the delivery
// settles it (with exactly-once delivery the broker's ack is not yet the
// record's: its Kafka transaction must commit, and the transaction loop
// acks it then).
func (r *Relay) onProduced(rec *kgo.Record, err error) {
	out := rec.Context.(*outRecord)
	disp := dispOK
	if err != nil {
		disp = r.refused(out, err)
	}
	r.delivery.settle(out, disp, err)
}

// acked is a record on Kafka for good: acknowledged by the broker, and
// with exactly-once delivery committed. It is acked to the tracker and,
// unless it is a dead letter, recycled.
func (r *Relay) acked(out *outRecord) {
	r.tracker.Ack(out.tx, out.size)
	now := r.clock.now()
	out.published.Inc()
	r.metrics.ProduceAckLatency.Observe((now - out.produced).Seconds())
	r.metrics.EndToEndLatency.Observe((now - out.committed).Seconds())
	if out.dead == nil { // a dead letter is built for its row alone
		r.records.put(out) // neither franz-go nor the publisher touches a record after its outcome
	}
}

func headerValue(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
