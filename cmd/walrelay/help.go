package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/internal/config"
)

// exitCodesHelpNoConfirm is exitCodesHelp for a command that asks no
// confirmation (no --yes).
const exitCodesHelpNoConfirm = `
Exit status: 0 success; 1 a runtime failure (cannot connect, slot missing or
in use, refused by Postgres) or a failed check; 2 bad usage (unknown flag,
malformed LSN or slot name, invalid configuration).`

// finishHelp fits every command's help to the command, once the tree is
// built: the exit statuses of a command without --yes do not mention it,
// a command group answers an unknown subcommand with the closest ones,
// and --help lists a command's own flags before the configuration's.
func finishHelp(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Flags().Lookup("yes") == nil {
			c.Long = strings.Replace(c.Long, exitCodesHelp, exitCodesHelpNoConfirm, 1)
		}
		if c.HasSubCommands() {
			c.Args = unknownSubcommand
			c.SuggestionsMinimumDistance = 2 // cobra's default, which SuggestionsFor alone does not set
			if c.RunE == nil && c.Run == nil {
				c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	root.SetUsageFunc(usage)
}

// isGroup reports whether c only groups subcommands (walrelay, slot,
// debezium): it has subcommands and no flag of its own, and run alone it
// shows its help or names its subcommands. lsn, which has subcommands,
// does something itself.
func isGroup(c *cobra.Command) bool {
	if !c.HasSubCommands() {
		return false
	}
	own := false
	c.LocalFlags().VisitAll(func(f *pflag.Flag) {
		own = own || (f.Name != "help" && f.Name != "version")
	})
	return !own
}

// unknownSubcommand is the argument check of a command group: any
// argument is an unknown subcommand (bad usage), answered with the close
// matches.
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return cli.UsageError{Err: fmt.Errorf("%s (%s --help lists the commands)", msg, cmd.CommandPath())}
}

// configFlagsHeading introduces the flags every command that reads the
// configuration has.
const configFlagsHeading = "Configuration flags (every option, as in `walrelay config --list`; a flag beats WALRELAY_* variables, which beat the --config file):"

// usage is cobra's usage text with the flags in two groups: the command's
// own first, then the configuration's options under one heading.
func usage(c *cobra.Command) error {
	var b strings.Builder
	b.WriteString("Usage:")
	if c.Runnable() && !isGroup(c) {
		fmt.Fprintf(&b, "\n  %s", c.UseLine())
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(&b, "\n  %s [command]", c.CommandPath())
		b.WriteString("\n\nAvailable Commands:")
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() || sub.Name() == "help" {
				fmt.Fprintf(&b, "\n  %-*s %s", sub.NamePadding(), sub.Name(), sub.Short)
			}
		}
	}
	own := pflag.NewFlagSet(c.Name(), pflag.ContinueOnError)
	cfg := pflag.NewFlagSet(c.Name(), pflag.ContinueOnError)
	c.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if config.IsConfigFlag(f) {
			cfg.AddFlag(f)
		} else {
			own.AddFlag(f)
		}
	})
	if own.HasAvailableFlags() {
		b.WriteString("\n\nFlags:\n")
		b.WriteString(strings.TrimRight(own.FlagUsages(), " \n"))
	}
	if cfg.HasAvailableFlags() {
		b.WriteString("\n\n" + configFlagsHeading + "\n")
		b.WriteString(strings.TrimRight(cfg.FlagUsages(), " \n"))
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(&b, "\n\nUse \"%s [command] --help\" for more information about a command.", c.CommandPath())
	}
	b.WriteString("\n")
	_, err := io.WriteString(c.OutOrStderr(), b.String())
	return err
}
