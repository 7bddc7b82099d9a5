package avro

// HeaderSize is the size of Confluent's wire-format header: magic byte 0
// and the 4-byte big-endian schema id (schema-serializer
// io/confluent/kafka/serializers/schema/id/SchemaId.java, idToBytes).
const HeaderSize = 5

// Schema is an Avro schema as AvroData derives it from a Connect schema:
// immutable once built, and interned, so that one pointer stands for one
// registered text and the relay can cache the registry's id per pointer.
type Schema struct {
	text     string // Schema.toString(): what the registry stores
	fp       uint64 // fingerprint of text, for caches keyed by content
	fullName string // namespace.name of a record; "" for any other schema
	rawBytes bool   // top-level "bytes": the body is the bytes themselves (no length prefix)
}

// String returns the schema's JSON text exactly as Confluent's serializer
// registers it (AvroSchema.canonicalString, i.e. Apache Avro's
// Schema.toString()).
func (s *Schema) String() string { return s.text }

// Fingerprint returns a 64-bit hash of the schema's text.
func (s *Schema) Fingerprint() uint64 { return s.fp }

// FullName returns a record schema's full name (namespace.name), which
// RecordNameStrategy and TopicRecordNameStrategy put in the subject, and
// false for a schema that is not a record.
func (s *Schema) FullName() (string, bool) { return s.fullName, s.fullName != "" }

// RawBytes reports whether the schema is a top-level "bytes": Confluent's
// serializer then writes the bytes with no Avro length prefix
// (AbstractKafkaAvroSerializer.java, serializeImpl).
func (s *Schema) RawBytes() bool { return s.rawBytes }
