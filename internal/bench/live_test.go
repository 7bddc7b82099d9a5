package bench

import (
	"os"
	"os/exec"
	"testing"
)

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
