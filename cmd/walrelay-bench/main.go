// Command walrelay-bench measures walrelay against the physical floor
// (pg_recvlogical) on this machine: backlog drain rates and their ratio,
// live commit-to-consume latency, CPU per event and peak RSS. See
// docs/benchmarks.md and internal/bench.
//
// Exit codes: 0 every measurement succeeded; 1 a measurement or the
// environment failed (the report of what succeeded is still written);
// 2 bad usage.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// usageError marks errors in how walrelay-bench was invoked (exit status 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "walrelay-bench:", err)
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}
