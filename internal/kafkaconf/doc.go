// Package kafkaconf turns config.Kafka into franz-go's parts: the one
// place where the client options (seed brokers, client id, TLS, SASL, dial
// timeout, walrelay's client metrics and franz-go's log) and the
// publisher's configuration are built, so every client walrelay opens (the
// relay's producer, the exactly-once checkpoint reader, verify and its
// republisher, check, the heal's deduplication, debezium takeover) reaches
// and authenticates to the brokers the same way. It also builds the avro
// converters' schema registry clients (Registries, registry.go: one
// internal/schemareg client per distinct registry setting, TLS from the
// PEM stores, basic auth or a bearer token), for the relay and check.
//
// In: a config.Kafka (validated), and optionally a registry and a logger.
// Out: []kgo.Opt (ClientOpts) and a publisher.Config (PublisherConfig), or
// an error naming the kafka.tls.* file or the kafka.sasl.mechanism that
// cannot be used; errors never hold a password or a key.
//
// Metrics: with a registry, franz-go's kprom plugin adds
// walrelay_kafka_* (connections, requests, bytes, errors per broker, and
// the request round trip walrelay_kafka_request_duration_e2e_seconds).
//
// It does not connect, produce or read: NewClient and publisher.New do.
// cmd/walrelay's TestOneKafkaOptionsBuilder fails when another production
// package builds seed broker, TLS or SASL options.
package kafkaconf
