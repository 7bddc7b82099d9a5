package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/internal/dbzimport"
)

// debeziumCommand is the group of commands for switching from Debezium.
// Each subcommand is one AddCommand line.
func debeziumCommand(stdout, stderr io.Writer, stdin io.Reader) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "debezium",
		Short: "Switch from Debezium's Postgres connector: import its configuration, take over its slot",
		Args:  usageArgs(cobra.NoArgs),
		RunE:  needsSubcommand,
	}
	cmd.AddCommand(debeziumImportCommand(stdout, stderr, stdin), debeziumTakeoverCommand(stdout, stderr))
	return cmd
}

// errNotMapped is returned when the import dropped options (exit 1); the
// report above it lists them.
var errNotMapped = errors.New("some connector options were not mapped (listed above)")

func debeziumImportCommand(stdout, stderr io.Writer, stdin io.Reader) *cobra.Command {
	var out, format string
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Print the walrelay configuration equivalent to a Debezium Postgres connector's",
		Long: `Reads a Debezium Postgres connector's configuration (FILE, or - for stdin): the
JSON Kafka Connect's REST API takes or returns, with or without the
{"name": ..., "config": ...} wrapper, or a .properties file. Prints the
equivalent walrelay YAML on stdout (or to --out FILE), which
'walrelay config --config FILE' accepts as it is, and on stderr a report:
the options walrelay cannot map (with the reason), what to check (the Kafka
Connect worker's converters, which the connector config does not show; the
publication's tables; the password), and the options that change nothing.

The password is never printed: the YAML leaves it out of postgres.dsn and
says to set PGPASSWORD or WALRELAY_POSTGRES_DSN_FILE.

Exit status: 0 every option mapped; 1 some options were not mapped (listed
on stderr; the YAML is printed all the same); 2 bad input (unreadable or
unparsable file, no connector.class, another connector than
` + dbzimport.PostgresConnectorClass + `).`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(_ *cobra.Command, args []string) error {
			if format != "yaml" {
				// -o was this command's output file before it meant the
				// format, as it does for every other command.
				return cli.UsageError{Err: fmt.Errorf("-o %q: not an output format (this command writes yaml); to write the YAML to a file, use --out FILE", format)}
			}
			data, err := readInput(args[0], stdin)
			if err != nil {
				return cli.UsageError{Err: err}
			}
			c, err := dbzimport.Parse(data)
			if err != nil {
				return cli.UsageError{Err: fmt.Errorf("reading %s: %w", args[0], err)}
			}
			res, err := dbzimport.Import(c)
			if errors.Is(err, dbzimport.ErrBadInput) {
				return cli.UsageError{Err: fmt.Errorf("reading %s: %w", args[0], err)}
			} else if err != nil {
				return err
			}
			if out == "" {
				if _, err := stdout.Write(res.YAML); err != nil {
					return fmt.Errorf("writing the configuration: %w", err)
				}
			} else if err := os.WriteFile(out, res.YAML, 0o644); err != nil {
				return fmt.Errorf("writing the configuration: %w", err)
			}
			printImportReport(stderr, res.Findings)
			if res.Dropped() {
				return errNotMapped
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write the YAML to this file instead of stdout")
	cmd.Flags().StringVarP(&format, "output", "o", "yaml", "output format: yaml (the only one; --out names a file)")
	return cmd
}

// readInput reads the file named, or stdin for "-".
func readInput(name string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		data, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("reading stdin: %w", err)
		}
		return data, nil
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("reading the connector configuration: %w", err)
	}
	return data, nil
}

// printImportReport writes the findings, grouped by kind, one per line.
func printImportReport(w io.Writer, findings []dbzimport.Finding) {
	heads := map[dbzimport.Kind]string{
		dbzimport.Dropped: "Not mapped (walrelay cannot do what these do; the YAML goes without them):",
		dbzimport.Check:   "Check (assumed or left out; see the comments in the YAML):",
		dbzimport.Ignored: "Ignored (they change nothing walrelay does or sends):",
	}
	var b strings.Builder
	var last dbzimport.Kind
	for _, f := range findings {
		if f.Kind != last {
			if last != 0 {
				b.WriteString("\n")
			}
			b.WriteString(heads[f.Kind] + "\n")
			last = f.Kind
		}
		b.WriteString("  " + f.String() + "\n")
	}
	if b.Len() == 0 {
		b.WriteString("Every option of the connector was mapped.\n")
	}
	fmt.Fprint(w, b.String())
}
