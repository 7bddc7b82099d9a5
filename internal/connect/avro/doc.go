// Package avro turns the Connect schemas and values the outbox router
// builds into Avro exactly as Confluent's AvroConverter does
// (confluentinc/schema-registry avro-converter AvroConverter.java, avro-data
// AvroData.java): the schema text the converter registers, byte for byte as
// Apache Avro's Schema.toString() writes it, and the Avro binary body it
// writes after Confluent's 5-byte header (magic byte 0, big-endian schema
// id). It also names the registry subject a schema goes under
// (SubjectStrategy), as the serializer's subject name strategies do.
//
// In: *connect.Schema and Connect values (internal/connect). Out: *Schema
// (the registered text, its fingerprint, its record name) and bytes. It
// does not talk to a schema registry: the id in the header is left zero
// and the relay patches in the one internal/schemareg returns.
//
// FromConnectSchema derives the schema (an Interner hands out one *Schema
// per schema text), AppendBinary writes the body and AppendMessage the
// header with a zero id followed by the body. Names Avro refuses are
// ErrInvalidName (unless Options.ScrubInvalidNames), Connect schemas the
// outbox router never builds ErrUnsupported, values that do not fit their
// schema connect.ErrData. testdata/golden holds what Apache Avro's own
// Java code writes for the same schemas and values (testdata/README.md).
//
// docs/design/avro.md holds the research behind it: which parts of
// AvroData apply to what the EventRouter produces, and where each rule is
// in Confluent's and Apache Avro's sources.
package avro
