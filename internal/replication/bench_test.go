package replication

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

// The benchmarks below decode realistic pgoutput (proto_version 1) bytes
// for one row of the outbox table of sql/001_outbox_table.sql, built by
// hand with the wire format of Postgres's logical replication protocol
// (https://www.postgresql.org/docs/15/protocol-logicalrep-message-formats.html).

const benchRelID = 16385

// benchOutboxColumns are the outbox table's columns and type OIDs.
var benchOutboxColumns = []struct {
	name string
	oid  uint32
	key  bool
}{
	{"id", 2950, true}, // uuid
	{"aggregatetype", 1043, false},
	{"aggregateid", 1043, false},
	{"type", 1043, false},
	{"payload", 3802, false}, // jsonb
	{"created_at", 1184, false},
}

// benchPayload is a typical ~300-byte jsonb event as pgoutput sends it.
var benchPayload = `{"lines": [` + strings.Repeat(`{"qty": 2, "sku": "SKU-123", "price": 9.99}, `, 4) +
	`{"qty": 1, "sku": "SKU-9", "price": 1}], "total": 41.95, "orderId": "A-1", "customer": {"id": "C-77", "tier": "gold"}}`

// benchRowValues are the text values of one outbox row, in column order.
var benchRowValues = []string{
	"6f1c2a9e-5d0b-4c39-9a57-3d2f1b8e7c41",
	"order",
	"1234567",
	"OrderCreated",
	benchPayload,
	"2026-11-21 10:00:00.123456+00",
}

type wire []byte

func (w wire) byte1(b byte) wire     { return append(w, b) }
func (w wire) int16(v uint16) wire   { return binary.BigEndian.AppendUint16(w, v) }
func (w wire) int32(v uint32) wire   { return binary.BigEndian.AppendUint32(w, v) }
func (w wire) int64(v uint64) wire   { return binary.BigEndian.AppendUint64(w, v) }
func (w wire) cstring(s string) wire { return append(append(w, s...), 0) }

// pgTime is a timestamp as pgoutput sends it: microseconds since 2000-01-01.
func pgTime(t time.Time) uint64 {
	return uint64(t.Sub(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).Microseconds())
}

func benchRelationMsg() []byte {
	w := wire(nil).byte1('R').int32(benchRelID).cstring("public").cstring("outbox").byte1('d').int16(uint16(len(benchOutboxColumns)))
	for _, c := range benchOutboxColumns {
		var flags byte
		if c.key {
			flags = 1
		}
		w = w.byte1(flags).cstring(c.name).int32(c.oid).int32(0xFFFFFFFF) // typmod -1
	}
	return w
}

func benchInsertMsg() []byte {
	w := wire(nil).byte1('I').int32(benchRelID).byte1('N').int16(uint16(len(benchRowValues)))
	for _, v := range benchRowValues {
		w = append(w.byte1('t').int32(uint32(len(v))), v...)
	}
	return w
}

var benchCommitTime = time.Date(2026, 11, 21, 10, 0, 0, 123456000, time.UTC)

func benchBeginMsg(final pglogrepl.LSN) []byte {
	return wire(nil).byte1('B').int64(uint64(final)).int64(pgTime(benchCommitTime)).int32(7777)
}

func benchCommitMsg(commit, end pglogrepl.LSN) []byte {
	return wire(nil).byte1('C').byte1(0).int64(uint64(commit)).int64(uint64(end)).int64(pgTime(benchCommitTime))
}

// xlogData wraps a pgoutput message in a CopyData 'w' (XLogData) payload.
func xlogData(start pglogrepl.LSN, msg []byte) []byte {
	w := wire(nil).byte1(pglogrepl.XLogDataByteID).int64(uint64(start)).int64(uint64(start)).int64(pgTime(benchCommitTime))
	return append(w, msg...)
}

