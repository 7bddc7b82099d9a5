package bench

import (
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// errRealtime wraps the error of switching to SCHED_FIFO (EPERM without
// root or CAP_SYS_NICE, or where RLIMIT_RTPRIO is 0).
var errRealtime = errors.New("real-time scheduling refused")

// withFIFO calls start on an OS thread that runs under SCHED_FIFO at
// priority 1 for the length of the call, so that a process start forks
// (from the calling thread, as os/exec does), and every thread that process
// creates, inherits the policy. The thread goes back to SCHED_OTHER before
// it is released to other goroutines. If the policy cannot be set, start is
// not called and the error wraps errRealtime.
//
// The harness runs kfake this way (KfakeOptions.Realtime): a real-time
// thread runs as soon as it wakes, so the stand-in broker answers without
// waiting behind the load it is measuring on the machine's few CPUs, as a
// broker on its own machines would. kfake's CPU is about 1 µs per event,
// and the kernel caps real-time threads at 95% of each second
// (kernel.sched_rt_runtime_us) in any case.
func withFIFO(start func() error) (err error) {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fifo := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 1}
		if err := unix.SchedSetAttr(0, &fifo, 0); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("%w: %w", errRealtime, err)
			return
		}
		err := start()
		normal := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}
		if rerr := unix.SchedSetAttr(0, &normal, 0); rerr != nil {
			// Keep the thread locked: it ends with this goroutine rather
			// than run other goroutines in real time. A child forked from
			// it gets its Pdeathsig then; the caller stops it.
			done <- errors.Join(err, fmt.Errorf("restoring SCHED_OTHER after starting: %w", rerr))
			return
		}
		runtime.UnlockOSThread()
		done <- err
	}()
	return <-done
}

// schedPolicy returns the scheduling policy of thread tid (unix.SCHED_*).
func schedPolicy(tid int) (uint32, error) {
	attr, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return 0, fmt.Errorf("reading the scheduling policy of thread %d: %w", tid, err)
	}
	return attr.Policy, nil
}
