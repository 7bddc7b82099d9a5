package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// cpuSample is the machine's busy CPU time and the CPU time of the
// benchmark's processes: the harness and its children (walrelay,
// pg_recvlogical, kfake, go build) and, with a private cluster, every
// Postgres process. Comparing two samples tells what other work on the
// machine took while a measurement ran.
type cpuSample struct {
	at    time.Time
	total time.Duration    // busy time of all CPUs (/proc/stat)
	procs map[int]procStat // the benchmark's processes, by pid
}

// sampleCPU takes a sample; postmaster is the private cluster's
// postmaster pid (0: Postgres is not ours to count).
func sampleCPU(postmaster int) (cpuSample, error) {
	s := cpuSample{at: time.Now()}
	total, err := machineBusy()
	if err != nil {
		return s, err
	}
	s.total = total
	all, err := allStats()
	if err != nil {
		return s, err
	}
	roots := map[int]bool{os.Getpid(): true}
	if postmaster > 0 {
		roots[postmaster] = true
	}
	s.procs = make(map[int]procStat)
	for pid, st := range all {
		for p, depth := pid, 0; p > 1 && depth < 8; p, depth = all[p].ppid, depth+1 {
			if roots[p] {
				s.procs[pid] = st
				break
			}
			if _, ok := all[p]; !ok {
				break
			}
		}
	}
	if _, ok := s.procs[os.Getpid()]; !ok {
		return s, fmt.Errorf("the harness is not in /proc")
	}
	return s, nil
}

// oursBetween is the CPU time the benchmark's processes spent between a
// and b. A process that exited in between is in its parent's children
// time by b, with everything it ever spent: only what it spent after a
// counts. (Counting a parent's children time as it grows would charge a
// backend's whole life to the moment the postmaster reaps it.)
func oursBetween(a, b cpuSample) time.Duration {
	var d time.Duration
	for pid, st := range b.procs {
		if prev, ok := a.procs[pid]; ok {
			d += st.self - prev.self + st.children - prev.children
		} else {
			d += st.self + st.children
		}
	}
	for pid, st := range a.procs {
		if _, ok := b.procs[pid]; !ok {
			d -= st.self + st.children
		}
	}
	return d
}

// otherShare is the share of the machine's CPU capacity (all CPUs) that
// processes outside the benchmark used between a and b.
func otherShare(a, b cpuSample) float64 {
	wall := b.at.Sub(a.at)
	if wall <= 0 {
		return 0
	}
	other := (b.total - a.total) - oursBetween(a, b)
	return max(0, other.Seconds()/(wall.Seconds()*float64(runtime.NumCPU())))
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