// TestBenchMessagesDecode keeps the hand-built bytes honest: pglogrepl and
// the stream's decoder must read back what they encode.
func TestBenchMessagesDecode(t *testing.T) {
	m, err := pglogrepl.Parse(benchRelationMsg())
	if err != nil {
		t.Fatal(err)
	}
	rel, ok := m.(*pglogrepl.RelationMessage)
	if !ok || rel.RelationID != benchRelID || rel.Namespace != "public" || rel.RelationName != "outbox" || len(rel.Columns) != len(benchOutboxColumns) {
		t.Fatalf("relation = %+v", m)
	}
	for i, c := range rel.Columns {
		if c.Name != benchOutboxColumns[i].name || c.DataType != benchOutboxColumns[i].oid || c.TypeModifier != -1 {
			t.Errorf("column %d = %+v", i, c)
		}
	}
	m, err = pglogrepl.Parse(benchInsertMsg())
	if err != nil {
		t.Fatal(err)
	}
	ins, ok := m.(*pglogrepl.InsertMessage)
	if !ok || ins.RelationID != benchRelID || len(ins.Tuple.Columns) != len(benchRowValues) {
		t.Fatalf("insert = %+v", m)
	}
	for i, c := range ins.Tuple.Columns {
		if c.DataType != pglogrepl.TupleDataTypeText || string(c.Data) != benchRowValues[i] {
			t.Errorf("insert column %d = %c %q", i, c.DataType, c.Data)
		}
	}
	m, err = pglogrepl.Parse(benchBeginMsg(0x1000))
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := m.(*pglogrepl.BeginMessage); !ok || b.FinalLSN != 0x1000 || !b.CommitTime.Equal(benchCommitTime) || b.Xid != 7777 {
		t.Fatalf("begin = %+v", m)
	}
	m, err = pglogrepl.Parse(benchCommitMsg(0x1000, 0x1030))
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := m.(*pglogrepl.CommitMessage); !ok || c.CommitLSN != 0x1000 || c.TransactionEndLSN != 0x1030 || !c.CommitTime.Equal(benchCommitTime) {
		t.Fatalf("commit = %+v", m)
	}
	var d decoder
	m, err = d.decode(benchInsertMsg())
	if err != nil {
		t.Fatal(err)
	}
	if ins, ok := m.(*pglogrepl.InsertMessage); !ok || ins.RelationID != benchRelID || len(ins.Tuple.Columns) != len(benchRowValues) {
		t.Fatalf("stream decoder insert = %+v", m)
	} else {
		for i, c := range ins.Tuple.Columns {
			if c.DataType != pglogrepl.TupleDataTypeText || string(c.Data) != benchRowValues[i] {
				t.Errorf("stream decoder insert column %d = %c %q", i, c.DataType, c.Data)
			}
		}
	}
	xld, err := pglogrepl.ParseXLogData(xlogData(0x2000, benchInsertMsg())[1:])
	if err != nil {
		t.Fatal(err)
	}
	if xld.WALStart != 0x2000 || string(xld.WALData) != string(benchInsertMsg()) {
		t.Fatalf("xlogdata = %+v", xld)
	}
}

