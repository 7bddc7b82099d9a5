package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/walrelay/walrelay/pkg/localpg"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat (USER_HZ, 100 on
// every Linux architecture walrelay runs on).
const userHZ = 100

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

// SelfCPU returns the CPU time (user + system, all threads) this process
// has used, to the microsecond (getrusage; ProcessCPU's /proc counts
// 10 ms ticks): for the Go benchmarks that measure their own process.
// getrusage fails only on a bad pointer or a bad "who", neither possible
// here.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ProcessCPU returns the CPU time (user + system, all threads) pid has
// used, from /proc/<pid>/stat, which is readable for any process (a
// walsender's too). Its resolution is 1/userHZ s.
func ProcessCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	st, err := parseStat(b)
	if err != nil {
		return 0, fmt.Errorf("parsing /proc/%d/stat: %w", pid, err)
	}
	return st.self, nil
}

// schedStat is a process's scheduler accounting summed over its threads:
// time on a CPU and time runnable but waiting for one. pid 0 is no reading.
type schedStat struct {
	pid       int
	run, wait time.Duration
}

// waitPerRun is the time spent waiting for a CPU per second on one, from
// a to b (readings of one process); -1 when unknown.
func waitPerRun(a, b schedStat) float64 {
	run := b.run - a.run
	if a.pid == 0 || a.pid != b.pid || run <= 0 {
		return -1
	}
	return float64(b.wait-a.wait) / float64(run)
}

// processSched reads pid's threads' /proc/<pid>/task/<tid>/schedstat (ns on
// a CPU, ns waiting on a run queue, time slices). A thread that exits
// between two readings takes its share with it, which Go's long-lived
// threads rarely do.
func processSched(pid int) (schedStat, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return schedStat{}, err
	}
	st := schedStat{pid: pid}
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if errors.Is(err, fs.ErrNotExist) {
			continue // the thread exited
		}
		if err != nil {
			return schedStat{}, err
		}
		run, wait, err := parseSchedstat(b)
		if err != nil {
			return schedStat{}, fmt.Errorf("parsing %s/%s/schedstat: %w", dir, t.Name(), err)
		}
		st.run += run
		st.wait += wait
	}
	return st, nil
}

// parseSchedstat parses a schedstat line: "<run ns> <wait ns> <slices>".
func parseSchedstat(b []byte) (run, wait time.Duration, err error) {
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, 0, fmt.Errorf("%q: want at least 2 fields", b)
	}
	r, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, 0, err
	}
	w, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, 0, err
	}
	return time.Duration(r), time.Duration(w), nil
}

// procHWM returns pid's peak resident set size (VmHWM) in bytes.
func procHWM(pid int) (int64, error) {
	return procKB("/proc/"+strconv.Itoa(pid)+"/status", "VmHWM")
}

// procKB reads key's "key: N kB" line from a /proc file (status,
// meminfo), in bytes.
func procKB(path, key string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parsing %s in %s: %w", key, path, err)
			}
			return kb * 1024, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s in %s", key, path)
}

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
