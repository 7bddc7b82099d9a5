package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat (USER_HZ, 100 on
// every Linux architecture walrelay runs on).
const userHZ = 100

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

// machineBusy sums the non-idle CPU time of /proc/stat's first line.
func machineBusy() (time.Duration, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, fmt.Errorf("reading /proc/stat: %v", sc.Err())
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, fmt.Errorf("parsing /proc/stat: %q", sc.Text())
	}
	var busy int64
	for i, f := range fields[1:9] { // user nice system idle iowait irq softirq steal
		if i == 3 || i == 4 {
			continue // idle, iowait
		}
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parsing /proc/stat: %w", err)
		}
		busy += v
	}
	return time.Duration(busy) * time.Second / userHZ, nil
}

type procStat struct {
	ppid     int
	self     time.Duration // utime+stime
	children time.Duration // cutime+cstime: reaped children
}

// parseStat parses a /proc/<pid>/stat line.
func parseStat(b []byte) (procStat, error) {
	// The command name (field 2) is in parentheses and may hold spaces;
	// fields are counted after its closing parenthesis.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("%d fields", len(f)+2)
	}
	var bad error
	n := func(k int) int64 {
		v, err := strconv.ParseInt(f[k], 10, 64)
		if bad == nil {
			bad = err
		}
		return v
	}
	// f[0] is field 3 (state); ppid is field 4, utime..cstime fields 14-17.
	tick := time.Second / userHZ
	st := procStat{
		ppid:     int(n(1)),
		self:     time.Duration(n(11)+n(12)) * tick,
		children: time.Duration(n(13)+n(14)) * tick,
	}
	return st, bad
}

// allStats reads every process's stat (processes that vanish meanwhile
// are skipped).
func allStats() (map[int]procStat, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := make(map[int]procStat, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		if st, err := parseStat(b); err == nil {
			out[pid] = st
		}
	}
	return out, nil
}

// postmasterPID reads the first line of a data directory's postmaster.pid.
func postmasterPID(dataDir string) int {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(first))
	return pid
}
