// Command walrelay relays transactional outbox events from Postgres to
// Kafka. See README.md for the commands and the delivery guarantee.
//
// Exit codes: 0 success or clean stop (SIGINT/SIGTERM); 1 a runtime error
// (the relay stopped; nothing unacknowledged was confirmed); 2 bad usage or
// invalid configuration.
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

// version is stamped at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// usageError marks errors in how walrelay was invoked (exit status 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "walrelay:", err)
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}
