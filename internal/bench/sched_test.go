package bench

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// TestKfakeRealtime starts the kfake child as the harness does and reads
// the scheduling policy of each of its threads: SCHED_FIFO with Realtime
// (or, where this process may not use it, the normal policy and a reason),
// the normal policy without. Either way no thread of the harness itself is
// left real-time.
func TestKfakeRealtime(t *testing.T) {
	if !Default().Kfake.Realtime {
		t.Error("the harness's default runs kfake under the normal policy, want real-time")
	}
	for _, realtime := range []bool{true, false} {
		b, err := startBroker(t.Context(), []string{os.Args[0], "kfake"}, KfakeOptions{Realtime: realtime}, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		policies, err := threadPolicies(b.p.pid())
		b.close()
		if err != nil {
			t.Fatal(err)
		}
		want := uint32(unix.SCHED_NORMAL)
		switch {
		case realtime && b.realtimeErr == nil:
			want = unix.SCHED_FIFO
		case realtime:
			if !errors.Is(b.realtimeErr, unix.EPERM) {
				t.Errorf("Realtime: SCHED_FIFO refused with %v, want EPERM", b.realtimeErr)
			}
			t.Logf("this process may not use SCHED_FIFO (%v): checking the fallback", b.realtimeErr)
		case b.realtimeErr != nil:
			t.Errorf("without Realtime: realtimeErr %v, want nil", b.realtimeErr)
		}
		for tid, p := range policies {
			if p != want {
				t.Errorf("Realtime %t: kfake thread %d has policy %d, want %d", realtime, tid, p, want)
			}
		}
		self, err := threadPolicies(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		for tid, p := range self {
			if p != unix.SCHED_NORMAL {
				t.Errorf("Realtime %t: the harness's thread %d has policy %d after starting kfake, want SCHED_NORMAL", realtime, tid, p)
			}
		}
	}
}

// threadPolicies returns the scheduling policy of every thread of pid.
func threadPolicies(pid int) (map[int]uint32, error) {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, err
	}
	out := make(map[int]uint32, len(entries))
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, err := schedPolicy(tid)
		if err != nil {
			return nil, err
		}
		out[tid] = p
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no threads of process %d", pid)
	}
	return out, nil
}
