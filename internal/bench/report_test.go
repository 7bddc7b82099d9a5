package bench

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
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
	b := BacklogResult{Shape: "single", Events: 1000, Transactions: 1000, PayloadBytes: 260, WALBytes: 500000, BuildSeconds: 1.5,
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
