package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/cli"
)

// Destructive commands proceed with --yes, ask on a terminal (only y or
// yes proceeds) and, without a terminal, refuse with a usage error.
func TestConfirm(t *testing.T) {
	for _, c := range []struct {
		name     string
		yes      bool
		terminal bool
		answer   string
		want     error // nil: proceed
		usage    bool
	}{
		{"--yes", true, false, "", nil, false},
		{"--yes on a terminal does not ask", true, true, "", nil, false},
		{"terminal y", false, true, "y\n", nil, false},
		{"terminal YES", false, true, "YES\n", nil, false},
		{"terminal n", false, true, "n\n", errAborted, false},
		{"terminal empty", false, true, "\n", errAborted, false},
		{"terminal EOF", false, true, "", errAborted, false},
		{"no terminal", false, false, "y\n", nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var prompt bytes.Buffer
			err := confirm(c.yes, c.terminal, strings.NewReader(c.answer), &prompt, "Drop it?", "slot drop")
			var ue cli.UsageError
			switch {
			case c.usage:
				if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--yes") {
					t.Fatalf("err %v, want a usage error naming --yes", err)
				}
			case err != c.want:
				t.Fatalf("err %v, want %v", err, c.want)
			}
			asked := prompt.String() == "Drop it? [y/N] "
			if asked != (c.terminal && !c.yes) {
				t.Errorf("prompt %q (asked=%t)", prompt.String(), asked)
			}
		})
	}
}
