// What every operator subcommand shares: adminCommand (config flags, -o)
// and one connection per command (withConn, queryAndPrint).

package main

import (
	"context"
	"io"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/internal/config"
)

// adminCommand builds a leaf command with the config flags and -o; run
// gets the loaded config and the output format.
func adminCommand(use, short, long string, args cobra.PositionalArgs, run func(ctx context.Context, cmd *cobra.Command, cfg config.Config, format string, args []string) error) *cobra.Command {
	var format *string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long + "\n" + exitCodesHelp,
		Args:  usageArgs(args),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(*format); err != nil {
				return err
			}
			cfg, err := loadConfig(cmd.Flags())
			if err != nil {
				return err
			}
			return run(cmd.Context(), cmd, cfg, *format, args)
		},
	}
	format = addOutputFlag(cmd)
	config.BindFlags(cmd.Flags())
	return cmd
}

// withConn connects to dsn, runs f with the connection and closes it.
func withConn(ctx context.Context, dsn string, f func(*pgx.Conn) error) error {
	conn, err := connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return f(conn)
}

// queryAndPrint connects to dsn, gets a value with get and prints it to w:
// as JSON with -o json, else with text.
func queryAndPrint[T any](ctx context.Context, dsn string, w io.Writer, format string, get func(*pgx.Conn) (T, error), text func(io.Writer, T) error) error {
	return withConn(ctx, dsn, func(conn *pgx.Conn) error {
		v, err := get(conn)
		if err != nil {
			return err
		}
		if format == outputJSON {
			return writeJSON(w, v)
		}
		return text(w, v)
	})
}
