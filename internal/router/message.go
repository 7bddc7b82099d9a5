package router

import (
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/connect/avro"
)

// Column describes one column of a table as a pgoutput Relation message does.
type Column struct {
	// Name is the column name, matched exactly (case-sensitively) against the
	// configured names.
	Name string
	// TypeOID is the column's type OID; it selects how values are decoded.
	TypeOID uint32
	// TypeModifier is the type's modifier (pg_attribute.atttypmod, as the
	// Relation message carries it; -1 for none): a timestamp's precision,
	// which Debezium's Connect schema for the column depends on.
	TypeModifier int32
	// NotNull is pg_attribute.attnotnull. pgoutput does not send it: the
	// relay reads it from the catalog. Debezium's Connect schema of a
	// column is optional unless it is NOT NULL.
	NotNull bool
	// Default is the column's DEFAULT expression as pg_get_expr prints
	// it, when HasDefault; Debezium puts its value into the column's
	// Connect schema. Also read from the catalog.
	Default    string
	HasDefault bool
}

// Relation describes a table as a pgoutput Relation message does.
type Relation struct {
	ID        uint32
	Namespace string
	Name      string
	// Columns are in tuple order.
	Columns []Column
}

// RelationOf converts a pgoutput Relation message.
func RelationOf(rel *pglogrepl.RelationMessage) Relation {
	cols := make([]Column, len(rel.Columns))
	for i, c := range rel.Columns {
		cols[i] = Column{Name: c.Name, TypeOID: c.DataType, TypeModifier: c.TypeModifier}
	}
	return Relation{ID: rel.RelationID, Namespace: rel.Namespace, Name: rel.RelationName, Columns: cols}
}

// Header is one Kafka record header.
type Header struct {
	Key string
	// Value is nil when the column is NULL (a Kafka null header value).
	Value []byte
}

// Message is one routed outbox event, ready to produce. Its Key, Value and
// header values point into Buf when it was routed with Route or RouteTo, and
// into the tuple given to RouteInPlace (decoded bytea values excepted, which
// are in Buf) when it was routed with that; an envelope Value has its own
// allocation either way.
type Message struct {
	Topic string
	// Key is nil when the key column is NULL or no key column is configured.
	Key []byte
	// Value is nil for a tombstone.
	Value []byte
	// Headers hold "id" (the event id) first, then the header placements in
	// configuration order.
	Headers []Header
	// Timestamp is the record timestamp: the timestamp column when configured
	// and not NULL, else the transaction's commit time.
	Timestamp time.Time
	// Partition is meaningful only when HasPartition is true.
	Partition    int32
	HasPartition bool
	// KeyAvro and ValueAvro say how the relay completes a key or value
	// the avro converter wrote; zero for every other converter, a NULL
	// key and a tombstone.
	KeyAvro, ValueAvro AvroRef

	// Buf holds the copied bytes Key, Value and the header values point
	// into: all of them with RouteTo, only decoded bytea values with
	// RouteInPlace. Routing writes them into Buf when it has room and into
	// a new buffer, left in Buf, otherwise. A caller that keeps a message's
	// bytes after the next RouteTo or RouteInPlace into the same Message
	// moves Buf away first (sets it to nil, or to a spare buffer it owns):
	// recycling buffers that way, routing allocates nothing.
	Buf []byte
}

// AvroRef is what the relay needs to finish an Avro key or value, which
// the router cannot: the router does no I/O, and the schema id (or, for a
// schema the registry holds, the schema itself) comes from the schema
// registry.
type AvroRef struct {
	// Schema is the schema AvroData derives from the Connect schema: the
	// bytes start with Confluent's header with a zero id (avro.HeaderSize
	// bytes), which the relay overwrites with the id the registry gives
	// Schema under its subject.
	Schema *avro.Schema
	// Registry is set with converter.<side>.avro.schema: registry: the
	// bytes are the payload's JSON text, which the relay encodes with the
	// schema registered for the subject (Version, or the latest).
	Registry bool
	// Version is the registry version to encode with when Registry is set
	// (from converter.<side>.avro.schema.version.column); 0 is the latest.
	Version int32
}

// IsZero reports whether the converter is not avro (or the bytes are a
// Kafka null).
func (a AvroRef) IsZero() bool { return a.Schema == nil && !a.Registry }
