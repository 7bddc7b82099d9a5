package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/internal/bench"
	"github.com/walrelay/walrelay/internal/cli"
)

// run executes the command line in args and returns what main turns into
// an exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	root := benchCommand(stdout, stderr)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cli.UsageError{Err: err} })
	root.AddCommand(kfakeCommand(stdin, stdout))
	cmd, err := root.ExecuteContextC(ctx)
	if err != nil && cmd != nil && !cmd.HasParent() && strings.Contains(err.Error(), "unknown command") {
		return cli.UsageError{Err: err}
	}
	return err
}

// benchFlags are the command line's view of bench.Config.
type benchFlags struct {
	dsn, pgBin, walrelayBin, jsonPath, backlogs, lives, logLevel string
	brokers, walrelayEnv, buildFlags                             []string
	quiet                                                        bool
}

func benchCommand(stdout, stderr io.Writer) *cobra.Command {
	cfg := bench.Default()
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "walrelay-bench",
		Short: "Measure walrelay against pg_recvlogical: drain rate, latency, CPU and memory",
		Long: `walrelay-bench starts a private Postgres (or uses --dsn) and a kfake broker in its own
process (or uses --brokers), builds walrelay (or uses --walrelay-bin), and then:

  backlogs  writes N outbox rows in a shape before any consumer runs, then times
            pg_recvlogical (the floor: the walsender decoding to /dev/null) and
            walrelay (until the slot's confirmed_flush_lsn reaches the backlog's
            end, that is every record acked by the broker) draining it;
  live      inserts at a steady rate while walrelay runs and a consumer reads,
            and reports commit-to-consume latency p50/p99/p99.9.

It prints a table on stdout and progress on stderr, and writes JSON with --json.
Without flags it runs the default set (what make bench runs, about 4 minutes on
2 cores).

Shapes: single (one row per transaction, from --writers concurrent connections),
txK (K rows per transaction, e.g. tx100), onetx (the whole backlog in one
transaction; backlogs only). Counts accept k and m suffixes; rates are events/s
or max.`,
		Example: `  walrelay-bench --json bench.json
  walrelay-bench --backlog single:50k --live none
  walrelay-bench --backlog none --live single@5000,tx10@20000,single@max --live-duration 30s
  walrelay-bench --walrelay-bin bin/walrelay --walrelay-env WALRELAY_KAFKA_LINGER=1ms
  walrelay-bench --backlog single:500k --repeat 1 --live none --cpuprofile prof && go tool pprof -top prof/*.cpu.pprof`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.apply(&cfg, stderr); err != nil {
				return cli.UsageError{Err: err}
			}
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("finding this executable to start kfake: %w", err)
			}
			cfg.BrokerCommand = []string{exe, "kfake"}
			if err := cfg.Validate(); err != nil {
				return cli.UsageError{Err: err}
			}
			report, runErr := bench.Run(cmd.Context(), cfg)
			if report == nil {
				return runErr
			}
			if err := report.WriteTable(stdout); err != nil {
				return errors.Join(runErr, fmt.Errorf("writing the table: %w", err))
			}
			if f.jsonPath != "" {
				if err := writeJSON(f.jsonPath, report); err != nil {
					return errors.Join(runErr, err)
				}
			}
			return runErr
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.dsn, "dsn", "", "existing Postgres (wal_level=logical; may create schemas, publications, slots); default: a private cluster")
	fs.BoolVar(&cfg.PGUnixSocket, "pg-unix-socket", false, "connect the writers, pg_recvlogical and walrelay to the private cluster over its Unix-domain socket instead of TCP")
	fs.StringVar(&f.pgBin, "pg-bin", "", "directory holding pg_recvlogical (default: the private cluster's, or the local installation)")
	fs.StringSliceVar(&f.brokers, "brokers", nil, "existing Kafka brokers host:port (default: kfake in its own process)")
	fs.StringVar(&f.walrelayBin, "walrelay-bin", "", "walrelay binary to measure (default: go build ./cmd/walrelay)")
	fs.StringSliceVar(&f.buildFlags, "build-flags", nil, "extra go build flags when building walrelay (comma-separated)")
	fs.StringArrayVar(&f.walrelayEnv, "walrelay-env", nil, "extra WALRELAY_NAME=value for walrelay run (repeatable)")
	fs.StringVar(&f.backlogs, "backlog", bench.FormatBacklogs(cfg.Backlogs), "backlogs as shape:N, comma-separated, or none")
	fs.StringVar(&f.lives, "live", bench.FormatLives(cfg.Lives), "live runs as shape@events-per-second (or @max), comma-separated, or none")
	fs.DurationVar(&cfg.LiveDuration, "live-duration", cfg.LiveDuration, "measured duration of each live run")
	fs.DurationVar(&cfg.LiveWarmup, "live-warmup", cfg.LiveWarmup, "warm-up before each live run's measured window")
	fs.IntVar(&cfg.Writers, "writers", cfg.Writers, "concurrent writer connections (backlog building and live mode)")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "partitions of the topics walrelay creates")
	fs.IntVar(&cfg.PayloadBytes, "payload-bytes", cfg.PayloadBytes, "approximate size of each event's jsonb payload")
	fs.DurationVar(&cfg.StatusInterval, "status-interval", cfg.StatusInterval, "walrelay's postgres.status_interval (bounds how late the slot shows the acks)")
	fs.DurationVar(&cfg.StepTimeout, "step-timeout", cfg.StepTimeout, "limit for each build, drain and live run")
	fs.DurationVar(&cfg.Poll, "poll", cfg.Poll, "how often slot positions are sampled")
	fs.IntVar(&cfg.Repeat, "repeat", cfg.Repeat, "drains of each backlog by each consumer (built once; the median is reported)")
	fs.BoolVar(&cfg.WalrelayFirst, "walrelay-first", false, "start each backlog with walrelay rather than pg_recvlogical (repetitions alternate)")
	fs.BoolVar(&cfg.VerifyCount, "verify", cfg.VerifyCount, "check the broker holds exactly N records after each drain")
	fs.IntVar(&cfg.Kfake.Brokers, "kfake-brokers", 1, "brokers in the kfake cluster")
	fs.BoolVar(&cfg.Kfake.Blackhole, "kfake-blackhole", false, "kfake acknowledges without storing records (backlogs only; live mode needs to consume)")
	fs.IntVar(&cfg.Kfake.HeapMiB, "kfake-heap-mib", cfg.Kfake.HeapMiB, "kfake runs with Go's garbage collector off until its heap reaches this many MiB (it keeps every record on its heap, and marking it stalls its responses); 0: Go's default collector")
	fs.BoolVar(&cfg.Kfake.Realtime, "kfake-realtime", cfg.Kfake.Realtime, "switch kfake to real-time scheduling (SCHED_FIFO 1, needs root or CAP_SYS_NICE) for the live runs, so that the stand-in broker answers at once instead of waiting behind the load for a CPU, as a broker on its own machines would (drains run first, under the normal policy); false: the normal policy throughout")
	fs.StringVar(&f.jsonPath, "json", "", "also write the report as JSON to this file")
	fs.StringVar(&cfg.ProfileDir, "cpuprofile", "", "write a CPU profile of walrelay for each drain and live run into this directory (needs http.pprof; costs walrelay a little CPU)")
	fs.IntVar(&cfg.ProfileSeconds, "cpuprofile-seconds", 0, "length of each drain's profile (0: the floor's drain time)")
	fs.BoolVar(&cfg.KeepWorkDir, "keep", false, "keep the work directory (walrelay binary and logs)")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress on stderr")
	fs.StringVar(&f.logLevel, "log-level", "warn", "level of the harness's own log on stderr: debug, info, warn, error")
	return cmd
}

