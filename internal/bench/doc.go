// Package bench is the benchmark harness behind cmd/walrelay-bench and
// `make bench`: it measures how fast walrelay drains an outbox backlog
// compared with the physical floor (Postgres's walsender decoding the same
// WAL for pg_recvlogical), and walrelay's latency, CPU and memory under a
// steady insert rate. docs/benchmarks.md describes the method and holds
// the results.
//
// In: a Config (Default is the set `make bench` runs). Out: a Report,
// printed as a table (WriteTable) and as JSON (WriteJSON).
//
// One run, all on this machine:
//
//   - Postgres: a private cluster from the local installation
//     (internal/localpg, with checkpoints pushed out of the way), or an
//     existing server (Config.DSN). The harness works in its own schema
//     walrelay_bench, publication walrelay_bench (INSERTs only) and slots
//     walrelay_bench_*, and drops them at the end.
//   - A Kafka-protocol broker: franz-go's kfake in a child process
//     (Config.BrokerCommand, normally `walrelay-bench kfake`, which calls
//     ServeKfake), so its CPU is not walrelay's; or existing brokers.
//   - walrelay: the real binary (built with `go build`, or
//     Config.WalrelayBin) run as `walrelay run` in a child process,
//     configured with WALRELAY_* variables.
//
// A backlog measurement creates the slots, writes N outbox rows in one
// shape, then has pg_recvlogical drain one slot to /dev/null up to the
// backlog's end LSN and walrelay drain another until the slot's
// confirmed_flush_lsn reaches that LSN (every record acknowledged by the
// broker), Config.Repeat times each, alternating which goes first. With
// Config.Deliveries walrelay drains each backlog once per repetition in
// each of its delivery modes (relay.delivery), each from its own slot, the
// drains taking turns to go first, and the report compares the modes; an
// exactly-once drain's records are counted by a read_committed consumer
// (transaction markers take offsets, aborted records are not delivered),
// and walrelay's Kafka transactions read from its /metrics. A live
// measurement runs walrelay, a franz-go consumer and writers inserting at
// a paced rate, and reports commit-to-consume latency with walrelay's own
// latency histograms. Every measurement also reports the share of the
// machine's CPU that other work used, because a shared machine skews
// everything.
//
// Every child runs in its own process group with a parent-death signal;
// Run kills them on return, timeout or cancellation.
//
// The files, by role:
//
//   - config.go: Config, Default (the `make bench` set) and Validate.
//   - workload.go: shapes, backlogs and live rates, and the parsers of
//     --backlog, --live and --delivery.
//   - harness.go: Run, the order of the measurements, and a backlog's
//     build and repetitions.
//   - env.go: starting and stopping Postgres, the broker and walrelay for
//     a run; building walrelay (BuildWalrelay).
//   - db.go: the harness's objects in Postgres, the outbox rows' SQL and
//     building a backlog.
//   - drain.go: one drain by pg_recvlogical or by walrelay (Drain), and
//     counting what a drain put on the broker (committedRecords for
//     exactly-once delivery).
//   - slotwatch.go: sampling a slot's walsender, confirmed position and
//     the walsender's CPU during a drain or live run.
//   - live.go: one live measurement: the paced writers, the consumer and
//     LiveResult.
//   - metrics.go: latency quantiles, exact and from walrelay's /metrics
//     histograms; its Kafka transactions.
//   - profile.go: CPU profiles of walrelay (--cpuprofile).
//   - broker.go: the kfake child (ServeKfake) and the harness's handle on
//     it.
//   - registry.go: the schema registry (franz-go's srfake, in the
//     harness's process) of runs with Config.Converter avro.
//   - sched.go: switching the kfake child to real-time scheduling.
//   - proc.go: child processes in their own process groups.
//   - procfs.go: readings of /proc: CPU time (ProcessCPU, SelfCPU, which
//     internal/replication's drain benchmark uses too), scheduler waits, peak
//     RSS.
//   - cpuacct.go: the share of the machine's CPU used by work outside the
//     benchmark.
//   - report.go: Report, its JSON and its table (with delivery modes
//     compared, a row per mode and the exactly_once / at_least_once
//     table).
//
// Tests sit in the file of what they test; harness_test.go runs Run end
// to end (TestSmoke, TestSmokeDeliveries) and makes the test binary the
// kfake child; report_test.go pins the table and JSON with golden files
// in testdata/ (-update rewrites them);
// produce_test.go is BenchmarkProduce (`make bench-go`), franz-go through
// walrelay's publisher to kfake without Postgres.
//
// The package does not tune walrelay, does not assert on speed (the smoke
// test checks only that results are sane) and does not measure a real
// Kafka unless given one.
package bench
