package replication

import (
	"bufio"
	"context"
	"testing"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/walrelay/walrelay/internal/pgwire"
	"github.com/walrelay/walrelay/internal/router"
)

// BenchmarkIngest is the stream's work per row from the bytes a socket read
// delivers to a routed message kept until its acknowledgement, with rows in
// flight as in a drain: framing, XLogData, pgoutput decode, dispatch and
// routing. The source is a replication stream of 100-row transactions of
// the outbox row of bench_test.go, 16 MiB of it served in turn, each read
// copying what fits, as the kernel does. Each row's message is kept for
// ingestInFlight rows (the in-flight window), and its bytes are read again
// ingestSerializeAt rows after it was routed, as franz-go reads a record
// into its produce request.
//
//   - frames/in-place: the stream's frame reader; the message's bytes stay
//     in the receive buffer, which it holds (the relay's path).
//   - frames/copy: the frame reader; the bytes are copied into a recycled
//     per-row buffer (the relay's path once the stream keeps pgwire.MaxLiveBuffers).
//   - pgproto3/copy: the path before the frame reader: pgproto3's frontend
//     over a 256 KiB bufio.Reader, and the bytes copied.
//
// Producing and the broker are not in it (BenchmarkProduce in
// internal/bench covers franz-go), nor the socket.
func BenchmarkIngest(b *testing.B) {
	src := ingestStream(b)
	for _, v := range []struct {
		name         string
		frames, hold bool
	}{
		{"frames/in-place", true, true},
		{"frames/copy", true, false},
		{"pgproto3/copy", false, false},
	} {
		b.Run(v.name, func(b *testing.B) {
			h := newIngestHandler(b, v.hold)
			s := benchStream(b, h)
			ctx := context.Background()
			in := &loopReader{data: src}
			next := ingestReader(b, in, v.frames)
			b.SetBytes(int64(len(src)) / ingestRowsPerPass)
			b.ReportAllocs()
			b.ResetTimer()
			for h.rows < b.N {
				body, buf := next()
				xld, err := pglogrepl.ParseXLogData(body[1:])
				if err != nil {
					b.Fatal(err)
				}
				if err := s.dispatch(ctx, xld, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

const (
	ingestInFlight      = 4096 // relay.max_in_flight_records' default
	ingestSerializeAt   = 512  // about 5ms of rows at 100k/s (kafka.linger)
	ingestTxRows        = 100
	ingestRowsPerPass   = 16 << 20 / 700 / ingestTxRows * ingestTxRows
	ingestRequestBuffer = 1 << 20
)

// ingestStream is ingestRowsPerPass rows in 100-row transactions as the
// walsender sends them: XLogData in CopyData messages.
func ingestStream(b *testing.B) []byte {
	var out []byte
	lsn := pglogrepl.LSN(0x2000)
	ins := benchInsertMsg()
	for tx := 0; tx < ingestRowsPerPass/ingestTxRows; tx++ {
		end := lsn + ingestTxRows*0x100
		out = append(out, frameBytes('d', xlogData(lsn, benchBeginMsg(end)))...)
		for range ingestTxRows {
			out = append(out, frameBytes('d', xlogData(lsn, ins))...)
			lsn += 0x100
		}
		out = append(out, frameBytes('d', xlogData(lsn, benchCommitMsg(lsn, end)))...)
		lsn = end + 0x100
	}
	b.Logf("%d rows, %d bytes per pass", ingestRowsPerPass, len(out))
	return out
}

func frameBytes(typ byte, body []byte) []byte {
	return append(wire(nil).byte1(typ).int32(uint32(4+len(body))), body...)
}

// loopReader serves data over and over, each Read copying as much as fits.
type loopReader struct {
	data []byte
	off  int
}

func (r *loopReader) Read(p []byte) (int, error) {
	n := copy(p, r.data[r.off:])
	if r.off += n; r.off == len(r.data) {
		r.off = 0
	}
	return n, nil
}

// ingestReader returns the next CopyData body and the Buffer it is in (nil
// through pgproto3).
func ingestReader(b *testing.B, in *loopReader, frames bool) func() ([]byte, *Buffer) {
	if frames {
		f := pgwire.NewFrameReader(in, nil)
		return func() ([]byte, *Buffer) {
			typ, body, buf, err := f.Next()
			if err != nil || typ != 'd' {
				b.Fatalf("frame %q: %v", typ, err)
			}
			return body, buf
		}
	}
	fe := pgproto3.NewFrontend(bufio.NewReaderSize(in, 256<<10), nil)
	return func() ([]byte, *Buffer) {
		msg, err := fe.Receive()
		cd, ok := msg.(*pgproto3.CopyData)
		if err != nil || !ok {
			b.Fatalf("message %T: %v", msg, err)
		}
		return cd.Data, nil
	}
}

// ingestHandler routes each row and keeps it as the relay keeps a record.
type ingestHandler struct {
	nopHandler
	b    *testing.B
	plan *router.Plan
	hold bool
	msg  router.Message
	ring [ingestInFlight]ingestRecord
	free [][]byte // recycled per-row buffers
	req  []byte   // the produce request being built
	rows int
}

type ingestRecord struct {
	held           *Buffer
	buf            []byte
	key, value, id []byte
}

func newIngestHandler(b *testing.B, hold bool) *ingestHandler {
	rt, err := router.New(router.DefaultConfig(), router.DefaultConverters())
	if err != nil {
		b.Fatal(err)
	}
	rel, err := pglogrepl.Parse(benchRelationMsg())
	if err != nil {
		b.Fatal(err)
	}
	r := rel.(*pglogrepl.RelationMessage)
	cols := make([]router.Column, len(r.Columns))
	for i, c := range r.Columns {
		cols[i] = router.Column{Name: c.Name, TypeOID: c.DataType}
	}
	plan, err := rt.Bind(router.Relation{ID: r.RelationID, Namespace: r.Namespace, Name: r.RelationName, Columns: cols})
	if err != nil {
		b.Fatal(err)
	}
	return &ingestHandler{b: b, plan: plan, hold: hold, req: make([]byte, 0, ingestRequestBuffer+4096)}
}

func (h *ingestHandler) Insert(_ context.Context, _ *pglogrepl.RelationMessage, m *pglogrepl.InsertMessage, _ pglogrepl.LSN, in *Buffer) error {
	r := &h.ring[h.rows%ingestInFlight]
	if h.rows >= ingestInFlight { // the oldest is acknowledged
		if r.held != nil {
			r.held.Release()
		} else {
			h.free = append(h.free, r.buf[:0])
		}
		*r = ingestRecord{}
	}
	var err error
	if h.hold && in.Hold() {
		r.held = in
		err = h.plan.RouteInPlace(&h.msg, m.Tuple.Columns, benchCommitTime)
	} else {
		if n := len(h.free); n > 0 {
			h.msg.Buf, h.free = h.free[n-1], h.free[:n-1]
		}
		err = h.plan.RouteTo(&h.msg, m.Tuple.Columns, benchCommitTime)
		r.buf, h.msg.Buf = h.msg.Buf, nil
	}
	if err != nil {
		h.b.Fatal(err)
	}
	r.key, r.value, r.id = h.msg.Key, h.msg.Value, h.msg.Headers[0].Value
	if h.rows >= ingestSerializeAt { // one routed earlier goes into a request
		o := &h.ring[(h.rows-ingestSerializeAt)%ingestInFlight]
		h.req = append(append(append(h.req, o.key...), o.value...), o.id...)
		if len(h.req) > ingestRequestBuffer {
			h.req = h.req[:0]
		}
	}
	h.rows++
	return nil
}
