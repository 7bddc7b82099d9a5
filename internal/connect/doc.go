// Package connect models the part of Kafka Connect's data API walrelay
// needs (schemas, structs, arrays, maps, the Timestamp logical type) and
// turns it into record bytes exactly as Kafka Connect's converters do, so
// that what walrelay publishes is byte for byte what a Debezium connector
// with the same converters publishes:
//
//   - JSONConverter: org.apache.kafka.connect.json.JsonConverter, with and
//     without the schema envelope;
//   - StringConverter, ByteArrayConverter: Kafka's
//     org.apache.kafka.connect.storage.StringConverter and
//     org.apache.kafka.connect.converters.ByteArrayConverter;
//   - BinaryDataConverter: Debezium's io.debezium.converters.BinaryDataConverter;
//   - SimpleHeaderConverter: Kafka's default header converter
//     (org.apache.kafka.connect.storage.SimpleHeaderConverter, with the
//     rules of Values.convertToString);
//   - ExpandJSON: Debezium's outbox JsonSchemaData
//     (table.expand.json.payload), inferring a schema from JSON text and
//     building the value.
//
// FormatDouble and FormatFloat are Java's Double.toString and
// Float.toString, which decide how Connect writes floating-point numbers.
//
// Values are Go values: nil, bool, int8, int16, int32, int64, float32,
// float64, string, []byte, []any (ARRAY), Map (MAP, ordered), *Struct
// (STRUCT) and time.Time (the Timestamp logical type). A nil []byte or
// slice result means a Kafka null (no bytes at all); an empty non-nil
// slice is an empty value.
//
// Where Connect's output is not reproducible (it depends on a JVM object
// identity or a java.util.HashMap's order) or a part of Connect is not
// implemented, the package returns an error (ErrUnreproducible,
// ErrUnsupported) instead of bytes that could differ. Errors for data that
// Connect itself refuses wrap ErrData and carry Connect's message;
// ExpandJSON's ErrNotExpanded says Debezium would keep the payload string.
//
// Sources (apache/kafka at 1eb7644349cb07139d6a3c1ad1986979647cac99,
// debezium/debezium at aad5519902997a3627fe296f77ea6d3452e9acce) are cited
// in each file. The package imports no walrelay package.
package connect
