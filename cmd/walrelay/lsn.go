package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/postgres"
)

func lsnCommand(stdout io.Writer) *cobra.Command {
	cmd := adminCommand("lsn", "Print the server's current WAL LSN; `lsn diff A B` compares two LSNs",
		`Prints pg_current_wal_lsn() of the server in postgres.dsn (the replay
position on a standby). 'walrelay lsn diff A B' prints A - B in bytes and
binary units, without connecting, e.g. for LSNs pasted from logs.`, cobra.NoArgs,
		func(ctx context.Context, _ *cobra.Command, cfg config.Config, format string, _ []string) error {
			conn, err := connect(ctx, cfg.Postgres.DSN)
			if err != nil {
				return err
			}
			defer conn.Close(context.WithoutCancel(ctx))
			lsn, err := postgres.CurrentLSN(ctx, conn)
			if err != nil {
				return err
			}
			if format == outputJSON {
				return writeJSON(stdout, map[string]string{"current_lsn": lsn})
			}
			fmt.Fprintln(stdout, lsn)
			return nil
		})
	cmd.AddCommand(lsnDiffCommand(stdout))
	return cmd
}

func lsnDiffCommand(stdout io.Writer) *cobra.Command {
	var format *string
	cmd := &cobra.Command{
		Use:   "diff A B",
		Short: "Print A - B in bytes and binary units",
		Long: `Prints how far LSN A is ahead of LSN B (negative when behind), like
pg_wal_lsn_diff(A, B): "16777216 bytes (16.0 MiB)". LSNs have the form
0/16B3748. The difference is exact over the whole LSN range, up to
FFFFFFFF/FFFFFFFF - 0/0 = 18446744073709551615 bytes (16.0 EiB); with
-o json, "bytes" is a JSON number with every digit, beyond what a float64
holds exactly (2^53): decode it as an arbitrary-precision number. It does
not connect to anything.` + "\n" + exitCodesHelp,
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := checkOutput(*format); err != nil {
				return err
			}
			a, err := lsnArg(args[0])
			if err != nil {
				return err
			}
			b, err := lsnArg(args[1])
			if err != nil {
				return err
			}
			n := postgres.Diff(a, b)
			if *format == outputJSON {
				return writeJSON(stdout, map[string]any{"a": a.String(), "b": b.String(), "bytes": n, "human": n.Human()})
			}
			fmt.Fprintln(stdout, postgres.DiffString(n))
			return nil
		},
	}
	format = addOutputFlag(cmd)
	return cmd
}
