package faultsuite

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/walrelay/walrelay/internal/testenv"
)

// relayBin is the walrelay binary built by TestMain; binDir holds it and
// is removed by TestFaultSuite's cleanup (testenv.Main exits the process,
// so TestMain cannot clean up after m.Run).
var relayBin, binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "walrelay-faultsuite-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "faultsuite: FAIL: creating a directory for the walrelay binary: %v\n", err)
		os.Exit(1)
	}
	bin := filepath.Join(dir, "walrelay")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/walrelay/walrelay/cmd/walrelay")
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		fmt.Fprintf(os.Stderr, "faultsuite: FAIL: building walrelay: %v\n%s", err, out)
		os.Exit(1)
	}
	relayBin, binDir = bin, dir
	testenv.Main(m)
}
