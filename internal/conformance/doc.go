// Package conformance replays Debezium's Outbox Event Router test cases
// through the real relay, against a real Postgres and kfake, and compares
// what lands on Kafka byte for byte with what Debezium and Kafka Connect
// would have sent. It is test-only: everything is in its _test.go files.
//
// In: the catalog of cases (cases_test.go), one per Java test method of
// Debezium's EventRouterTest.java and AbstractEventRouterTest.java (run by
// the Postgres connector's OutboxEventRouterIT.java), translated into
// Postgres terms (table DDL, rows, router options), plus the rows of issue
// 21's table. Each case states the Connect record Debezium's router makes
// (schemas and values, as the Java test asserts them, completed from
// EventRouterDelegate.java where the test asserts less).
//
// The expected bytes are derived in this package, independently of
// walrelay's own code: a small model of Kafka Connect (connect_test.go)
// renders the Connect records with JsonConverter (with and without
// schemas), StringConverter and SimpleHeaderConverter as Kafka's sources
// define them, and walrelay's raw format by the rules of internal/router's
// package doc. A model of Confluent's AvroConverter (avro_test.go: AvroData
// and Apache Avro's schema writer and binary encoder) renders them for the
// avro settings, whose relays register with a schema registry each
// (testenv.Registry): the expected bytes carry the id that registry holds
// for the model's exact schema text (avrocheck_test.go), and python3-avro
// decodes what landed with the registry's schema. Partitions of keyed
// records are Kafka's murmur2 over the expected key bytes
// (murmur2_test.go); timestamps are either a column's value or the
// transaction's commit time, read from a probe slot.
//
// Out: one subtest per case and converter setting
// (TestConformance/<group>/<Java method>/<setting>) that compares topic,
// key, value, headers, partition and timestamp and prints a readable diff
// (hex for bytes that are not UTF-8). Cases or settings walrelay cannot
// match carry a difference anchor of docs/debezium-conformance.md, whose
// section explains why; TestCatalog checks that every Java test has a case
// and every case is compared or points at an existing explanation.
//
// It does not check walrelay's own behaviour beyond what Debezium's tests
// assert: that is internal/router's and internal/relay's tests.
package conformance
