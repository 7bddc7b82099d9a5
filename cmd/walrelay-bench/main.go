// Command walrelay-bench measures walrelay against the physical floor
// (pg_recvlogical) on this machine: backlog drain rates and their ratio,
// live commit-to-consume latency, CPU per event and peak RSS. See
// docs/benchmarks.md and internal/bench.
//
// Exit codes: 0 every measurement succeeded; 1 a measurement or the
// environment failed (the report of what succeeded is still written);
// 2 bad usage.
//
// main.go is the entry point; root.go turns the command line into a
// bench.Config and has the `kfake` subcommand, the broker child the
// harness starts.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/walrelay/walrelay/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(cli.ExitCode("walrelay-bench", err, os.Stderr))
}
