package localpg

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// serverBinaries must all be present in a directory for it to be used.
var serverBinaries = []string{"initdb", "pg_ctl", "postgres"}

// EnvBinDir names the environment variable that points at the directory of
// the Postgres server binaries, overriding the search.
const EnvBinDir = "WALRELAY_PG_BIN"

// FindBinDir returns the directory Start would use for the server binaries
// when Options.BinDir is empty, or an error wrapping ErrBinariesNotFound.
// A set $WALRELAY_PG_BIN that lacks the binaries is an error, not skipped.
func FindBinDir(ctx context.Context) (string, error) {
	return findBinDir(ctx, "")
}

func findBinDir(ctx context.Context, explicit string) (string, error) {
	if explicit != "" {
		if hasServerBinaries(explicit) {
			return explicit, nil
		}
		return "", notFound([]string{explicit + " (Options.BinDir)"})
	}
	var looked []string
	try := func(dir, why string) bool {
		if dir == "" {
			return false
		}
		looked = append(looked, dir+" ("+why+")")
		return hasServerBinaries(dir)
	}
	// An explicit $WALRELAY_PG_BIN is a decision, not a hint: no fallback.
	if dir := os.Getenv(EnvBinDir); dir != "" {
		if try(dir, "$"+EnvBinDir) {
			return dir, nil
		}
		return "", notFound(looked)
	}
	if dir := pgConfigBinDir(ctx); try(dir, "pg_config --bindir") {
		return dir, nil
	}
	for _, dir := range debianBinDirs() {
		if try(dir, "installed versions") {
			return dir, nil
		}
	}
	if len(debianBinDirs()) == 0 {
		looked = append(looked, "/usr/lib/postgresql/*/bin")
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if dir := filepath.Dir(p); try(dir, "$PATH") {
			return dir, nil
		}
	} else {
		looked = append(looked, "$PATH")
	}
	return "", notFound(looked)
}

func notFound(looked []string) error {
	return fmt.Errorf("%w (looked in %s; need %s); install postgresql (apt-get install -y postgresql) or set %s",
		ErrBinariesNotFound, strings.Join(looked, ", "), strings.Join(serverBinaries, ", "), EnvBinDir)
}

func hasServerBinaries(dir string) bool {
	for _, b := range serverBinaries {
		fi, err := os.Stat(filepath.Join(dir, b))
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// pgConfigBinDir asks pg_config, if installed. On Debian /usr/bin/pg_config
// may come from libpq-dev and name a directory without server binaries;
// the caller checks.
func pgConfigBinDir(ctx context.Context) string {
	p, err := exec.LookPath("pg_config")
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, p, "--bindir").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// debianBinDirs lists /usr/lib/postgresql/<version>/bin, newest first.
func debianBinDirs() []string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin") // only ErrBadPattern, impossible here
	version := func(d string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(d)), 64) // 0 for odd names: sorted last
		return v
	}
	slices.SortFunc(dirs, func(a, b string) int {
		va, vb := version(a), version(b)
		switch {
		case va > vb:
			return -1
		case va < vb:
			return 1
		}
		return strings.Compare(a, b)
	})
	return dirs
}
