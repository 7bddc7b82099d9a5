package relay

import (
	"encoding/hex"
	"encoding/json"
	"fmt"

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
)

const (
	oidJSON  = 114
	oidJSONB = 3802
)

// deadLetter builds the record for a row that cannot be published. Its key
// is the outbox id, so all attempts for one event share a partition.
func deadLetter(topic string, rel *pglogrepl.RelationMessage, cols []*pglogrepl.TupleDataColumn, lsn pglogrepl.LSN, id, class string, cause error) (*kgo.Record, error) {
	row := make(map[string]any, len(rel.Columns))
	for i, c := range rel.Columns {
		if i >= len(cols) {
			break
		}
		switch col := cols[i]; {
		case col.DataType == pglogrepl.TupleDataTypeNull:
			row[c.Name] = nil
		case col.DataType == pglogrepl.TupleDataTypeToast:
			row[c.Name] = "<unchanged toast>"
		case (c.DataType == oidJSON || c.DataType == oidJSONB) && json.Valid(col.Data):
			row[c.Name] = json.RawMessage(col.Data)
		case col.DataType == pglogrepl.TupleDataTypeBinary:
			row[c.Name] = `\x` + hex.EncodeToString(col.Data)
		default:
			row[c.Name] = string(col.Data)
		}
	}
	value, err := json.Marshal(row)
	if err != nil {
		return nil, fmt.Errorf("encoding row: %w", err)
	}
	return &kgo.Record{
		Topic: topic,
		Key:   []byte(id),
		Value: value,
		Headers: []kgo.RecordHeader{
			{Key: HeaderErrorClass, Value: []byte(class)},
			{Key: HeaderErrorMessage, Value: []byte(cause.Error())},
			{Key: HeaderLSN, Value: []byte(lsn.String())},
			{Key: HeaderSourceTable, Value: []byte(rel.Namespace + "." + rel.RelationName)},
			{Key: HeaderOutboxID, Value: []byte(id)},
		},
	}, nil
}
