package postgres

import (
	"testing"

	"github.com/walrelay/walrelay/internal/cli"
)

// TestOneLine checks that oneLine flattens a text as cli.OneLine does.
func TestOneLine(t *testing.T) {
	for _, s := range []string{
		"",
		"one line",
		"failed to connect to `user=u database=d`:\n\t127.0.0.1:1 (127.0.0.1): dial error: refused\n\t[::1]:1 ([::1]): dial error: refused\n",
		"one\r\n\r\n  two  ",
		"a:\nb\nc:\n\n d",
		"\n\n",
	} {
		if got, want := oneLine(s), cli.OneLine(s); got != want {
			t.Errorf("oneLine(%q) = %q, cli.OneLine gives %q", s, got, want)
		}
	}
}
