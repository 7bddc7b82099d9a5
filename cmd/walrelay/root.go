package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/internal/config"
)

// run executes the command line in args and returns what main turns into
// an exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := &cobra.Command{
		Use:           "walrelay",
		Short:         "Relay transactional outbox events from Postgres to Kafka",
		Long:          "walrelay streams the outbox table's INSERTs from a Postgres logical replication slot to Kafka,\nrouted like Debezium's Outbox Event Router, and confirms WAL to Postgres only after Kafka acknowledged it.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	// walrelay --version prints what walrelay version prints.
	root.Version = readBuild().String()
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(
		runCommand(stderr),
		setupCommand(stdout, stderr),
		configCommand(stdout),
		versionCommand(stdout),
		checkCommand(stdout),
		slotCommand(stdout, stderr),
		statusCommand(stdout),
		lsnCommand(stdout),
		debeziumCommand(stdout, stderr, os.Stdin),
		outboxCommand(stdout, stderr),
		verifyCommand(stdout, stderr),
		snapshotCommand(stdout, stderr),
	)
	finishHelp(root)
	for _, sub := range root.Commands() {
		if check := sub.Args; check != nil {
			sub.Args = func(cmd *cobra.Command, args []string) error {
				if err := check(cmd, args); err != nil {
					return cli.UsageError{Err: err} // stray arguments: bad usage, like a bad flag
				}
				return nil
			}
		}
	}
	cmd, err := root.ExecuteContextC(ctx)
	if err != nil && cmd != nil && !cmd.HasParent() {
		return cli.UsageError{Err: err} // unknown command or flag at the top level
	}
	return err
}

// flagError makes a flag error bad usage, naming the closest flag of cmd
// for an unknown one (--postgres.slott: did you mean --postgres.slot?).
func flagError(cmd *cobra.Command, err error) error {
	var ne *pflag.NotExistError
	if errors.As(err, &ne) && ne.GetSpecifiedName() != "" {
		var names []string
		cmd.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
		if s := config.Suggest(ne.GetSpecifiedName(), names); s != "" {
			err = fmt.Errorf("%w; did you mean --%s?", err, s)
		}
	}
	return cli.UsageError{Err: explainFlagError(err)}
}

// loadConfig reads the config for cmd: defaults, file, environment, flags.
func loadConfig(fs *pflag.FlagSet) (config.Config, error) {
	cfg, err := config.Load(fs, os.Environ())
	if err != nil {
		return config.Config{}, cli.UsageError{Err: err}
	}
	return cfg, nil
}

// newLogger builds the process logger from the log config.
func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level)) // validated by config
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
