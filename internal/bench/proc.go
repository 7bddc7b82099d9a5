package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/walrelay/walrelay/internal/localpg"
)

// proc is a child process in its own process group. It is killed (the
// whole group) by stop, and by the kernel when this process dies
// (Pdeathsig), so no child outlives the harness.
type proc struct {
	name    string
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{} // closed when Wait returned
	waitErr error
	exitAt  time.Time // when Wait returned; read after done is closed
	logPath string    // the child's stderr, "" when not captured
}

// startProc starts cmd in its own process group. stderr goes to logPath
// when it is not empty.
func startProc(name string, cmd *exec.Cmd, logPath string) (*proc, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var logFile *os.File
	if logPath != "" {
		f, err := os.Create(logPath)
		if err != nil {
			return nil, fmt.Errorf("creating log of %s: %w", name, err)
		}
		logFile = f
		cmd.Stderr = f
		if cmd.Stdout == nil {
			cmd.Stdout = f
		}
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), logPath: logPath}
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		if logFile != nil {
			_ = logFile.Close()
		}
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		p.exitAt = time.Now()
		if logFile != nil {
			_ = logFile.Close()
		}
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends sig to the process group, waits up to grace for the process
// to exit, then kills the group. It returns the process's exit error (nil
// for a clean exit after sig).
func (p *proc) stop(sig syscall.Signal, grace time.Duration) error {
	if p.exited() {
		return p.waitErr
	}
	_ = syscall.Kill(-p.pid(), sig) // ESRCH: already gone
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("%s did not exit within %s of %s; killed", p.name, grace, sig)
	}
	// Anything else left in the group (there should be nothing) goes too.
	_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
	return p.waitErr
}

// wait waits for the process to exit or ctx to be done (then kills it).
func (p *proc) wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.waitErr
	case <-ctx.Done():
		_ = p.stop(syscall.SIGKILL, 5*time.Second)
		return ctx.Err()
	}
}

// rusage is the process's resource usage once it has exited.
func (p *proc) rusage() (cpu time.Duration, maxRSS int64, ok bool) {
	if !p.exited() || p.cmd.ProcessState == nil {
		return 0, 0, false
	}
	ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, 0, false
	}
	cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return cpu, ru.Maxrss * 1024, true
}

// logTail returns the last n lines of the child's log.
func (p *proc) logTail(n int) string { return localpg.TailFile(p.logPath, n) }

// childEnv returns the environment for a child: this process's, without
// any WALRELAY_* variable (walrelay rejects unknown ones), plus extra.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "WALRELAY_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}
