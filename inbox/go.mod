// The application library for idempotent consumers: an inbox table that
// records each consumed event id in the consumer's own transaction. Its
// own module, as franz-go keeps its plugins, so that an application
// importing it gets pgx and franz-go and nothing of the daemon (cobra,
// testcontainers, Prometheus). The go line and versions are the lowest
// this library builds and is tested with (make test builds and tests it in
// this module on its own).
module github.com/walrelay/walrelay/inbox

go 1.24.0

require (
	github.com/jackc/pgx/v5 v5.7.6 // the consumer's Postgres transaction
	github.com/twmb/franz-go v1.20.0 // the consumer's Kafka client: records, headers, commits
)

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/klauspost/compress v1.18.0 // indirect
	github.com/pierrec/lz4/v4 v4.1.22 // indirect
	github.com/twmb/franz-go/pkg/kmsg v1.12.0 // indirect
	golang.org/x/crypto v0.43.0 // indirect
	golang.org/x/text v0.30.0 // indirect
)
