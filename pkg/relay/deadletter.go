package relay

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"strconv"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Dead-letter record headers. Every dead letter carries, in this order:
// "id" (the event id, as on a published event, so consumers that dedupe on
// it can), then the row's other routed headers when it was routed, then
// HeaderErrorClass, HeaderErrorMessage, HeaderLSN, HeaderSourceTable,
// HeaderOutboxID, HeaderOriginalTopic (only when the row was routed to a
// topic) and HeaderOriginalSize. docs/deadletter.md has the record per
// class.
const (
	HeaderEventID       = "id"
	HeaderErrorClass    = "walrelay.error.class"
	HeaderErrorMessage  = "walrelay.error.message"
	HeaderLSN           = "walrelay.lsn"
	HeaderSourceTable   = "walrelay.source.table"
	HeaderOutboxID      = "walrelay.outbox.id"
	HeaderOriginalTopic = "walrelay.original.topic"
	// HeaderOriginalSize is the size in bytes of the value the dead letter
	// was built with. A dead letter whose value is null while this is not
	// 0 had its value left out to fit the dead-letter topic.
	HeaderOriginalSize = "walrelay.original.size"
)

// maxErrorMessage bounds walrelay.error.message, so that a dead letter's
// size is the row's (plus a little), never an error's.
const maxErrorMessage = 1024

const (
	oidJSON  = 114
	oidJSONB = 3802
)

// deadLetter is what a dead letter is built from: the row and why it could
// not be published.
type deadLetter struct {
	origin origin
	class  string
	cause  error
	// topic is the topic the row was routed to; "" when routing failed.
	topic string
	// headers are the routed record's headers other than "id".
	headers []kgo.RecordHeader
	// value is the dead letter's value: the row as a JSON object when
	// routing failed, the routed value otherwise.
	value []byte
}

// record builds the dead letter for topic, with its value (withValue) or
// without it. Its key is the outbox id, so that every dead letter of one
// event lands on one partition of the dead-letter topic. The record shares
// d's bytes, which d owns (rowDeadLetter and refusedDeadLetter copy them).
func (d *deadLetter) record(topic string, withValue bool) *kgo.Record {
	h := make([]kgo.RecordHeader, 0, 8+len(d.headers))
	h = append(h, kgo.RecordHeader{Key: HeaderEventID, Value: []byte(d.origin.id)})
	h = append(h, d.headers...)
	msg := d.cause.Error()
	if len(msg) > maxErrorMessage {
		msg = msg[:maxErrorMessage] + "…"
	}
	h = append(h,
		kgo.RecordHeader{Key: HeaderErrorClass, Value: []byte(d.class)},
		kgo.RecordHeader{Key: HeaderErrorMessage, Value: []byte(msg)},
		kgo.RecordHeader{Key: HeaderLSN, Value: []byte(d.origin.lsn.String())},
		kgo.RecordHeader{Key: HeaderSourceTable, Value: []byte(d.origin.table)},
		kgo.RecordHeader{Key: HeaderOutboxID, Value: []byte(d.origin.id)},
	)
	if d.topic != "" {
		h = append(h, kgo.RecordHeader{Key: HeaderOriginalTopic, Value: []byte(d.topic)})
	}
	h = append(h, kgo.RecordHeader{Key: HeaderOriginalSize, Value: []byte(strconv.Itoa(len(d.value)))})
	r := &kgo.Record{Topic: topic, Key: []byte(d.origin.id), Headers: h}
	if withValue {
		r.Value = d.value
	}
	return r
}

// rowDeadLetter is the dead letter of a row the relay did not route.
func rowDeadLetter(rel *pglogrepl.RelationMessage, cols []*pglogrepl.TupleDataColumn, o origin, class string, cause error, topic string) *deadLetter {
	return &deadLetter{origin: o, class: class, cause: cause, topic: topic, value: rowJSON(rel, cols)}
}

// refusedDeadLetter is the dead letter of a routed record the broker
// refused: copies of its value and headers, and the topic it was for. It
// copies at once: the record's bytes may be in a receive buffer the stream
// reads into again as soon as the record lets go of it, which it does when
// the refusal has been handled, long before the dead-letter worker builds
// the record.
func refusedDeadLetter(rec *kgo.Record, o origin, class string, cause error) *deadLetter {
	d := &deadLetter{origin: o, class: class, cause: cause, topic: rec.Topic, value: bytes.Clone(rec.Value)}
	for _, h := range rec.Headers {
		if h.Key != HeaderEventID {
			d.headers = append(d.headers, kgo.RecordHeader{Key: h.Key, Value: bytes.Clone(h.Value)})
		}
	}
	return d
}

// rowJSON renders the row as a JSON object in column order: JSON columns
// as JSON (byte for byte: encoding/json would compact them), bytea as
// "\x..." hex text, NULL as null, everything else as its Postgres text, so
// the event can be inspected, fixed and re-inserted.
func rowJSON(rel *pglogrepl.RelationMessage, cols []*pglogrepl.TupleDataColumn) []byte {
	b := []byte{'{'}
	for i, c := range rel.Columns {
		if i >= len(cols) {
			break
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, c.Name)
		b = append(b, ':')
		switch col := cols[i]; {
		case col.DataType == pglogrepl.TupleDataTypeNull:
			b = append(b, "null"...)
		case col.DataType == pglogrepl.TupleDataTypeToast:
			b = appendString(b, "<unchanged toast>")
		case (c.DataType == oidJSON || c.DataType == oidJSONB) && json.Valid(col.Data):
			b = append(b, col.Data...)
		case col.DataType == pglogrepl.TupleDataTypeBinary:
			b = appendString(b, `\x`+hex.EncodeToString(col.Data))
		default:
			b = appendString(b, string(col.Data))
		}
	}
	return append(b, '}')
}

func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}
