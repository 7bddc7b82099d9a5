package bench

import (
	"math"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseBacklogs(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		want    []Backlog
		wantErr string
	}{
		{"default set", "single:200k,tx100:500k,onetx:1m", []Backlog{{Shape{1}, 200000}, {Shape{100}, 500000}, {Shape{0}, 1000000}}, ""},
		{"tx1 is single", "tx1:10", []Backlog{{Shape{1}, 10}}, ""},
		{"spaces and empty items", " single:5 , ,tx10:20", []Backlog{{Shape{1}, 5}, {Shape{10}, 20}}, ""},
		{"missing count", "single", nil, "want shape:N"},
		{"bad shape", "batch:10", nil, "unknown shape"},
		{"tx0", "tx0:10", nil, "unknown shape"},
		{"zero count", "single:0", nil, "positive"},
		{"bad count", "single:ten", nil, "positive"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseBacklogs(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseBacklogs(%q) error = %v, want one containing %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseBacklogs(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestParseLives(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		want    []Live
		wantErr string
	}{
		{"rates and max", "single@2000,tx10@20k,single@max", []Live{{Shape{1}, 2000}, {Shape{10}, 20000}, {Shape{1}, 0}}, ""},
		{"onetx has no rate", "onetx@100", nil, "no steady rate"},
		{"missing rate", "single", nil, "want shape@rate"},
		{"zero rate", "single@0", nil, "positive"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseLives(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseLives(%q) error = %v, want one containing %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseLives(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestFormatRoundTrip(t *testing.T) {
	d := Default()
	bs, err := ParseBacklogs(FormatList(d.Backlogs))
	if err != nil || !reflect.DeepEqual(bs, d.Backlogs) {
		t.Errorf("backlogs %q parse back as %v, %v", FormatList(d.Backlogs), bs, err)
	}
	ls, err := ParseLives(FormatList(append(d.Lives, Live{Shape{1}, 0})))
	if err != nil || !reflect.DeepEqual(ls, append(d.Lives, Live{Shape{1}, 0})) {
		t.Errorf("lives %q parse back as %v, %v", FormatList(d.Lives), ls, err)
	}
}

func TestValidate(t *testing.T) {
	ok := Default()
	ok.BrokerCommand = []string{"x", "kfake"}
	cases := []struct {
		name    string
		mutate  func(*Config)
		wantErr string // "" means valid
	}{
		{"default", func(*Config) {}, ""},
		{"nothing to do", func(c *Config) { c.Backlogs, c.Lives = nil, nil }, "nothing to measure"},
		{"N not a multiple", func(c *Config) { c.Backlogs = []Backlog{{Shape{100}, 150}} }, "multiple"},
		{"status interval", func(c *Config) { c.StatusInterval = time.Millisecond }, "status-interval=1ms"},
		{"no broker", func(c *Config) { c.BrokerCommand = nil }, "broker-command"},
		{"bad env", func(c *Config) { c.WalrelayEnv = []string{"KAFKA_LINGER=1ms"} }, "walrelay-env=KAFKA_LINGER=1ms"},
		{"repeat", func(c *Config) { c.Repeat = 0 }, "repeat=0"},
		{"unix socket", func(c *Config) { c.PGUnixSocket = true }, ""},
		{"unix socket with dsn", func(c *Config) { c.PGUnixSocket, c.DSN = true, "postgres://x@db/x" }, "pg-unix-socket"},
		{"kfake heap", func(c *Config) { c.KfakeHeapMiB = -1 }, "kfake-heap-mib=-1"},
		{"kfake default collector", func(c *Config) { c.KfakeHeapMiB = 0 }, ""},
		{"blackhole with live runs", func(c *Config) { c.KfakeBlackhole = true }, "kfake-blackhole=true"},
		{"blackhole for backlogs", func(c *Config) { c.KfakeBlackhole, c.Lives = true, nil }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mutate(&c)
			err := c.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestPayloadTS(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want int64
		ok   bool
	}{
		{"jsonb text", `{"ts": 1763712000123456, "pad": "x", "seq": 1}`, 1763712000123456, true},
		{"missing", `{"seq": 1}`, 0, false},
		{"not a number", `{"ts": "x"}`, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := payloadTS([]byte(tc.in))
			if got != tc.want || ok != tc.ok {
				t.Fatalf("payloadTS(%s) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestQuantiles(t *testing.T) {
	us := make([]int64, 1000)
	for i := range us {
		us[i] = int64(1000 - i) // 1000µs down to 1µs, unsorted
	}
	q := quantiles(us)
	want := Quantiles{Samples: 1000, P50: 0.5, P99: 0.99, P999: 0.999, Max: 1, Mean: 0.5005}
	if q != want {
		t.Fatalf("quantiles = %+v, want %+v", q, want)
	}
	if q := quantiles(nil); q != (Quantiles{}) {
		t.Fatalf("quantiles(nil) = %+v, want zero", q)
	}
}

func TestHistogramQuantiles(t *testing.T) {
	before := map[float64]uint64{0.001: 10, 0.002: 10, 0.004: 10, math.Inf(1): 10}
	// 100 new observations: 50 in (0,1ms], 40 in (1,2ms], 10 in (2,4ms].
	after := map[float64]uint64{0.001: 60, 0.002: 100, 0.004: 110, math.Inf(1): 110}
	q, ok := histogramQuantiles(before, after)
	if !ok {
		t.Fatal("no quantiles")
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if q.Samples != 100 || !near(q.P50, 1) || !near(q.P99, 3.8) || !near(q.P999, 3.98) {
		t.Fatalf("histogramQuantiles = %+v, want 100 samples, p50 1ms, p99 3.8ms, p99.9 3.98ms", q)
	}
	if _, ok := histogramQuantiles(after, after); ok {
		t.Fatal("no new observations gave quantiles")
	}
}

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

func TestSplitPassword(t *testing.T) {
	cases := []struct {
		name, dsn, conninfo, password string
	}{
		{"url without password", "postgres://walrelay@127.0.0.1:5432/postgres?sslmode=disable", "postgres://walrelay@127.0.0.1:5432/postgres?sslmode=disable", ""},
		{"url with password", "postgres://u:s3cret@db:5432/app", "postgres://u@db:5432/app", "s3cret"},
		{"url password parameter", "postgresql://u@db/app?password=s3cret&sslmode=require", "postgresql://u@db/app?sslmode=require", "s3cret"},
		{"key value", "host=db user=u password=s3cret dbname=app", "host=db user=u dbname=app", "s3cret"},
		{"quoted key value", "host=db password='a b' dbname=app", "host=db dbname=app", "a b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, p := splitPassword(tc.dsn)
			if c != tc.conninfo || p != tc.password {
				t.Fatalf("splitPassword(%q) = %q, %q; want %q, %q", tc.dsn, c, p, tc.conninfo, tc.password)
			}
		})
	}
}

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

func TestWaitsOf(t *testing.T) {
	// Go's scheduler histogram bounds around 1ms and 10ms; 200 new samples:
	// 150 at most 0.92ms, 40 more at most 10.5ms, 10 above.
	before := map[float64]uint64{0.000917504: 100, 0.01048576: 110, 0.134217728: 110, math.Inf(1): 110}
	after := map[float64]uint64{0.000917504: 250, 0.01048576: 300, 0.134217728: 310, math.Inf(1): 310}
	w := waitsOf(before, after)
	if w == nil || w.Samples != 200 || w.Bound1 != 0.000917504 || w.Bound10 != 0.01048576 {
		t.Fatalf("waitsOf = %+v, want 200 samples, bounds 0.92ms and 10.5ms", w)
	}
	if math.Abs(w.Over1-0.25) > 1e-12 || math.Abs(w.Over10-0.05) > 1e-12 {
		t.Errorf("waitsOf shares = %v over 0.92ms, %v over 10.5ms; want 0.25, 0.05", w.Over1, w.Over10)
	}
	if waitsOf(after, after) != nil || waitsOf(nil, after) != nil {
		t.Error("waitsOf without new samples, or without a first scrape, gave shares")
	}
}

// TestSchedOf reads the scheduler accounting of each hop the live report
// shows: walrelay always, the walsender only from a local cluster (here
// this process stands in for both), the broker only when the harness
// started one.
func TestSchedOf(t *testing.T) {
	if _, err := os.Stat("/proc/self/schedstat"); err != nil {
		t.Skipf("no schedstat on this kernel: %v", err)
	}
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: &exec.Cmd{Process: self}}
	w := &slotWatch{view: slotView{activePID: os.Getpid()}}
	for _, local := range []bool{true, false} {
		st := (&env{local: local}).schedOf(p, w)
		if st[0].pid != os.Getpid() || st[0].run <= 0 {
			t.Errorf("local %t: walrelay's reading %+v, want this process's", local, st[0])
		}
		if got := st[1].pid == os.Getpid() && st[1].run > 0; got != local {
			t.Errorf("local %t: walsender's reading %+v", local, st[1])
		}
		if st[2] != (schedStat{}) {
			t.Errorf("local %t: a broker reading %+v without a broker", local, st[2])
		}
	}
}
