package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/operator"
)

func configCommand(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Validate the configuration and print it (secrets redacted)",
		Long: `Loads the configuration exactly as 'walrelay run' would (defaults, --config file,
WALRELAY_* environment, flags), validates it without connecting (including the
files it names: kafka.tls.*_file, postgres.dsn's sslrootcert/sslcert/sslkey),
and prints the result as YAML. With --list, prints every option with its variable and default.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if list, _ := cmd.Flags().GetBool("list"); list {
				def := config.Default()
				fmt.Fprint(stdout, optionsTable(config.Fields(&def)))
				return nil
			}
			cfg, err := loadConfig(cmd.Flags())
			if err != nil {
				return err
			}
			// The files run would load (TLS certificates and keys):
			// what run refuses, config refuses, without connecting.
			if err := operator.CheckFiles(cfg); err != nil {
				return cli.UsageError{Err: err}
			}
			fmt.Fprint(stdout, cfg.String())
			return nil
		},
	}
	cmd.Flags().Bool("list", false, "list every option as a Markdown table")
	config.BindFlags(cmd.Flags())
	return cmd
}

// optionsTable renders the options as docs/configuration.md's Markdown table.
func optionsTable(fields []config.Field) string {
	var b strings.Builder
	b.WriteString("| option (YAML path / --flag) | environment variable | default | meaning |\n|---|---|---|---|\n")
	for _, f := range fields {
		def := f.Default
		if f.Secret {
			def = config.Redact(def)
		}
		shown := "(empty)"
		if def != "" {
			shown = "`" + def + "`"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s |\n", f.Path, f.Env, escapeCell(shown), escapeCell(f.Help))
	}
	return b.String()
}

// escapeCell keeps a value inside its Markdown table cell.
func escapeCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
