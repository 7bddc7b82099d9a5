package bench

import (
	"fmt"
	"os"
	"runtime"
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

// cpuMark samples the machine's CPU for otherShare; a failed sample gives
// a zero mark, which otherShare reports as unknown (-1).
func (e *env) cpuMark() cpuSample {
	if e.postmaster == 0 {
		return cpuSample{} // Postgres is elsewhere: its CPU cannot be told from others'
	}
	s, err := sampleCPU(e.postmaster)
	if err != nil {
		e.cfg.Log.Warn("sampling CPU use", "err", err)
		return cpuSample{}
	}
	return s
}

// otherCPU is the share of the machine's CPU that other work used between
// two marks, or -1 when unknown.
func otherCPU(a, b cpuSample) float64 {
	if a.at.IsZero() || b.at.IsZero() {
		return -1
	}
	return otherShare(a, b)
}
