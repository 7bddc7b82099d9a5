package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// helpOf runs `walrelay args... --help` in this process and returns what
// it printed.
func helpOf(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), append(args, "--help"), &stdout, &stderr); err != nil || stderr.Len() != 0 {
		t.Fatalf("walrelay %s --help: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// commandPaths lists every command below args, from the help's "Available
// Commands" (help and completion left out).
func commandPaths(t *testing.T, args ...string) [][]string {
	t.Helper()
	var out [][]string
	_, list, ok := strings.Cut(helpOf(t, args...), "Available Commands:\n")
	if !ok {
		return nil
	}
	list, _, _ = strings.Cut(list, "\n\n")
	for line := range strings.SplitSeq(list, "\n") {
		name := strings.Fields(line)[0]
		if name == "help" || name == "completion" {
			continue
		}
		path := append(append([]string(nil), args...), name)
		out = append(out, path)
		out = append(out, commandPaths(t, path...)...)
	}
	return out
}

// Every command's --help lists its own flags first, then the
// configuration's options under one heading, each typed as it is parsed
// (durations as duration, never string); only a command that takes --yes
// mentions it in its exit statuses.
func TestHelpListsOwnFlagsFirst(t *testing.T) {
	paths := commandPaths(t)
	if len(paths) < 20 {
		t.Fatalf("found %d commands: %q", len(paths), paths)
	}
	configFlag := regexp.MustCompile(`(?m)^\s+--(config|postgres\.|kafka\.|router\.|converter\.|relay\.|outbox\.|snapshot\.|http\.|metrics\.|log\.)\S*`)
	for _, path := range paths {
		name := strings.Join(path, " ")
		help := helpOf(t, path...)
		own, configPart, hasConfig := strings.Cut(help, configFlagsHeading)
		if m := configFlag.FindString(own); m != "" {
			t.Errorf("walrelay %s --help: configuration flag %q before the heading %q", name, strings.TrimSpace(m), configFlagsHeading)
		}
		if hasConfig {
			if !strings.Contains(configPart, "--postgres.status_interval duration ") || !strings.Contains(configPart, "--kafka.topic_partitions int ") || !strings.Contains(configPart, "--kafka.brokers strings ") {
				t.Errorf("walrelay %s --help: configuration flags not typed (duration, int, strings):\n%s", name, configPart)
			}
			if strings.Contains(configPart, "linger string") || strings.Contains(configPart, "interval string") || strings.Contains(configPart, "timeout string") {
				t.Errorf("walrelay %s --help: a duration typed string:\n%s", name, configPart)
			}
			if i := strings.Index(help, "\nFlags:\n"); i < 0 || i > strings.Index(help, configFlagsHeading) {
				t.Errorf("walrelay %s --help: its own Flags: do not come before the configuration's", name)
			}
		}
		takesYes := strings.Contains(own, "--yes ")
		if mentions := strings.Contains(help, "without --yes"); mentions != takesYes {
			t.Errorf("walrelay %s --help: takes --yes %t, but its help mentions \"without --yes\": %t", name, takesYes, mentions)
		}
	}
}

// slot list --help fits on a screen before the configuration's flags.
func TestHelpSlotList(t *testing.T) {
	help := helpOf(t, "slot", "list")
	own, _, _ := strings.Cut(help, configFlagsHeading)
	if n := strings.Count(own, "\n"); n > 25 {
		t.Errorf("slot list --help has %d lines before the configuration's flags:\n%s", n, own)
	}
	for _, want := range []string{"Usage:\n  walrelay slot list [flags]\n", "\nFlags:\n  -h, --help ", "-o, --output string"} {
		if !strings.Contains(own, want) {
			t.Errorf("slot list --help lacks %q before the configuration's flags:\n%s", want, own)
		}
	}
}

// A mistyped subcommand is bad usage answered with the close match, on one
// line.
func TestUnknownSubcommandSuggests(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"slot", "lst"}, `walrelay: unknown command "lst" for "walrelay slot"; did you mean list? (walrelay slot --help lists the commands)`},
		{[]string{"slt"}, `walrelay: unknown command "slt" for "walrelay"; did you mean slot? (walrelay --help lists the commands)`},
		{[]string{"debezium", "imprt", "x.json"}, `walrelay: unknown command "imprt" for "walrelay debezium"; did you mean import? (walrelay debezium --help lists the commands)`},
		{[]string{"lsn", "dif", "0/1", "0/2"}, `walrelay: unknown command "dif" for "walrelay lsn"; did you mean diff? (walrelay lsn --help lists the commands)`},
		{[]string{"frobnicate"}, `walrelay: unknown command "frobnicate" for "walrelay" (walrelay --help lists the commands)`},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := walrelay(t, childEnv(), c.args...)
			if code != 2 || stderr != c.want+"\n" || stdout != "" {
				t.Errorf("exit %d, want 2\nstderr: %s  want: %s\nstdout: %s", code, stderr, c.want, stdout)
			}
		})
	}
	// A group alone still shows its help (root) or names its commands.
	if stdout, stderr, code := walrelay(t, childEnv()); code != 0 || !strings.Contains(stdout, "Available Commands:") || stderr != "" {
		t.Errorf("walrelay alone: exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}
