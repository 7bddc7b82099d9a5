package schemareg_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/internal/schemareg"
	"github.com/walrelay/walrelay/internal/testenv"
)

// TestMetrics: internal/metrics' registry metrics as the client's Hooks,
// registered only once asked for.
func TestMetrics(t *testing.T) {
	promReg := prometheus.NewRegistry()
	m := metrics.New(promReg, "test", "slot")
	if n := families(t, promReg); n != 0 {
		t.Fatalf("%d walrelay_schema_registry_ families before any use; want none", n)
	}
	reg := testenv.Registry(t)
	reg.Register("s", recA)
	c, err := schemareg.New(schemareg.Config{URLs: []string{reg.URL()}, Hooks: m.SchemaRegistry(), MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 3 {
		if _, err := c.ID(ctx, "s", recA, autoRegister); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.ID(ctx, "s", recAB, autoRegister); !errors.Is(err, schemareg.ErrRejected) {
		t.Fatalf("incompatible: %v", err)
	}
	reg.Unavailable()
	done := make(chan error, 1)
	go func() { _, err := c.ID(ctx, "t", recA, autoRegister); done <- err }()
	waitFor(t, "waiting = 1", func() bool {
		return testutil.ToFloat64(series(t, promReg, "walrelay_schema_registry_waiting")) == 1
	})
	reg.Up()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := `
# HELP walrelay_schema_registry_cache_hits_total Schema ids and registered schemas answered from walrelay's cache.
# TYPE walrelay_schema_registry_cache_hits_total counter
walrelay_schema_registry_cache_hits_total 2
# HELP walrelay_schema_registry_cache_misses_total Schema ids and registered schemas that needed the schema registry.
# TYPE walrelay_schema_registry_cache_misses_total counter
walrelay_schema_registry_cache_misses_total 3
# HELP walrelay_schema_registry_waiting 1 while the stream waits for the schema registry (unavailable, or refusing the credentials); Postgres keeps the WAL meanwhile.
# TYPE walrelay_schema_registry_waiting gauge
walrelay_schema_registry_waiting 0
`
	if err := testutil.GatherAndCompare(promReg, strings.NewReader(want),
		"walrelay_schema_registry_cache_hits_total", "walrelay_schema_registry_cache_misses_total", "walrelay_schema_registry_waiting"); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(series(t, promReg, "walrelay_schema_registry_requests_total", "409", "register")); got != 1 {
		t.Errorf("register 409 requests = %v, want 1", got)
	}
	if got := testutil.ToFloat64(series(t, promReg, "walrelay_schema_registry_requests_total", "200", "register")); got != 2 {
		t.Errorf("register 200 requests = %v, want 2", got)
	}
	if got := testutil.ToFloat64(series(t, promReg, "walrelay_schema_registry_errors_total", "rejected")); got != 1 {
		t.Errorf("rejected errors = %v, want 1", got)
	}
	if got := testutil.ToFloat64(series(t, promReg, "walrelay_schema_registry_errors_total", "unavailable")); got < 1 {
		t.Errorf("unavailable errors = %v, want >= 1", got)
	}
	if n := families(t, promReg); n != 6 {
		t.Errorf("%d walrelay_schema_registry_ families, want 6", n)
	}
}

func families(t *testing.T, g prometheus.Gatherer) int {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "walrelay_schema_registry_") {
			n++
		}
	}
	return n
}

// series wraps the gathered value of name with the given label values (in
// the labels' name order) as a collector testutil.ToFloat64 reads; 0 when absent.
func series(t *testing.T, g prometheus.Gatherer, name string, labels ...string) prometheus.Collector {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	v := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			lp := m.GetLabel()
			if len(lp) != len(labels) {
				continue
			}
			for i, l := range lp {
				if l.GetValue() != labels[i] {
					continue metric
				}
			}
			switch {
			case m.GetCounter() != nil:
				v = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				v = m.GetGauge().GetValue()
			}
		}
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "x", Help: "x"}, func() float64 { return v })
}
