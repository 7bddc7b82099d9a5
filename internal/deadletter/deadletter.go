// Package deadletter builds the records walrelay sends to its dead-letter
// topic for outbox rows it cannot publish as routed.
//
// In: the row (its pgoutput columns, when routing failed) or the routed
// record the broker refused, where it came from (Origin) and why (an
// error class of relay.on_error and the error). Out: a Letter that owns
// copies of every byte it needs, and from it a *kgo.Record for the
// dead-letter topic, with or without its value.
//
// It does not decide which rows are dead-lettered, produce records or
// track them: internal/relay does. docs/deadletter.md shows the record of each
// class.
package deadletter

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

// Origin identifies the outbox row behind a record, for logs and dead
// letters.
type Origin struct {
	LSN   pglogrepl.LSN // the WAL position of the row's INSERT (or the message)
	ID    string        // the outbox id ("" when the row has none)
	Table string        // schema.table, or message:<prefix> for a logical message
}

// Letter is what a dead letter is built from: the row and why it could not
// be published. Build it with FromRow or FromRefused.
type Letter struct {
	Origin Origin
	// Class is the relay.on_error class (walrelay.error.class).
	Class string
	cause error
	// topic is the topic the row was routed to; "" when routing failed.
	topic string
	// headers are the routed record's headers other than "id".
	headers []kgo.RecordHeader
	// value is the dead letter's value: the row as a JSON object when
	// routing failed, the routed value otherwise.
	value []byte
}

// ValueSize is the size in bytes of the letter's value, with or without
// which its record is built.
func (d *Letter) ValueSize() int { return len(d.value) }

// Record builds the dead letter for topic, with its value (withValue) or
// without it. Its key is the outbox id, so that every dead letter of one
// event lands on one partition of the dead-letter topic. The record shares
// d's bytes, which d owns (FromRow and FromRefused copy them).
func (d *Letter) Record(topic string, withValue bool) *kgo.Record {
	h := make([]kgo.RecordHeader, 0, 8+len(d.headers))
	h = append(h, kgo.RecordHeader{Key: HeaderEventID, Value: []byte(d.Origin.ID)})
	h = append(h, d.headers...)
	msg := d.cause.Error()
	if len(msg) > maxErrorMessage {
		msg = msg[:maxErrorMessage] + "…"
	}
	h = append(h,
		kgo.RecordHeader{Key: HeaderErrorClass, Value: []byte(d.Class)},
		kgo.RecordHeader{Key: HeaderErrorMessage, Value: []byte(msg)},
		kgo.RecordHeader{Key: HeaderLSN, Value: []byte(d.Origin.LSN.String())},
		kgo.RecordHeader{Key: HeaderSourceTable, Value: []byte(d.Origin.Table)},
		kgo.RecordHeader{Key: HeaderOutboxID, Value: []byte(d.Origin.ID)},
	)
	if d.topic != "" {
		h = append(h, kgo.RecordHeader{Key: HeaderOriginalTopic, Value: []byte(d.topic)})
	}
	h = append(h, kgo.RecordHeader{Key: HeaderOriginalSize, Value: []byte(strconv.Itoa(len(d.value)))})
	r := &kgo.Record{Topic: topic, Key: []byte(d.Origin.ID), Headers: h}
	if withValue {
		r.Value = d.value
	}
	return r
}

// FromRow is the dead letter of a row the relay did not route: its value
// is the row as a JSON object (see rowJSON). topic is the topic the row
// was routed to, "" when routing failed before one was known.
func FromRow(rel *pglogrepl.RelationMessage, cols []*pglogrepl.TupleDataColumn, o Origin, class string, cause error, topic string) *Letter {
	return &Letter{Origin: o, Class: class, cause: cause, topic: topic, value: rowJSON(rel, cols)}
}

// FromMessage is the dead letter of a logical decoding message of the
// table-less outbox the relay did not route: its value is a copy of the
// message's content as the application wrote it, and o.Table names its
// prefix ("message:<prefix>").
func FromMessage(content []byte, o Origin, class string, cause error, topic string) *Letter {
	return &Letter{Origin: o, Class: class, cause: cause, topic: topic, value: bytes.Clone(content)}
}

// FromRefused is the dead letter of a routed record the broker refused:
// copies of its value and headers, and the topic it was for. It copies at
// once: the record's bytes may be in a receive buffer the stream reads
// into again as soon as the record lets go of it, which it does when the
// refusal has been handled, long before the record of the dead letter is
// built.
func FromRefused(rec *kgo.Record, o Origin, class string, cause error) *Letter {
	d := &Letter{Origin: o, Class: class, cause: cause, topic: rec.Topic, value: bytes.Clone(rec.Value)}
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
