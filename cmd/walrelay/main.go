// Command walrelay relays transactional outbox events from Postgres to
// Kafka. See docs/cli.md for the commands and docs/delivery.md for the
// delivery guarantee.
//
// Exit codes: 0 success or clean stop (SIGINT/SIGTERM); 1 a runtime error
// (the relay stopped; nothing unacknowledged was confirmed); 2 bad usage or
// invalid configuration.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/walrelay/walrelay/internal/cli"
)

// version, when stamped at build time (-ldflags "-X main.version=v1.2.3"),
// replaces the module version of the build info (see readBuild).
var version = ""

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(cli.ExitCode("walrelay", err, os.Stderr))
}
