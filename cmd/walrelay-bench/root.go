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

// benchFlags are the flags that are not bench.Config fields as they are.
type benchFlags struct {
	jsonPath, backlogs, lives, deliveries string
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

With --delivery at_least_once,exactly_once each repetition drains every backlog once
in each of walrelay's delivery modes (relay.delivery), interleaved, and the report
compares them: events/s, their ratio, CPU per event, peak RSS, Kafka transactions.
An exactly_once drain is counted with a read_committed consumer (transaction markers
take offsets too). Backlogs only: add --live none.

It prints a table on stdout and progress on stderr, and writes JSON with --json.
Without flags it runs the default set (what make bench runs, about 4 minutes on
2 cores).

Shapes: single (one row per transaction, from 8 concurrent connections),
txK (K rows per transaction, e.g. tx100), onetx (the whole backlog in one
transaction; backlogs only). Counts accept k and m suffixes; rates are events/s
or max.

Outbox styles: a backlog shape prefixed with msg- (msg-single, msg-tx100,
msg-onetx) writes the same events as logical decoding messages
(pg_logical_emit_message(true, 'walrelay_bench', <json>): the table-less outbox,
walrelay's outbox.message_prefix) instead of outbox rows: the same fields, id
and created_at included, and the same payloads. Every backlog reports the WAL its
writes took per event (pg_current_wal_lsn before and after); a backlog measured
in both styles, same shape and count, gets a table comparing them: walrelay's
events/s, CPU per event, the walsender's CPU per event and WAL bytes per event.
Backlogs only.`,
		Example: `  walrelay-bench --json bench.json
  walrelay-bench --backlog single:50k --live none
  walrelay-bench --backlog none --live single@5000,tx10@20000,single@max --live-duration 30s
  walrelay-bench --walrelay-bin bin/walrelay --walrelay-env WALRELAY_KAFKA_LINGER=1ms
  walrelay-bench --backlog single:500k --repeat 1 --live none --cpuprofile prof && go tool pprof -top prof/*.cpu.pprof
  walrelay-bench --backlog single:200k,tx100:500k,onetx:500k --live none --delivery at_least_once,exactly_once
  walrelay-bench --backlog tx100:500k --live none --converter avro
  walrelay-bench --backlog single:200k,msg-single:200k,tx100:500k,msg-tx100:500k --live none`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.apply(&cfg); err != nil {
				return cli.UsageError{Err: err}
			}
			cfg.Progress = stderr
			cfg.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
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
	fs.StringVar(&cfg.DSN, "dsn", "", "existing Postgres (wal_level=logical; may create schemas, publications, slots); default: a private cluster")
	fs.BoolVar(&cfg.PGUnixSocket, "pg-unix-socket", false, "connect the writers, pg_recvlogical and walrelay to the private cluster over its Unix-domain socket instead of TCP")
	fs.StringSliceVar(&cfg.Brokers, "brokers", nil, "existing Kafka brokers host:port (default: kfake in its own process)")
	fs.StringVar(&cfg.WalrelayBin, "walrelay-bin", "", "walrelay binary to measure (default: go build ./cmd/walrelay)")
	fs.StringVar(&cfg.Converter, "converter", "", "walrelay's value converter in every run: raw, json (JsonConverter with schemas) or avro (AvroConverter, with a schema registry the harness runs: franz-go's srfake); keys and headers stay raw (default: walrelay's, raw)")
	fs.StringArrayVar(&cfg.WalrelayEnv, "walrelay-env", nil, "extra WALRELAY_NAME=value for walrelay run (repeatable)")
	fs.StringVar(&f.backlogs, "backlog", bench.FormatList(cfg.Backlogs), "backlogs as shape:N, comma-separated, or none")
	fs.StringVar(&f.deliveries, "delivery", "", "walrelay's relay.delivery modes to drain each backlog in, comma-separated (at_least_once, exactly_once), interleaved and compared; backlogs only (default: at_least_once alone, reported as without this flag)")
	fs.StringVar(&f.lives, "live", bench.FormatList(cfg.Lives), "live runs as shape@events-per-second (or @max), comma-separated, or none")
	fs.DurationVar(&cfg.LiveDuration, "live-duration", cfg.LiveDuration, "measured duration of each live run (after a "+cfg.LiveWarmup.String()+" warm-up)")
	fs.IntVar(&cfg.PayloadBytes, "payload-bytes", cfg.PayloadBytes, "approximate size of each event's jsonb payload")
	fs.DurationVar(&cfg.StatusInterval, "status-interval", cfg.StatusInterval, "walrelay's postgres.status_interval (bounds how late the slot shows the acks)")
	fs.IntVar(&cfg.Repeat, "repeat", cfg.Repeat, "drains of each backlog by each consumer (built once; the median is reported)")
	fs.BoolVar(&cfg.KfakeBlackhole, "kfake-blackhole", false, "kfake acknowledges without storing records (backlogs only; live mode needs to consume)")
	fs.IntVar(&cfg.KfakeHeapMiB, "kfake-heap-mib", cfg.KfakeHeapMiB, "kfake runs with Go's garbage collector off until its heap reaches this many MiB (it keeps every record on its heap, and marking it stalls its responses); 0: Go's default collector")
	fs.BoolVar(&cfg.KfakeRealtime, "kfake-realtime", cfg.KfakeRealtime, "switch kfake to real-time scheduling (SCHED_FIFO 1, needs root or CAP_SYS_NICE) for the live runs, so that the stand-in broker answers at once instead of waiting behind the load for a CPU (drains run first, under the normal policy); false: the normal policy throughout")
	fs.StringVar(&f.jsonPath, "json", "", "also write the report as JSON to this file")
	fs.StringVar(&cfg.ProfileDir, "cpuprofile", "", "write a CPU profile of walrelay for each drain and live run into this directory (costs walrelay a little CPU)")
	return cmd
}

// apply parses the lists of measurements and delivery modes into cfg.
func (f *benchFlags) apply(cfg *bench.Config) error {
	var err error
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
	if f.deliveries != "" {
		if cfg.Deliveries, err = bench.ParseDeliveries(f.deliveries); err != nil {
			return fmt.Errorf("--delivery: %w", err)
		}
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
		Long: `Runs one franz-go kfake broker on a free port of 127.0.0.1, prints "kfake listening on host:port"
once it listens, and exits when stdin reaches EOF or on SIGINT/SIGTERM.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return bench.ServeKfake(cmd.Context(), opts, stdin, stdout)
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&opts.Partitions, "partitions", 3, "partitions of auto-created topics")
	fs.BoolVar(&opts.Blackhole, "blackhole", false, "acknowledge produced records without storing them")
	return cmd
}
