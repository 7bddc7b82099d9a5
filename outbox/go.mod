// The application library that writes outbox events (rows or logical
// decoding messages) in the application's own transaction. Its own module,
// as franz-go keeps its plugins, so that an application importing it gets
// pgx and nothing of the daemon (cobra, testcontainers, Prometheus). The go
// line and pgx version are the lowest this library builds and is tested
// with (make test builds and tests it in this module on its own).
module github.com/walrelay/walrelay/outbox

go 1.23.0

require github.com/jackc/pgx/v5 v5.7.6 // the driver the application already uses: Exec on its pgx.Tx

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	golang.org/x/crypto v0.37.0 // indirect
	golang.org/x/text v0.24.0 // indirect
)
