package bench

import (
	"os"
	"testing"
	"time"
)

func TestProcReadings(t *testing.T) {
	// Burn a little CPU so the reading is not zero.
	deadline := time.Now().Add(50 * time.Millisecond)
	for x := 0; time.Now().Before(deadline); x++ {
		_ = x * x
	}
	cpu, err := ProcessCPU(os.Getpid())
	if err != nil || cpu <= 0 {
		t.Fatalf("ProcessCPU(self) = %v, %v; want > 0", cpu, err)
	}
	hwm, err := procHWM(os.Getpid())
	if err != nil || hwm < 1<<20 {
		t.Fatalf("procHWM(self) = %d, %v; want at least 1 MiB", hwm, err)
	}
	if total, err := procKB("/proc/meminfo", "MemTotal"); err != nil || total < hwm {
		t.Fatalf("MemTotal = %d, %v; want at least this process's peak RSS", total, err)
	}
	if _, err := procKB("/proc/meminfo", "NoSuchKey"); err == nil {
		t.Fatal("procKB found a key /proc/meminfo does not have")
	}
	// Every thread's time on a CPU, in ns: at least the 50ms burnt above.
	if _, err := os.Stat("/proc/self/schedstat"); err != nil {
		t.Skipf("no schedstat on this kernel: %v", err)
	}
	st, err := processSched(os.Getpid())
	if err != nil || st.pid != os.Getpid() || st.run < 50*time.Millisecond || st.wait < 0 {
		t.Fatalf("processSched(self) = %+v, %v; want at least 50ms on a CPU", st, err)
	}
}

func TestSchedstat(t *testing.T) {
	run, wait, err := parseSchedstat([]byte("1500000000 500000000 1234\n"))
	if err != nil || run != 1500*time.Millisecond || wait != 500*time.Millisecond {
		t.Fatalf("parseSchedstat = %v, %v, %v; want 1.5s, 0.5s", run, wait, err)
	}
	for _, bad := range []string{"", "12", "x 12 3", "12 y 3"} {
		if _, _, err := parseSchedstat([]byte(bad)); err == nil {
			t.Errorf("parseSchedstat(%q) parsed", bad)
		}
	}
	a, b := schedStat{pid: 9, run: time.Second, wait: time.Second}, schedStat{pid: 9, run: 3 * time.Second, wait: 4 * time.Second}
	if got := waitPerRun(a, b); got != 1.5 {
		t.Errorf("waitPerRun = %v, want 1.5 (3s waiting over 2s on a CPU)", got)
	}
	if got := waitPerRun(schedStat{}, b); got != -1 {
		t.Errorf("waitPerRun with an unread start = %v, want -1", got)
	}
	if got := waitPerRun(a, a); got != -1 {
		t.Errorf("waitPerRun without running = %v, want -1", got)
	}
	if c := (schedStat{pid: 7, run: b.run, wait: b.wait}); waitPerRun(a, c) != -1 {
		t.Errorf("waitPerRun across two processes = %v, want -1", waitPerRun(a, c))
	}
}

func TestParseStat(t *testing.T) {
	// A command name with spaces and a parenthesis; utime 7, stime 3,
	// cutime 20, cstime 5 ticks; ppid 42.
	line := "1234 (postgres: walsender (x) ) S 42 1234 1234 0 -1 4194560 100 0 0 0 7 3 20 5 20 0 1 0 100 0 0\n"
	st, err := parseStat([]byte(line))
	tick := time.Second / userHZ
	if err != nil || st != (procStat{ppid: 42, self: 10 * tick, children: 25 * tick}) {
		t.Fatalf("parseStat = %+v, %v", st, err)
	}
	for _, bad := range []string{"1234 postgres S 42", "1 (x) S 42 1 1 0 -1 0 0 0 0 0 7 3", "1 (x) S 42 1 1 0 -1 0 0 0 0 0 7 three 20 5"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) parsed", bad)
		}
	}
}
