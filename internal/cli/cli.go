// Package cli is what walrelay's commands (walrelay, walrelay-bench) share
// about ending: an error in how a command was invoked exits with status 2,
// any other error with 1, and either is printed once, after the command's
// name.
package cli

import (
	"errors"
	"fmt"
	"io"
)

// UsageError marks an error in how the command was invoked: a bad flag,
// argument or configuration value (exit status 2).
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// ExitCode prints err, if any, as "name: err" on stderr and returns the
// exit status: 0 without an error, 2 for a UsageError, 1 otherwise.
func ExitCode(name string, err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	if errors.As(err, new(UsageError)) {
		return 2
	}
	return 1
}
