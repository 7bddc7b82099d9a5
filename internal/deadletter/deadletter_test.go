package deadletter

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestRowJSON(t *testing.T) {
	rel := &pglogrepl.RelationMessage{Columns: []*pglogrepl.RelationMessageColumn{
		{Name: "id", DataType: 25}, {Name: "payload", DataType: oidJSONB}, {Name: "bad_json", DataType: oidJSON},
		{Name: "blob", DataType: 17}, {Name: "gone", DataType: 25}, {Name: "big", DataType: 25}, {Name: `q"uote`, DataType: 25},
	}}
	text := func(s string) *pglogrepl.TupleDataColumn {
		return &pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeText, Data: []byte(s)}
	}
	tests := []struct {
		name string
		cols []*pglogrepl.TupleDataColumn
		want string
	}{
		{"every kind of column",
			[]*pglogrepl.TupleDataColumn{
				text("e1"), text(`{"a":  1}`), text(`{not json`),
				{DataType: pglogrepl.TupleDataTypeBinary, Data: []byte{0xde, 0xad}},
				{DataType: pglogrepl.TupleDataTypeNull},
				{DataType: pglogrepl.TupleDataTypeToast},
				text("line\nbreak \"quoted\""),
			},
			`{"id":"e1","payload":{"a":  1},"bad_json":"{not json","blob":"\\xdead","gone":null,"big":"\u003cunchanged toast\u003e","q\"uote":"line\nbreak \"quoted\""}`},
		{"fewer columns than the relation", []*pglogrepl.TupleDataColumn{text("e2")}, `{"id":"e2"}`},
		{"no columns", nil, `{}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(rowJSON(rel, tc.cols)); got != tc.want {
				t.Errorf("rowJSON =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestRecord(t *testing.T) {
	o := Origin{LSN: 0x16B3748, ID: "e1", Table: "public.outbox"}
	refused := &kgo.Record{Topic: "outbox.event.order", Key: []byte("agg"), Value: []byte(`{"a":1}`),
		Headers: []kgo.RecordHeader{{Key: "id", Value: []byte("e1")}, {Key: "eventType", Value: []byte("created")}}}
	long := errors.New(strings.Repeat("x", maxErrorMessage+10))
	tests := []struct {
		name      string
		letter    *Letter
		withValue bool
		headers   string // key=value, in order
		value     string
	}{
		{"a refused record with its value", FromRefused(refused, o, "record_too_large", errors.New("too big")), true,
			"id=e1 eventType=created walrelay.error.class=record_too_large walrelay.error.message=too big walrelay.lsn=0/16B3748 walrelay.source.table=public.outbox walrelay.outbox.id=e1 walrelay.original.topic=outbox.event.order walrelay.original.size=7",
			`{"a":1}`},
		{"without its value, the size stays", FromRefused(refused, o, "record_too_large", errors.New("too big")), false,
			"id=e1 eventType=created walrelay.error.class=record_too_large walrelay.error.message=too big walrelay.lsn=0/16B3748 walrelay.source.table=public.outbox walrelay.outbox.id=e1 walrelay.original.topic=outbox.event.order walrelay.original.size=7",
			""},
		{"an unrouted row has no original topic", FromRow(&pglogrepl.RelationMessage{Columns: []*pglogrepl.RelationMessageColumn{{Name: "id"}}},
			[]*pglogrepl.TupleDataColumn{{DataType: pglogrepl.TupleDataTypeText, Data: []byte("e1")}}, o, "routing_value_missing", errors.New("no aggregatetype"), ""), true,
			"id=e1 walrelay.error.class=routing_value_missing walrelay.error.message=no aggregatetype walrelay.lsn=0/16B3748 walrelay.source.table=public.outbox walrelay.outbox.id=e1 walrelay.original.size=11",
			`{"id":"e1"}`},
		{"a long error message is cut", FromRefused(&kgo.Record{Topic: "t"}, o, "topic_rejected", long), true,
			"id=e1 walrelay.error.class=topic_rejected walrelay.error.message=" + strings.Repeat("x", maxErrorMessage) + "… walrelay.lsn=0/16B3748 walrelay.source.table=public.outbox walrelay.outbox.id=e1 walrelay.original.topic=t walrelay.original.size=0",
			""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.letter.Record("walrelay.dlq", tc.withValue)
			if r.Topic != "walrelay.dlq" || string(r.Key) != "e1" {
				t.Errorf("topic %q key %q, want walrelay.dlq and the outbox id", r.Topic, r.Key)
			}
			var hs []string
			for _, h := range r.Headers {
				hs = append(hs, h.Key+"="+string(h.Value))
			}
			if got := strings.Join(hs, " "); got != tc.headers {
				t.Errorf("headers\n%s\nwant\n%s", got, tc.headers)
			}
			if string(r.Value) != tc.value || (r.Value == nil) != (tc.value == "") {
				t.Errorf("value %q, want %q", r.Value, tc.value)
			}
		})
	}
}

// FromRefused keeps copies: the refused record's bytes may be overwritten
// (they can lie in a receive buffer the stream reuses) before the dead
// letter's record is built.
func TestFromRefusedCopies(t *testing.T) {
	wire := []byte("VALUE|header")
	rec := &kgo.Record{Topic: "t", Value: wire[:5], Headers: []kgo.RecordHeader{{Key: "eventType", Value: wire[6:]}}}
	d := FromRefused(rec, Origin{ID: "e1"}, "record_too_large", errors.New("too big"))
	copy(wire, "OTHER|bytes!")
	r := d.Record("dlq", true)
	if string(r.Value) != "VALUE" || string(r.Headers[1].Value) != "header" {
		t.Errorf("value %q header %q, want the refused record's VALUE and header", r.Value, r.Headers[1].Value)
	}
}

// A message's dead letter holds a copy of its content as written (the
// receive buffer is reused once the handler returns) and names the
// message's prefix as its source.
func TestFromMessageCopies(t *testing.T) {
	wire := []byte(`{"no": "id"}`)
	d := FromMessage(wire, Origin{LSN: 0x1925D10, Table: "message:outbox"}, "payload_invalid", errors.New("no id"), "")
	copy(wire, "XXXXXXXXXXXX")
	r := d.Record("dlq", true)
	if string(r.Value) != `{"no": "id"}` {
		t.Errorf("value %q, want the content as written", r.Value)
	}
	got := map[string]string{}
	for _, h := range r.Headers {
		got[h.Key] = string(h.Value)
	}
	if got[HeaderSourceTable] != "message:outbox" || got[HeaderLSN] != "0/1925D10" || got[HeaderOriginalSize] != "12" {
		t.Errorf("headers %v", got)
	}
	if _, ok := got[HeaderOriginalTopic]; ok {
		t.Errorf("unrouted message has an original topic: %v", got)
	}
}
