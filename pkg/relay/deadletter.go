package relay

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"strconv"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Dead-letter record headers. The value is the original row as a JSON
// object (column name to value: JSON columns as JSON, bytea as "\x..." hex
// text, everything else as its Postgres text, NULL as null), so the event
// can be inspected, fixed and re-inserted.
const (
	HeaderErrorClass   = "walrelay.error.class"
	HeaderErrorMessage = "walrelay.error.message"
	HeaderLSN          = "walrelay.lsn"
	HeaderSourceTable  = "walrelay.source.table"
	HeaderOutboxID     = "walrelay.outbox.id"
	// Only on records the broker refused after routing:
	HeaderOriginalTopic = "walrelay.original.topic"
	HeaderOriginalSize  = "walrelay.original.size" // record_too_large: the value is dropped
)

const (
	oidJSON  = 114
	oidJSONB = 3802
)

// deadLetter builds the record for a row that cannot be published. Its key
// is the outbox id, so all attempts for one event share a partition.
func deadLetter(topic string, rel *pglogrepl.RelationMessage, cols []*pglogrepl.TupleDataColumn, o origin, class string, cause error) *kgo.Record {
	return &kgo.Record{
		Topic:   topic,
		Key:     []byte(o.id),
		Value:   rowJSON(rel, cols),
		Headers: errorHeaders(nil, o, class, cause),
	}
}

// deadLetterOf builds the dead-letter record for a routed record the
// broker refused. It keeps the record's key, value and headers (a value
// too large for the broker is dropped; the header walrelay.original.size
// gives its size) and adds the error headers and walrelay.original.topic.
// It copies what it keeps: the record's bytes may be in a receive buffer
// released once the record is done with.
func deadLetterOf(rec *kgo.Record, topic string, o origin, class string, cause error) *kgo.Record {
	headers := append([]kgo.RecordHeader(nil), rec.Headers...)
	for i := range headers {
		headers[i].Value = bytes.Clone(headers[i].Value)
	}
	headers = append(headers, kgo.RecordHeader{Key: HeaderOriginalTopic, Value: []byte(rec.Topic)})
	var value []byte
	if class == classRecordTooLarge {
		headers = append(headers, kgo.RecordHeader{Key: HeaderOriginalSize, Value: []byte(strconv.Itoa(len(rec.Value)))})
	} else {
		value = bytes.Clone(rec.Value)
	}
	return &kgo.Record{Topic: topic, Key: bytes.Clone(rec.Key), Value: value, Headers: errorHeaders(headers, o, class, cause)}
}

func errorHeaders(h []kgo.RecordHeader, o origin, class string, cause error) []kgo.RecordHeader {
	return append(h,
		kgo.RecordHeader{Key: HeaderErrorClass, Value: []byte(class)},
		kgo.RecordHeader{Key: HeaderErrorMessage, Value: []byte(cause.Error())},
		kgo.RecordHeader{Key: HeaderLSN, Value: []byte(o.lsn.String())},
		kgo.RecordHeader{Key: HeaderSourceTable, Value: []byte(o.table)},
		kgo.RecordHeader{Key: HeaderOutboxID, Value: []byte(o.id)},
	)
}

// rowJSON renders the row as a JSON object in column order. JSON columns
// are embedded byte for byte (encoding/json would compact them).
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
