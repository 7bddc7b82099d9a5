// Package bench is the benchmark harness behind cmd/walrelay-bench: it
// measures how fast walrelay drains an outbox backlog compared with the
// physical floor (Postgres's walsender decoding the same WAL for
// pg_recvlogical), and walrelay's latency, CPU and memory under a steady
// insert rate.
//
// In: a Config (Default is the set `make bench` runs). Out: a Report,
// printed as a table (WriteTable) and as JSON (WriteJSON).
//
// One run, all on this machine:
//
//   - Postgres: a private cluster from the local installation
//     (pkg/localpg, with checkpoints pushed out of the way), or an
//     existing server (Config.DSN). The harness works in its own schema
//     walrelay_bench, publication walrelay_bench (INSERTs only) and slots
//     walrelay_bench_floor and walrelay_bench_relay, and drops them at the
//     end.
//   - A Kafka-protocol broker: franz-go's kfake in a child process
//     (Config.BrokerCommand, normally `walrelay-bench kfake`, which calls
//     ServeKfake), so its CPU is not walrelay's; or existing brokers.
//   - walrelay: the real binary (built with `go build`, or
//     Config.WalrelayBin) run as `walrelay run` in a child process,
//     configured with WALRELAY_* variables.
//
// A backlog measurement creates both slots, then writes N outbox rows in
// one shape (single-row transactions from Config.Writers concurrent
// connections, K-row transactions, or one transaction), each shape with
// server-side generate_series and a procedure that commits per
// transaction. pg_recvlogical then drains its slot to /dev/null with
// --endpos at the backlog's end LSN; walrelay drains its slot until the
// slot's confirmed_flush_lsn reaches the same LSN, which walrelay reports
// only once the broker acknowledged every record before it. Both are timed
// from process start and from the slot becoming active (startup
// excluded). walrelay's CPU time (utime+stime of /proc/<pid>/stat) and peak
// RSS (VmHWM) are read before it is stopped; with a private cluster the
// walsender's CPU is sampled too. The broker's record count is checked
// against N. Each backlog is built once and drained Config.Repeat times by
// each consumer (each from its own slot, alternating which goes first);
// the report gives the median runs and the spread.
//
// A live measurement runs walrelay, a franz-go consumer and writers
// inserting at a paced rate (or flat out) for a warm-up and a measured
// window. Latency is commit-to-consume: the consumer's receive time minus
// the later of the record timestamp (the commit time, in milliseconds) and
// the row's insert time (in the payload, in microseconds), both at or
// before the commit, so it is an upper bound of commit-to-ack. If the
// binary exposes walrelay_end_to_end_latency_seconds on its HTTP listener,
// its quantiles over the window are reported too, with the two stages it
// splits into (walrelay_commit_read_latency_seconds and
// walrelay_produce_ack_latency_seconds) and the broker's round trips
// (walrelay_kafka_request_duration_e2e_seconds), and so is the time walrelay, the
// walsender and the local broker spent waiting for a CPU (from schedstat)
// per second they ran.
//
// Every measurement also reports the share of the machine's CPU used by
// processes outside the benchmark (from /proc/stat, minus the harness's
// process tree and the private cluster's), because a shared machine skews
// everything. With Config.ProfileDir, walrelay's /debug/pprof/profile is
// captured for each drain and live window.
//
// Every child runs in its own process group with a parent-death signal;
// Run kills them on return, timeout or cancellation.
//
// The package does not tune walrelay, does not assert on speed (the smoke
// test checks only that results are sane) and does not measure a real
// Kafka unless given one.
package bench
