package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/pkg/config"
	"github.com/walrelay/walrelay/pkg/relay"
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
			r, err := relay.New(cfg, log)
			if err != nil {
				return usageError{err}
			}
			log.Info("starting walrelay", "version", version, "postgres", config.Redact(cfg.Postgres.DSN), "slot", cfg.Postgres.Slot, "brokers", cfg.Kafka.Brokers)
			return r.Run(cmd.Context())
		},
	}
	config.BindFlags(cmd.Flags())
	return cmd
}
