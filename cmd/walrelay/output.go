package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/internal/postgres"
)

// Output formats of the operator commands (-o).
const (
	outputTable = "table"
	outputJSON  = "json"
)

// exitCodesHelp is appended to each operator command's help.
const exitCodesHelp = `
Exit status: 0 success; 1 a runtime failure (cannot connect, slot missing or
in use, refused by Postgres) or a failed check; 2 bad usage (unknown flag,
malformed LSN or slot name, invalid configuration, a destructive action
without --yes when stdin is not a terminal).`

// addOutputFlag adds -o/--output and returns where its value lands.
func addOutputFlag(cmd *cobra.Command) *string {
	return cmd.Flags().StringP("output", "o", outputTable, "output format: table or json (json field names are stable, for scripts)")
}

// checkOutput rejects an unknown -o value as bad usage.
func checkOutput(format string) error {
	if format != outputTable && format != outputJSON {
		return cli.UsageError{Err: fmt.Errorf("-o %q: want table or json", format)}
	}
	return nil
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// newTable returns a tabwriter for aligned columns; call Flush.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// usageArgs makes a positional-argument check report bad usage (exit 2);
// root.go does this only for top-level commands.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return cli.UsageError{Err: err}
		}
		return nil
	}
}

// needsSubcommand is the RunE of a command group run without a known
// subcommand.
func needsSubcommand(cmd *cobra.Command, _ []string) error {
	var names []string
	for _, c := range cmd.Commands() {
		names = append(names, c.Name())
	}
	return cli.UsageError{Err: fmt.Errorf("%s needs a subcommand: %s (see %s --help)", cmd.CommandPath(), strings.Join(names, ", "), cmd.CommandPath())}
}

// slotArg validates a slot name argument (exit 2 when invalid).
func slotArg(name string) error {
	if err := postgres.ValidateSlotName(name); err != nil {
		return cli.UsageError{Err: err}
	}
	return nil
}

// lsnArg parses an LSN argument (exit 2 when malformed).
func lsnArg(s string) (postgres.LSN, error) {
	lsn, err := postgres.ParseLSN(s)
	if err != nil {
		return 0, cli.UsageError{Err: err}
	}
	return lsn, nil
}

// connect opens an admin connection with the config's DSN.
func connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	return postgres.Connect(ctx, dsn)
}

// stdinIsTerminal reports whether stdin is an interactive terminal: a
// character device other than /dev/null.
func stdinIsTerminal() bool {
	fi, err := os.Stdin.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	if null, err := os.Stat(os.DevNull); err == nil && os.SameFile(fi, null) {
		return false
	}
	return true
}

// errAborted is returned when the operator answers no.
var errAborted = errors.New("aborted: nothing was changed")

// confirm asks before a destructive action. With yes it proceeds. On a
// terminal it asks question on prompt and reads the answer from in; "y" or
// "yes" proceeds. Without a terminal it refuses with a usage error naming
// --yes.
func confirm(yes, terminal bool, in io.Reader, prompt io.Writer, question, action string) error {
	if yes {
		return nil
	}
	if !terminal {
		return cli.UsageError{Err: fmt.Errorf("%s needs confirmation: re-run with --yes (stdin is not a terminal to ask on)", action)}
	}
	fmt.Fprintf(prompt, "%s [y/N] ", question)
	line, _ := bufio.NewReader(in).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return errAborted
}

// dash shows "-" for an empty value in tables.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// lagText formats an optional byte count.
func lagText(n *int64) string {
	if n == nil {
		return "-"
	}
	return postgres.HumanBytes(*n)
}
