// Package faultsuite is walrelay's fault-injection suite; it holds tests
// only (see docs/reliability.md).
//
// Each scenario runs walrelay as a separate process (the binary built by
// the test from cmd/walrelay, configured with WALRELAY_* variables)
// against a real Postgres and an in-process kfake broker, while concurrent
// writers commit outbox transactions together with a ledger of what they
// committed. It injects one kind of fault (SIGKILL of the relay, the broker
// down, lost produce responses, moving partition leaders, Postgres crashed
// and restarted, the walsender terminated, poison rows, a standby taking
// over, one huge transaction), waits until the slot's confirmed_flush_lsn
// reaches the server's WAL, reads every topic back and checks it with
// internal/verify: nothing lost, nothing invented, every value its
// payload, per-key first occurrences in commit order; duplicates are
// counted and reported.
//
// Every scenario runs twice, a row each: with walrelay's default
// at-least-once delivery, and with relay.delivery=exactly_once (rows named
// "<scenario> (exactly-once)"), where the suite reads back as a
// read_committed consumer, dead-letter topic included, and duplicates fail
// the scenario. The exactly-once standby takeover freezes the active
// process (SIGSTOP) instead of killing it and requires it, continued after
// the standby took over, to be fenced and start again in-process as a
// standby. TestZombieCannotCommit looks at such a zombie closely: it
// commits nothing once fenced. commit-outcome-unknown has the broker apply
// commits whose answer the relay never gets.
//
// TestFaultSuite prints the table of results at the end and writes it as
// Markdown to $WALRELAY_FAULT_REPORT when set. WALRELAY_SOAK=1 runs longer
// scenarios and the 1,000,000-row transaction (`make soak`). The relays run
// with a 100ms status interval, except in sigkill-relay, which runs
// walrelay's default (what users run) and reports the duplicates per
// kill; WALRELAY_FAULT_SIGKILL_STATUS_INTERVAL=100ms sets it there.
package faultsuite