// apply turns the string flags into cfg.
func (f *benchFlags) apply(cfg *bench.Config, stderr io.Writer) error {
	var err error
	cfg.DSN, cfg.PGBinDir, cfg.Brokers, cfg.WalrelayBin = f.dsn, f.pgBin, f.brokers, f.walrelayBin
	cfg.BuildFlags, cfg.WalrelayEnv = f.buildFlags, f.walrelayEnv
	cfg.Backlogs, cfg.Lives = nil, nil
	if f.backlogs != "none" {
		if cfg.Backlogs, err = bench.ParseBacklogs(f.backlogs); err != nil {
			return fmt.Errorf("--backlog: %w", err)
		}
	}
	if f.lives != "none" {
		if cfg.Lives, err = bench.ParseLives(f.lives); err != nil {
			return fmt.Errorf("--live: %w", err)
		}
	}
	if len(cfg.Lives) > 0 && cfg.Kfake.Blackhole {
		return errors.New("--kfake-blackhole: live runs consume, which a blackhole broker cannot serve; add --live none")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	cfg.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if !f.quiet {
		cfg.Progress = stderr
	}
	return nil
}

func writeJSON(path string, r *bench.Report) error {
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing JSON report: %w", err)
	}
	if err := r.WriteJSON(out); err != nil {
		out.Close()
		return fmt.Errorf("writing JSON report to %s: %w", path, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("writing JSON report to %s: %w", path, err)
	}
	return nil
}

// kfakeCommand runs the broker the harness starts in a child process.
func kfakeCommand(stdin io.Reader, stdout io.Writer) *cobra.Command {
	var opts bench.KfakeOptions
	cmd := &cobra.Command{
		Use:   "kfake",
		Short: "Run a kfake Kafka-protocol broker until stdin closes (the harness runs this)",
		Long: `Runs franz-go's kfake broker on 127.0.0.1, prints "kfake listening on host:port"
once it listens, and exits when stdin reaches EOF or on SIGINT/SIGTERM.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return bench.ServeKfake(cmd.Context(), opts, stdin, stdout)
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&opts.Port, "port", 0, "first broker's port (0: free ports)")
	fs.IntVar(&opts.Brokers, "brokers", 1, "number of brokers")
	fs.IntVar(&opts.Partitions, "partitions", 3, "partitions of auto-created topics")
	fs.BoolVar(&opts.Blackhole, "blackhole", false, "acknowledge produced records without storing them")
	return cmd
}
