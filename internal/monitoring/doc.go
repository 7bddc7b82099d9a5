// Package monitoring holds the tests of walrelay's monitoring artifacts:
// docs/metrics.md, the Grafana dashboard docs/grafana/walrelay.json, the
// Prometheus alert rules docs/prometheus/alerts.yml with their promtool
// unit tests (alerts_test.yml) and docs/runbook.md.
//
// In: those files, a real Prometheus server and promtool (Debian's
// prometheus package, installed by `make deps`), and a walrelay relay and
// HTTP listener run in-process against the test Postgres and a kfake
// broker. Out: test failures naming the query, rule or metric at fault.
//
// It has no code of its own: the metrics are defined in internal/metrics, the
// slot monitor in internal/relay and the endpoints in internal/server.
package monitoring
