package bench

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestKfakeRealtime starts the kfake child as the harness does, switches
// it as the harness does before the live runs, and reads the scheduling
// policy of each of its threads: the normal policy before, SCHED_FIFO
// after (or, where this process may not use it, EPERM and every thread
// still normal). No thread of the harness itself is switched.
func TestKfakeRealtime(t *testing.T) {
	if !Default().KfakeRealtime {
		t.Error("the harness's default leaves kfake under the normal policy in live runs, want real-time")
	}
	b, err := startBroker(t.Context(), []string{os.Args[0], "kfake"}, KfakeOptions{}, 0, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	checkPolicies(t, "kfake before the switch", b.p.pid(), unix.SCHED_NORMAL)

	want := uint32(unix.SCHED_FIFO)
	if err := b.realtime(); err != nil {
		if !errors.Is(err, unix.EPERM) {
			t.Fatalf("switching kfake to SCHED_FIFO: %v", err)
		}
		t.Logf("this process may not use SCHED_FIFO (%v): checking nothing was switched", err)
		want = unix.SCHED_NORMAL
	}
	checkPolicies(t, "kfake after the switch", b.p.pid(), want)
	// kfake still serves, and threads it starts now inherit the policy.
	ctx := t.Context()
	if err := b.collect(ctx); err != nil {
		t.Fatal(err)
	}
	checkPolicies(t, "kfake after a collection", b.p.pid(), want)
	checkPolicies(t, "the harness", os.Getpid(), unix.SCHED_NORMAL)
}

// checkPolicies fails t unless every thread of pid has policy want.
func checkPolicies(t *testing.T, what string, pid int, want uint32) {
	t.Helper()
	policies, err := threadPolicies(pid)
	if err != nil {
		t.Fatal(err)
	}
	for tid, p := range policies {
		if p != want {
			t.Errorf("%s: thread %d has policy %d, want %d", what, tid, p, want)
		}
	}
}
