package localpg

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// This file runs the server's binaries and the watchdog that reaps the
// server if this process dies, and picks and probes loopback ports.

// killStray sends SIGQUIT (immediate shutdown) to a postmaster left behind
// by a failed or cancelled pg_ctl start.
func (c *Cluster) killStray() {
	b, err := os.ReadFile(filepath.Join(c.dataDir, "postmaster.pid"))
	if err != nil {
		return
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return
	}
	if err := syscall.Kill(pid, syscall.SIGQUIT); err == nil {
		c.log.Warn("killed postmaster left by failed start", "pid", pid)
		for range 50 { // wait up to 5s for it to exit
			if syscall.Kill(pid, 0) != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// watchdogScript waits for this process ($1) to exit, then shuts down the
// postmaster named in the pid file ($2) and removes the remaining arguments.
const watchdogScript = `parent=$1; pidfile=$2; shift 2
while kill -0 "$parent" 2>/dev/null; do sleep 1; done
if [ -f "$pidfile" ]; then
  pid=$(head -n 1 "$pidfile")
  kill -QUIT "$pid" 2>/dev/null
  i=0; while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
fi
for d in "$@"; do rm -rf "$d"; done
`

// startWatchdog starts the reaper for the case where this process dies
// without Close. It runs in its own process group so a terminal's Ctrl-C
// does not kill it before it has cleaned up. Close kills it.
func (c *Cluster) startWatchdog() {
	args := append([]string{"-c", watchdogScript, "localpg-watchdog",
		strconv.Itoa(os.Getpid()), filepath.Join(c.dataDir, "postmaster.pid")}, c.removes...)
	cmd := exec.Command("/bin/sh", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		// Not fatal: the cluster works; it just is not reaped on a crash.
		c.log.Warn("starting localpg watchdog; a crash would leak the server", "err", err)
		return
	}
	c.watchdog = cmd
}

// run runs a server binary, as osUser when this process is root, with PG*
// environment variables removed so they cannot redirect it.
func (c *Cluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, name), args...)
	cmd.Dir = c.dir
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PG") })
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	return cmd.CombinedOutput()
}

// portTaken reports whether something else now listens on the loopback
// port, i.e. whether a failed start lost a race for an automatic port.
func portTaken(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return true
	}
	_ = l.Close() // only probing
	return false
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("picking a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("picking a free port: %w", err)
	}
	return port, nil
}
