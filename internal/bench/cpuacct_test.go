package bench

import (
	"testing"
	"time"
)

func TestCPUAccounting(t *testing.T) {
	a, err := sampleCPU(0)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(100 * time.Millisecond)
	for x := 0; time.Now().Before(deadline); x++ {
		_ = x * x
	}
	b, err := sampleCPU(0)
	if err != nil {
		t.Fatal(err)
	}
	if ours := oursBetween(a, b); b.total <= a.total || ours <= 0 {
		t.Fatalf("busy %v -> %v, ours %v: want both to grow after burning CPU", a.total, b.total, ours)
	}
	if s := otherShare(a, b); s < 0 || s > 1 {
		t.Fatalf("otherShare = %v, want a share in [0, 1]", s)
	}
	if otherCPU(cpuSample{}, b) != -1 {
		t.Fatal("otherCPU without a first mark is not unknown")
	}
}

// A backend that ran before the window and exits in it counts only for
// what it spent in the window, although the postmaster's children time
// takes its whole life when it is reaped; a process started and reaped in
// the window counts whole.
func TestOursBetweenChargesExitedProcessesOnce(t *testing.T) {
	const s = time.Second
	a := cpuSample{procs: map[int]procStat{
		10: {self: 1 * s},            // postmaster
		11: {ppid: 10, self: 40 * s}, // a writer backend from the build
		12: {ppid: 10, self: 5 * s},  // the walsender
	}}
	b := cpuSample{procs: map[int]procStat{
		10: {self: 1 * s, children: 42 * s}, // reaped 11 (42s) ...
		12: {ppid: 10, self: 8 * s},
		13: {ppid: 10, self: 1 * s}, // ... and a new backend still running
	}}
	// 11: 2s after a; 12: 3s; 13: 1s.
	if got, want := oursBetween(a, b), 6*s; got != want {
		t.Errorf("oursBetween = %v, want %v", got, want)
	}
}