// BenchmarkStreamDecodeInsert is the stream's own decoder on one outbox
// Insert message (the hot path; it reuses its structs).
func BenchmarkStreamDecodeInsert(b *testing.B) {
	msg := benchInsertMsg()
	var d decoder
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if _, err := d.decode(msg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamDecodeSingleRowTx decodes a whole single-row transaction
// (Begin, Insert, Commit), each in its XLogData, with the stream's decoder:
// one op is one event.
func BenchmarkStreamDecodeSingleRowTx(b *testing.B) {
	msgs := [][]byte{
		xlogData(0x2000, benchBeginMsg(0x2100)),
		xlogData(0x2000, benchInsertMsg()),
		xlogData(0x2100, benchCommitMsg(0x2100, 0x2130)),
	}
	var d decoder
	b.ReportAllocs()
	for b.Loop() {
		for _, data := range msgs {
			xld, err := pglogrepl.ParseXLogData(data[1:])
			if err != nil {
				b.Fatal(err)
			}
			if _, err := d.decode(xld.WALData); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkDecodeInsert is pglogrepl.Parse of one outbox Insert message:
// the general decoder, the baseline for BenchmarkStreamDecodeInsert.
func BenchmarkDecodeInsert(b *testing.B) {
	msg := benchInsertMsg()
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if _, err := pglogrepl.Parse(msg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeXLogDataInsert is what the stream does per row before the
// handler: the XLogData header, then the Insert message.
func BenchmarkDecodeXLogDataInsert(b *testing.B) {
	data := xlogData(0x2000, benchInsertMsg())
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		xld, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			b.Fatal(err)
		}
		if _, err := pglogrepl.Parse(xld.WALData); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeSingleRowTx decodes a whole single-row transaction
// (Begin, Insert, Commit), each in its XLogData, with pglogrepl.Parse: one
// op is one event.
func BenchmarkDecodeSingleRowTx(b *testing.B) {
	msgs := [][]byte{
		xlogData(0x2000, benchBeginMsg(0x2100)),
		xlogData(0x2000, benchInsertMsg()),
		xlogData(0x2100, benchCommitMsg(0x2100, 0x2130)),
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, data := range msgs {
			xld, err := pglogrepl.ParseXLogData(data[1:])
			if err != nil {
				b.Fatal(err)
			}
			if _, err := pglogrepl.Parse(xld.WALData); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// nopHandler accepts everything and does nothing.
type nopHandler struct{}

func (nopHandler) Begin(context.Context, *pglogrepl.BeginMessage) error       { return nil }
func (nopHandler) Relation(context.Context, *pglogrepl.RelationMessage) error { return nil }
func (nopHandler) Insert(context.Context, *pglogrepl.RelationMessage, *pglogrepl.InsertMessage, pglogrepl.LSN, *Buffer) error {
	return nil
}
func (nopHandler) Update(context.Context, *pglogrepl.RelationMessage, *pglogrepl.UpdateMessage, pglogrepl.LSN) error {
	return nil
}
func (nopHandler) Delete(context.Context, *pglogrepl.RelationMessage, *pglogrepl.DeleteMessage, pglogrepl.LSN) error {
	return nil
}
func (nopHandler) Truncate(context.Context, []*pglogrepl.RelationMessage, *pglogrepl.TruncateMessage, pglogrepl.LSN) error {
	return nil
}
func (nopHandler) Message(context.Context, *pglogrepl.LogicalDecodingMessage, pglogrepl.LSN) error {
	return nil
}
func (nopHandler) Commit(context.Context, *pglogrepl.CommitMessage) error { return nil }
func (nopHandler) SessionLost()                                           {}
func (nopHandler) SessionStreaming(context.Context) error                 { return nil }
func (nopHandler) SessionStart(context.Context, Session) error            { return nil }

// benchStream returns a Stream with handler h that has seen the outbox
// table's Relation message, ready for its Inserts to be dispatched.
func benchStream(b *testing.B, h Handler) *Stream {
	s := newStream(b, testConfig("", "bench"), h, nil, nil)
	rel, err := pglogrepl.ParseXLogData(xlogData(0x1000, benchRelationMsg())[1:])
	if err != nil {
		b.Fatal(err)
	}
	if err := s.dispatch(context.Background(), rel, nil); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkDispatchInsert is the stream's per-row work after the receive:
// XLogData header, pgoutput decode, relation lookup and the handler call
// (a no-op here; internal/relay's benchmarks cover the handler's own work).
func BenchmarkDispatchInsert(b *testing.B) {
	s := benchStream(b, nopHandler{})
	ctx := context.Background()
	data := xlogData(0x2000, benchInsertMsg())
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		xld, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			b.Fatal(err)
		}
		if err := s.dispatch(ctx, xld, nil); err != nil {
			b.Fatal(err)
		}
	}
}
