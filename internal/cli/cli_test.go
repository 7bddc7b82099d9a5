package cli

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		code int
		out  string
	}{
		{"no error", nil, 0, ""},
		{"runtime error", errors.New("broker down"), 1, "walrelay: broker down\n"},
		{"usage error", UsageError{errors.New("bad flag")}, 2, "walrelay: bad flag\n"},
		{"wrapped usage error", fmt.Errorf("loading config: %w", UsageError{errors.New("bad value")}), 2, "walrelay: loading config: bad value\n"},
		{"joined errors", errors.Join(errors.New("first"), errors.New("second")), 1, "walrelay: first; second\n"},
		{"indented attempts", errors.New("failed to connect:\n\thost a: refused\n\thost b: refused\n"), 1, "walrelay: failed to connect: host a: refused; host b: refused\n"},
		{"reported failure", Reported{Err: errors.New("3 events missing")}, 1, ""},
		{"wrapped reported failure", fmt.Errorf("verify: %w", Reported{Err: errors.New("missing")}), 1, ""},
		{"reported failure with its own status", Reported{Err: errors.New("not checked"), Code: 3}, 3, ""},
		{"postgres DETAIL kept", fmt.Errorf("starting: %w", &pgconn.PgError{Severity: "ERROR", Code: "55000", Message: "cannot use replication slot \"w\" for logical decoding", Detail: "This replication slot is being synchronized from the primary server."}),
			1, "walrelay: starting: ERROR: cannot use replication slot \"w\" for logical decoding (SQLSTATE 55000) (DETAIL: This replication slot is being synchronized from the primary server.)\n"},
		{"postgres DETAIL not repeated", fmt.Errorf("starting: %w (DETAIL: d)", &pgconn.PgError{Severity: "ERROR", Code: "55000", Message: "m", Detail: "d"}), 1, "walrelay: starting: ERROR: m (SQLSTATE 55000) (DETAIL: d)\n"},
		{"blank lines and CRLF", UsageError{errors.New("one\r\n\r\n  two  ")}, 2, "walrelay: one; two\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := ExitCode("walrelay", tc.err, &stderr); code != tc.code || stderr.String() != tc.out {
				t.Errorf("ExitCode(%q) = %d, %q; want %d, %q", tc.err, code, stderr.String(), tc.code, tc.out)
			}
		})
	}
}

// An error quoting a huge value prints a bounded line that keeps its
// start and its end (the reason may come after the value).
func TestExitCodeBoundsTheLine(t *testing.T) {
	huge := strings.Repeat("é", 3_300_000) // 6.6 MB, two bytes a rune
	var stderr bytes.Buffer
	code := ExitCode("walrelay", fmt.Errorf("slot peek --past-event %q: no such event", huge), &stderr)
	line := stderr.String()
	if code != 1 || len(line) > maxLine+64 || !strings.HasSuffix(line, `é": no such event`+"\n") || !strings.HasPrefix(line, `walrelay: slot peek --past-event "éé`) || !strings.Contains(line, " bytes cut]") || !utf8.ValidString(line) {
		t.Errorf("exit %d, a line of %d bytes: %.200q … %q", code, len(line), line, line[max(0, len(line)-60):])
	}
}
