package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/internal/partition"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/retention"
	"github.com/walrelay/walrelay/internal/server"
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
			log.Info("starting walrelay", "version", readBuild().Version, "postgres", config.Redact(cfg.Postgres.DSN), "slot", cfg.Postgres.Slot, "brokers", cfg.Kafka.Brokers)
			return runRelay(cmd.Context(), cfg, log)
		},
	}
	config.BindFlags(cmd.Flags())
	return cmd
}

// runRelay runs the relay (with opts: debezium takeover's), the
// partition maintainer (internal/partition) and, when http.listen is set, its
// HTTP listener.
// The listener stops when the relay does; a listener that cannot bind
// stops the relay. With exactly-once delivery the relay may start its
// pipeline again in-process (relay.Run, after a commit of unknown outcome
// or a fence): the listener, the registry and the upkeep run on, and
// /status and /readyz report the pipeline running now.
func runRelay(ctx context.Context, cfg config.Config, log *slog.Logger, opts ...relay.Option) error {
	percent, limit := gcPolicy(cfg)
	log.Debug("set Go's garbage collector", "gogc", percent, "memory_limit_bytes", limit)
	memLimit := &memoryLimit{base: limit, log: log}
	memLimit.current.Store(limit)
	if procs, set := maxProcs(cfg); set {
		log.Debug("set GOMAXPROCS", "procs", procs)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsScheduler)), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The outbox's upkeep (partitions created ahead; retention) starts once
	// the relay passed its startup checks, so a relay that cannot start
	// reports its one error alone; each logs and retries its failures and
	// stops with the relay.
	maintainer := partition.NewMaintainer(cfg, log)
	started := make(chan struct{})
	m := metrics.New(reg, readBuild().Version, cfg.Postgres.Slot)
	opts = append([]relay.Option{relay.Version(readBuild().Version), relay.OnLargeMessage(memLimit.hold), relay.AfterStartup(sync.OnceFunc(func() { close(started) }))}, opts...)
	r, err := relay.New(cfg, log, m, opts...)
	if err != nil {
		return cli.UsageError{Err: err}
	}
	if err := startupCheck(ctx, cfg, log); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	afterStartup := func(run func(context.Context) error) {
		g.Go(func() error {
			select {
			case <-started:
				return run(gctx)
			case <-gctx.Done():
				return nil
			}
		})
	}
	afterStartup(maintainer.Run)
	if cfg.HTTP.Listen != "" {
		var opts []server.Option
		if cfg.HTTP.Pprof {
			opts = append(opts, server.WithPprof())
		}
		srv := server.New(cfg.HTTP.Listen, reg, r, log, opts...)
		g.Go(func() error { return srv.Run(gctx) })
	}
	if cfg.Outbox.Retention > 0 {
		// Retention (outbox.retention): its failures are logged and
		// retried, never stopping the relay; it stops with it.
		p := retention.New(retention.FromConfig(cfg), log.With("component", "retention"), retention.MetricsOf(m))
		afterStartup(func(ctx context.Context) error { p.Run(ctx); return nil })
	}
	g.Go(func() error {
		defer cancel() // a stopped relay stops the listener
		// A failed connection reads like the operator commands' (one
		// line: the cause and the fix), not like the driver's list of
		// attempts.
		return postgres.ExplainConnectError(r.Run(gctx))
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

// gcPercent is the garbage collector's target unless GOGC is set: it lets
// the heap grow a quarter past what is live before the next collection,
// instead of Go's default of double. walrelay allocates little per event
// (records and receive buffers are reused), so collections stay rare, and
// the resident size follows the live heap: the in-flight records, the
// receive buffers holding their bytes and the producer's request.
const gcPercent = 25

// gcPolicy sets Go's garbage collector target (gcPercent) and its soft
// memory limit, 4 × relay.max_in_flight_bytes + 16 MiB (32 MiB by
// default), and returns them; -1 for one that GOGC or GOMEMLIMIT sets
// instead. The limit is a ceiling above what the caps let walrelay hold
// (the held receive buffers, copies of rows when those run out, the
// producer's request, the records, the runtime), not a target: a limit at
// the live heap makes the collector run back to back, and two collections
// in a row empty franz-go's pooled request buffer (a sync.Pool), so its
// next request allocates and grows it again. memoryLimit raises it for a
// message larger than the caps. The drains behind these choices are in
// docs/benchmarks.md, "Profile findings".
func gcPolicy(cfg config.Config) (percent int, limit int64) {
	percent, limit = -1, -1
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
		percent = gcPercent
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		limit = 4*cfg.Relay.MaxInFlightBytes + 16<<20
		debug.SetMemoryLimit(limit)
	}
	return percent, limit
}

// memoryLimit keeps Go's soft memory limit above the live heap when a
// message larger than the in-flight caps arrives: the relay holds it alone
// (nothing else in flight), but in up to three copies (the receive buffer,
// the producer's request, a dead letter), so the limit becomes at least
// base + 3 × its size. It is only raised: a process that met one such
// message may meet another. It leaves a limit GOMEMLIMIT set alone (base
// -1). hold runs on the stream's goroutine.
type memoryLimit struct {
	base    int64
	current atomic.Int64
	log     *slog.Logger
}

// hold is relay.OnLargeMessage: a message of n bytes is about to be read.
func (m *memoryLimit) hold(n int) {
	if m.base < 0 {
		return
	}
	if want := m.base + 3*int64(n); want > m.current.Load() {
		m.current.Store(want)
		debug.SetMemoryLimit(want)
		m.log.Info("raised Go's memory limit for a large message from the slot", "message_bytes", n, "memory_limit_bytes", want)
	}
}
