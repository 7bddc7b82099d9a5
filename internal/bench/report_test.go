package bench

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s (run with -update to accept):\n--- got\n%s\n--- want\n%s", name, path, got, want)
	}
}

// drainOf is a drain of n events at rate events/s, with cpuUS µs of CPU
// per event and the given peak RSS.
func drainOf(n int, rate, cpuUS float64, rss int64) Drain {
	d := Drain{Seconds: float64(n) / rate, StreamSeconds: float64(n) / rate * 0.9, CPUSeconds: cpuUS * float64(n) / 1e6,
		PeakRSSBytes: rss, WalsenderCPU: 8 * float64(n) / 1e6, BrokerCPU: float64(n) / 1e6}
	d.rates(n)
	return d
}

// sampleReport is a report of one backlog of 1000 single-row events,
// drained three times by each consumer.
func sampleReport() *Report {
	b := BacklogResult{Shape: "single", Style: "rows", Events: 1000, Transactions: 1000, PayloadBytes: 260, WALBytes: 500000, WALBytesPerEvent: 500, BuildSeconds: 1.5,
		FloorRuns:    []Drain{drainOf(1000, 40000, 11, 4<<20), drainOf(1000, 45000, 10, 4<<20), drainOf(1000, 50000, 9, 4<<20)},
		WalrelayRuns: []Drain{drainOf(1000, 50000, 4, 30<<20), drainOf(1000, 60000, 3.5, 31<<20), drainOf(1000, 55000, 3.8, 29<<20)},
	}
	b.summarize()
	return &Report{
		Started:  time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC),
		Seconds:  60,
		Machine:  Machine{CPUs: 2, CPUModel: "test CPU", MemBytes: 24 << 30, Kernel: "6.18", GoVersion: "go1.26.8", LoadStart: 0.1, LoadEnd: 1.2},
		Postgres: "15.18",
		Walrelay: "v0-test",
		Broker:   "kfake (franz-go) in its own process",
		Settings: Settings{Partitions: 3, PayloadBytes: 300, Writers: 8, Repeat: 3, StatusInterval: "100ms"},
		Backlogs: []BacklogResult{b},
	}
}

// TestTableDefault pins the table of an at-least-once run (no
// Config.Deliveries), which comparing delivery modes must leave as it was.
func TestTableDefault(t *testing.T) {
	var out bytes.Buffer
	if err := sampleReport().WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	golden(t, "table_default.golden", out.Bytes())
}

// TestJSONDefault pins the JSON of the same run.
func TestJSONDefault(t *testing.T) {
	var out bytes.Buffer
	if err := sampleReport().WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	golden(t, "json_default.golden", out.Bytes())
}

// deliveriesReport is a run comparing delivery modes: one 100-row backlog
// drained three times in each mode, and one that failed.
func deliveriesReport() *Report {
	eos := func(rate, cpuUS float64, rss int64, txns int64) Drain {
		d := drainOf(1000, rate, cpuUS, rss)
		d.KafkaTransactions = txns
		return d
	}
	b := BacklogResult{Shape: "tx100", Events: 1000, Transactions: 10, PayloadBytes: 260, WALBytes: 400000, BuildSeconds: 0.5,
		FloorRuns: []Drain{drainOf(1000, 100000, 4, 4<<20), drainOf(1000, 110000, 4, 4<<20), drainOf(1000, 120000, 4, 4<<20)},
		Deliveries: []DeliveryResult{
			{Delivery: "at_least_once", Runs: []Drain{drainOf(1000, 120000, 3, 30<<20), drainOf(1000, 100000, 3.2, 29<<20), drainOf(1000, 110000, 2.9, 30<<20)}},
			{Delivery: "exactly_once", Runs: []Drain{eos(90000, 3.6, 31<<20, 12), eos(99000, 3.4, 32<<20, 9), eos(80000, 3.9, 31<<20, 14)}},
		},
	}
	b.summarize()
	r := sampleReport()
	r.Settings.Deliveries = []string{"at_least_once", "exactly_once"}
	r.Backlogs = []BacklogResult{b, {Shape: "onetx", Events: 5000, Transactions: 1, Error: "walrelay exactly_once: walrelay put 4999 records on outbox.event.b2_onetx, want 5000\nmore"}}
	return r
}

