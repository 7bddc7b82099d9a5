package config_test

// Helpers shared by the config tests: loading the way the CLI does, and writing a config file.

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"

	"github.com/walrelay/walrelay/internal/config"
)

// load runs Load the way the CLI does: flags bound and parsed from args,
// environ as the environment.
func load(t *testing.T, args []string, environ ...string) (config.Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("walrelay", pflag.ContinueOnError)
	config.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parsing flags %q: %v", args, err)
	}
	return config.Load(fs, environ)
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "walrelay.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
