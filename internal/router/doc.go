// Package router turns outbox-table INSERTs into Kafka records the way
// Debezium's Outbox Event Router (io.debezium.transforms.outbox.EventRouter)
// does, so that users keep their topics, keys, headers and consumers.
//
// # Role
//
// In: a [Config] holding Debezium's option names and defaults, a [Relation]
// (the pgoutput Relation message of the outbox table) and, per event, the new
// tuple of an INSERT in pgoutput text format plus the transaction's commit
// time. Out: a [Message] (topic, key, value, headers, timestamp, optional
// partition) or a [*RowError] whose [ErrorClass] says why the row cannot be
// published.
//
// [New] validates and compiles the options once. [Router.Bind] resolves the
// configured column names to tuple indices once per relation and fails with a
// [*MissingColumnError] when the table lacks a configured column. Routing a
// row is then a pure function of it: no I/O, no logging, no goroutines. Three
// methods of [Plan] route a row; they differ in where the Message's bytes
// live:
//
//   - [Plan.Route] returns a new Message holding copies of every byte, so the
//     caller may reuse the tuple's buffers at once.
//   - [Plan.RouteTo] writes into a Message the caller reuses: the key, value
//     and header values are copied into its Buf, which is kept from row to
//     row unless the caller moves it away (see Message.Buf).
//   - [Plan.RouteInPlace] is RouteTo without those copies: the key, a raw
//     payload and the header values point into the tuple's bytes, and only
//     bytea values, which it decodes, go into Buf. The caller keeps the
//     tuple's bytes unchanged for as long as it uses the Message.
//
// An envelope Value is a new allocation of its own in every case.
//
// # What it does not do
//
// It does not read the replication stream, decide what to do with UPDATE or
// DELETE messages (it only carries table.op.invalid.behavior, see
// [Router.InvalidOpBehavior]), produce to Kafka, dead-letter rows, log, or
// count metrics. Callers do that with the error class.
//
// # Debezium semantics mirrored (from EventRouterDelegate.java,
// EventRouterConfigDefinition.java and Kafka's RegexRouter.java)
//
//   - Option names and defaults: table.field.event.id=id,
//     table.field.event.key=aggregateid, table.field.event.payload=payload,
//     table.field.event.timestamp unset, route.by.field=aggregatetype,
//     route.topic.regex=(?<routedByValue>.*),
//     route.topic.replacement=outbox.event.${routedByValue},
//     route.tombstone.on.empty.payload=false, table.op.invalid.behavior=warn.
//   - Topic: the route.by.field value is the input topic of a RegexRouter. If
//     route.topic.regex matches the WHOLE value (Matcher.matches), the topic is
//     Matcher.replaceFirst(replacement): the first match (find) is replaced and
//     any text around it kept. If it does not match, the value itself is the
//     topic. The replacement uses Java syntax: $n, ${name}, and \ to escape
//     the next character; a multi-digit $nn takes digits while the group exists.
//   - Header "id" is always added first with the event id column, then
//     header placements in configuration order. A NULL id yields an "id"
//     header with a null value, as in Debezium.
//   - Key is the key column's value; NULL gives a null key.
//   - Value without envelope placements is the payload itself. With envelope
//     placements it is an object {"payload": ..., "<alias>": ...} in
//     configuration order.
//   - A payload that is NULL, or whose text is empty after Java's trim(),
//     becomes a tombstone (null value) when route.tombstone.on.empty.payload
//     is true. When it is false, an empty payload is sent as it is, and a
//     NULL payload without envelope placements is a null value anyway (Debezium
//     forwards the null payload); with envelope placements it is
//     {"payload":null,...}.
//   - table.fields.additional.placement is a comma separated list of
//     column:placement[:alias], placement one of header, envelope, partition
//     (case-insensitive); the alias defaults to the column name.
//   - A NULL timestamp column falls back to the default record timestamp; a
//     NULL partition column leaves the partition to the producer.
//
// # Converters
//
// [Converters] names what writes keys, values and header values. Raw, the
// default, is walrelay's own format:
//
//   - json and jsonb payloads are sent as the raw JSON text Postgres sent,
//     byte for byte, never re-encoded and never double-encoded as a JSON
//     string; inside an envelope they are embedded as JSON, not as a string.
//     Text payloads are sent as their UTF-8 text, bytea payloads as raw bytes
//     (base64 strings inside an envelope, as Kafka's JsonConverter does).
//   - Keys and header values are the column's Postgres text (StringConverter
//     style), raw bytes for bytea.
//
// The other converters (convert.go) reproduce Kafka Connect's: each column
// gets the Connect schema and value Debezium's Postgres connector gives it
// (debezium.go: optional unless NOT NULL, semantic names such as
// io.debezium.data.Json, the DEFAULT as PostgresDefaultValueConverter
// reads it), the record is built as EventRouterDelegate builds
// it (the payload with its column's schema, or the envelope struct named
// <topic.prefix>.<schema>.<table>.<route value>.Value with fields payload
// and the envelope placements, versioned by
// table.field.event.schema.version), and internal/connect writes the bytes.
// Column types whose Connect form walrelay does not reproduce are refused
// by Bind.
//
// The avro converter (Confluent's AvroConverter, avro.go) writes the Avro
// schema AvroData derives from that Connect schema and Confluent's wire
// format with a zero schema id, interning the schema (one *avro.Schema per
// schema text: per plan for the key and the payload column, per route
// value and version for an envelope, per row for an expanded JSON
// payload), and hands the relay the schema in Message.KeyAvro and
// ValueAvro: the router does no I/O, so the relay registers the schema and
// patches the registry's id into bytes 1-4. With avro.schema registry the
// key or value is the column's text as raw writes it, marked for the
// relay to encode with the subject's registered schema. [Router.Avro]
// gives the relay each side's registry options. A JSON key that is not an
// Avro name (without scrub.invalid.names) is a payload_invalid error
// naming it, where Connect's task would fail.
//
// # Deliberate differences from Debezium
//
//   - Debezium caches the envelope schema per payload schema (or per
//     version) for the life of its task, so every envelope carries the name
//     built from the first route value it saw; walrelay names each
//     envelope after its own row's route value.
//   - Debezium sends the __debezium.context.* headers and, with
//     OpenTelemetry present, a traceparent of a span it starts; walrelay
//     sends no context headers and forwards the row's own traceparent and
//     tracestate (tracing.go).
//   - Without table.field.event.timestamp the record timestamp is the
//     transaction's commit time, not the time the row was processed, so a
//     redelivered event carries the same timestamp. The timestamp column may be
//     timestamptz, timestamp (read as UTC) or date; Debezium rejects
//     timestamptz. A timestamp no record can carry (before 1970, which
//     Kafka's producers refuse, or after 2262-04-11T23:47:16.854Z, past
//     int64 nanoseconds, where franz-go's milliseconds would wrap) is a
//     payload_invalid error, never a wrong timestamp; Debezium's task fails
//     on the first and sends the second.
//   - An empty route.by.field value is an error (routing_value_missing), not
//     the topic "outbox.event.". A NULL one is an error too (Debezium throws).
//   - Topic names Kafka would reject are reported (topic_invalid) before
//     producing; they are never rewritten.
//   - A zero-length bytea payload counts as empty for
//     route.tombstone.on.empty.payload (Debezium only ever sees bytea as
//     non-empty because it calls toString on a buffer).
//   - The partition column may be any integer type whose value fits in int32
//     (Debezium requires int4); negative values are an error.
//   - Configuration is checked up front: unknown placements, a second partition
//     placement, an envelope alias "payload" or a repeated envelope alias, and
//     replacement references to groups the regex lacks fail in [New] instead
//     of on the first event. Placement entries and their parts may carry
//     surrounding spaces, and empty entries are ignored.
//   - route.topic.regex is compiled by Go's regexp (RE2), which accepts Java's
//     (?<name>...) groups but not look-around or backreferences; New rejects
//     such patterns.
//
// # Concurrency
//
// A Router is immutable and safe for concurrent use. A Plan caches topic names
// per route.by.field value and reuses scratch space: call its Route methods
// and EventID from one goroutine at a time (one Plan per replication stream).
package router