// TestSummarizeDeliveries checks each mode's medians and the ratio of
// exactly_once's median events/s to at_least_once's.
func TestSummarizeDeliveries(t *testing.T) {
	b := deliveriesReport().Backlogs[0]
	alo, eos := b.delivery("at_least_once"), b.delivery("exactly_once")
	if alo == nil || eos == nil {
		t.Fatalf("deliveries %+v: want both modes", b.Deliveries)
	}
	if alo.Walrelay.EventsPerSec != 110000 || eos.Walrelay.EventsPerSec != 90000 {
		t.Errorf("medians %v / %v events/s, want 110000 / 90000", alo.Walrelay.EventsPerSec, eos.Walrelay.EventsPerSec)
	}
	if want := 90000.0 / 110000; math.Abs(b.ExactlyOnceRatio-want) > 1e-9 {
		t.Errorf("exactly_once ratio = %v, want %v", b.ExactlyOnceRatio, want)
	}
	if b.ExactlyOnceStreamRatio <= 0 {
		t.Errorf("exactly_once stream ratio = %v, want it set", b.ExactlyOnceStreamRatio)
	}
	// Repetition by repetition: 90/120, 99/100, 80/110.
	wantReps := []float64{0.75, 0.99, 80.0 / 110}
	if len(b.ExactlyOnceRepRatios) != 3 || b.ExactlyOnceRepRatio != b.ExactlyOnceRepRatios[0] {
		t.Fatalf("repetition ratios %v, median %v; want %v, median 0.75", b.ExactlyOnceRepRatios, b.ExactlyOnceRepRatio, wantReps)
	}
	for i, want := range wantReps {
		if math.Abs(b.ExactlyOnceRepRatios[i]-want) > 1e-9 {
			t.Errorf("repetition %d ratio = %v, want %v", i+1, b.ExactlyOnceRepRatios[i], want)
		}
	}
	if alo.MinRate != 100000 || alo.MaxRate != 120000 || eos.PeakRSSBytes != 32<<20 || eos.Walrelay.KafkaTransactions != 12 {
		t.Errorf("exactly_once %+v, at_least_once %+v: want the spread, the largest RSS and the median run's transactions", *eos, *alo)
	}
	// The walrelay fields repeat the first mode's figures, not its runs.
	if b.Walrelay != alo.Walrelay || b.Ratio != alo.Ratio || b.WalrelayPeakRSS != alo.PeakRSSBytes || b.WalrelayRuns != nil {
		t.Errorf("walrelay fields %v, ratio %v, peak %v, %d runs; want the first mode's figures and no runs", b.Walrelay, b.Ratio, b.WalrelayPeakRSS, len(b.WalrelayRuns))
	}
}

// TestTableDeliveries pins the table of a run comparing delivery modes:
// a row per mode, and the exactly_once / at_least_once ratio line.
func TestTableDeliveries(t *testing.T) {
	var out bytes.Buffer
	if err := deliveriesReport().WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	golden(t, "table_deliveries.golden", out.Bytes())
	for _, want := range []string{"delivery at_least_once, exactly_once", "exactly_once / at_least_once", "0.82", "0.75 (0.73-0.99)", "12 (0)", "83"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

// TestTableStyles pins the table of a run with the same backlog as rows
// and as logical messages: the outbox-styles table follows the backlogs.
func TestTableStyles(t *testing.T) {
	r := sampleReport()
	m := BacklogResult{Shape: "msg-single", Style: "messages", Events: 1000, Transactions: 1000, PayloadBytes: 260, WALBytes: 310000, WALBytesPerEvent: 310, BuildSeconds: 1.1,
		FloorRuns:    []Drain{drainOf(1000, 60000, 9, 4<<20), drainOf(1000, 65000, 8, 4<<20), drainOf(1000, 70000, 7, 4<<20)},
		WalrelayRuns: []Drain{drainOf(1000, 52000, 4.5, 30<<20), drainOf(1000, 58000, 4.2, 31<<20), drainOf(1000, 54000, 4.4, 29<<20)},
	}
	m.summarize()
	r.Backlogs = append(r.Backlogs, m)
	var out bytes.Buffer
	if err := r.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	golden(t, "table_styles.golden", out.Bytes())
}

func TestStylePairs(t *testing.T) {
	d := drainOf(10, 100, 1, 1)
	bl := func(shape, style string, n int, failed bool) BacklogResult {
		b := BacklogResult{Shape: shape, Style: style, Events: n, Walrelay: &d}
		if failed {
			b.Error, b.Walrelay = "boom", nil
		}
		return b
	}
	backlogs := []BacklogResult{
		bl("single", "rows", 10, false),
		bl("tx10", "rows", 10, true),
		bl("msg-tx10", "messages", 10, false),   // its rows failed: no pair
		bl("msg-single", "messages", 20, false), // other size: no pair
		bl("msg-single", "messages", 10, false),
		bl("msg-onetx", "messages", 10, true),
	}
	pairs := stylePairs(backlogs)
	if len(pairs) != 1 || pairs[0].rows != &backlogs[0] || pairs[0].messages != &backlogs[4] {
		t.Fatalf("stylePairs = %+v, want single:10 with msg-single:10", pairs)
	}
}
