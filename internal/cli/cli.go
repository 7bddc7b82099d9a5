// Package cli is what walrelay's commands (walrelay, walrelay-bench) share
// about ending: an error in how a command was invoked exits with status 2,
// any other error with 1, and either is printed once, on one line, after
// the command's name.
package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
)

// UsageError marks an error in how the command was invoked: a bad flag,
// argument or configuration value (exit status 2).
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Reported marks a failure the command already reported on its output
// (walrelay verify's missing events): exit status Code (1 when zero), and
// nothing more on stderr, so a script or a cron mail reads the report
// alone.
type Reported struct {
	Err  error
	Code int // the exit status, for a command that tells failures apart (verify's 3); 0 means 1
}

func (e Reported) Error() string { return e.Err.Error() }
func (e Reported) Unwrap() error { return e.Err }

// ExitCode prints err, if any, as "name: err" on one line of stderr (at
// most about 4 KiB: the middle of a longer one is cut) and
// returns the exit status: 0 without an error, 2 for a UsageError, its
// Code (printing nothing) for a Reported failure, 1 otherwise. An error whose text spans lines (errors.Join, a driver's list
// of attempts) has its lines trimmed and joined with "; " (a space after a
// line ending in a colon), so a script reading the last line of stderr,
// or a person reading a log, gets all of it. A Postgres error's DETAIL,
// which pgconn.PgError.Error leaves out and which often says why, is
// added when the text lacks it.
func ExitCode(name string, err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	if r := new(Reported); errors.As(err, r) {
		if r.Code == 0 {
			return 1
		}
		return r.Code
	}
	fmt.Fprintf(stderr, "%s: %s\n", name, bound(OneLine(withDetail(err)), maxLine))
	if errors.As(err, new(UsageError)) {
		return 2
	}
	return 1
}

// maxLine bounds the error line ExitCode prints: an error that quotes a
// value (a flag's, a row's) must not print megabytes of it. The errors
// walrelay builds bound what they quote; this catches the others.
const maxLine = 4096

// bound returns s, or, when it is over n bytes, its start and end around
// a note of how much was cut, on rune boundaries: the reason an error
// gives before or after a long value stays.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	head, tail := s[:n*2/3], s[len(s)-n/3:]
	for len(head) > 0 && !utf8.RuneStart(s[len(head)]) {
		head = head[:len(head)-1]
	}
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	return fmt.Sprintf("%s…[%d bytes cut]…%s", head, len(s)-len(head)-len(tail), tail)
}

// OneLine joins the non-blank lines of s, trimmed, with "; " (a space
// after a line ending in a colon, which introduces the lines after it).
// internal/postgres flattens its connection errors the same way (its
// oneLine; TestOneLine there checks the two agree).
func OneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	var parts []string
	for l := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == '\n' || r == '\r' }) {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return joinLines(parts)
}

// joinLines joins lines with "; ", or with a space after a line that ends
// in a colon (it introduces the lines after it).
func joinLines(lines []string) string {
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			if strings.HasSuffix(lines[i-1], ":") {
				b.WriteString(" ")
			} else {
				b.WriteString("; ")
			}
		}
		b.WriteString(l)
	}
	return b.String()
}

// withDetail is err's text with the DETAIL of the Postgres error it
// wraps, when it has one and the text does not show it already.
func withDetail(err error) string {
	s := err.Error()
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Detail != "" && !strings.Contains(s, pgErr.Detail) {
		s += " (DETAIL: " + pgErr.Detail + ")"
	}
	return s
}
