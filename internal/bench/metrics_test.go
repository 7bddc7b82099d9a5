package bench

import (
	"math"
	"testing"
)

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
