package bench

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// setFIFO switches every thread of process pid to SCHED_FIFO at priority
// 1. A thread inherits its creator's policy, so it makes passes over
// /proc/<pid>/task until one finds no thread left to switch: a thread
// created during a pass by one not yet switched is caught by the next.
// Without root or CAP_SYS_NICE the first switch fails with EPERM, and
// nothing is changed.
//
// The harness switches kfake before its live runs (Config.KfakeRealtime):
// a real-time thread runs as soon as it wakes, so the stand-in broker
// answers without waiting behind the load it is measuring on the
// machine's few CPUs, as a broker on its own machines would. kfake uses
// little CPU per event (the reports' kfake column), and the kernel caps
// real-time threads at 95% of each second (kernel.sched_rt_runtime_us)
// in any case.
func setFIFO(pid int) error {
	fifo := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 1}
	for pass := 0; pass < 10; pass++ {
		policies, err := threadPolicies(pid)
		if err != nil {
			return err
		}
		switched := 0
		for tid, p := range policies {
			if p == unix.SCHED_FIFO {
				continue
			}
			if err := unix.SchedSetAttr(tid, &fifo, 0); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("switching thread %d of process %d to SCHED_FIFO: %w", tid, pid, err)
			}
			switched++
		}
		if switched == 0 {
			return nil
		}
	}
	return fmt.Errorf("process %d kept creating threads while they were switched to SCHED_FIFO", pid)
}

// threadPolicies returns the scheduling policy (unix.SCHED_*) of every
// thread of process pid. A thread that exits while it is read is left out.
func threadPolicies(pid int) (map[int]uint32, error) {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, fmt.Errorf("listing the threads of process %d: %w", pid, err)
	}
	out := make(map[int]uint32, len(entries))
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		attr, err := unix.SchedGetAttr(tid, 0)
		switch {
		case errors.Is(err, unix.ESRCH):
			continue
		case err != nil:
			return nil, fmt.Errorf("reading the scheduling policy of thread %d: %w", tid, err)
		}
		out[tid] = attr.Policy
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("process %d has no threads", pid)
	}
	return out, nil
}
