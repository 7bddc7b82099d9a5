package faultsuite

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/walrelay/walrelay/internal/testenv"
)

// relayBin is the walrelay binary the scenarios run, built by
// buildRelay.
var relayBin string

func TestMain(m *testing.M) { testenv.Main(m) }

// buildRelay builds cmd/walrelay into the test's temporary directory
// (removed when the test ends) and sets relayBin. Every top-level test
// that runs walrelay calls it first; top-level tests run one after another,
// so relayBin is the running test's. (testenv.Main exits the process, so
// TestMain could not remove a binary it built.)
func buildRelay(t *testing.T) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "walrelay")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/walrelay/walrelay/cmd/walrelay")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building walrelay: %v\n%s", err, out)
	}
	relayBin = bin
}
