package cli

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
		out  string
	}{
		{nil, 0, ""},
		{errors.New("broker down"), 1, "walrelay: broker down\n"},
		{UsageError{errors.New("bad flag")}, 2, "walrelay: bad flag\n"},
		{fmt.Errorf("loading config: %w", UsageError{errors.New("bad value")}), 2, "walrelay: loading config: bad value\n"},
	} {
		var stderr bytes.Buffer
		if code := ExitCode("walrelay", tc.err, &stderr); code != tc.code || stderr.String() != tc.out {
			t.Errorf("ExitCode(%v) = %d, %q; want %d, %q", tc.err, code, stderr.String(), tc.code, tc.out)
		}
	}
}
