package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/pkg/config"
	"github.com/walrelay/walrelay/pkg/metrics"
	"github.com/walrelay/walrelay/pkg/relay"
	"github.com/walrelay/walrelay/pkg/server"
)

func runCommand(stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Relay outbox events until SIGINT or SIGTERM",
		Long: `Streams the outbox publication from the replication slot to Kafka.
On SIGINT/SIGTERM it stops reading, waits up to relay.shutdown_timeout for
in-flight records to be acknowledged, confirms them to Postgres and exits 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd.Flags())
			if err != nil {
				return err
			}
			log := newLogger(cfg.Log, stderr)
			log.Info("starting walrelay", "version", version, "postgres", config.Redact(cfg.Postgres.DSN), "slot", cfg.Postgres.Slot, "brokers", cfg.Kafka.Brokers)
			return runRelay(cmd.Context(), cfg, log)
		},
	}
	config.BindFlags(cmd.Flags())
	return cmd
}

// runRelay runs the relay and, when http.listen is set, its HTTP listener.
// The listener stops when the relay does; a listener that cannot bind
// stops the relay.
func runRelay(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	if limit, set := memoryLimit(cfg); set {
		log.Debug("set Go's soft memory limit", "bytes", limit)
	}
	if procs, set := maxProcs(cfg); set {
		log.Debug("set GOMAXPROCS", "procs", procs)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsScheduler)), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r, err := relay.New(cfg, log, metrics.New(reg, version, cfg.Postgres.Slot))
	if err != nil {
		return cli.UsageError{Err: err}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	if cfg.HTTP.Listen != "" {
		var opts []server.Option
		if cfg.HTTP.Pprof {
			opts = append(opts, server.WithPprof())
		}
		srv := server.New(cfg.HTTP.Listen, reg, r, log, opts...)
		g.Go(func() error { return srv.Run(gctx) })
	}
	g.Go(func() error {
		defer cancel() // a stopped relay stops the listener
		return r.Run(gctx)
	})
	return g.Wait()
}

// maxProcs sets how many CPUs run walrelay's Go code at once
// (relay.max_procs). The relay is a pipeline of small steps on a few
// goroutines (the stream, franz-go's producer and its promises): with one
// CPU each hand-off is a goroutine switch on the same thread instead of a
// wake-up of another, and the walsender feeding the slot, one process
// spending more CPU per event than walrelay does, is the limit either way.
// GOMAXPROCS, when set, wins; 0 keeps Go's default (the CPUs available).
func maxProcs(cfg config.Config) (int, bool) {
	if os.Getenv("GOMAXPROCS") != "" || cfg.Relay.MaxProcs <= 0 {
		return 0, false
	}
	runtime.GOMAXPROCS(cfg.Relay.MaxProcs)
	return cfg.Relay.MaxProcs, true
}

// memoryLimit sets Go's soft memory limit from the in-flight cap, which
// bounds what walrelay holds: twice relay.max_in_flight_bytes (records and
// the producer's batches built from them) plus 8 MiB for everything else.
// Without it, the heap's growth target lets a brief peak double the
// resident size. GOMEMLIMIT, when set, wins. Past the limit the runtime
// only spends more CPU on GC (capped at half), it never fails.
func memoryLimit(cfg config.Config) (int64, bool) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0, false
	}
	limit := 2*cfg.Relay.MaxInFlightBytes + 8<<20
	debug.SetMemoryLimit(limit)
	return limit, true
}
