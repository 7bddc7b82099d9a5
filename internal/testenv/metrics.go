package testenv

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// MetricValue gathers reg and returns the value of the first series of
// name whose labels include labels (nil: any series): a counter's or a
// gauge's value, a histogram's sample count. It fails the test when there
// is no such series.
func MetricValue(tb testing.TB, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	tb.Helper()
	v, ok := FindMetric(tb, reg, name, labels)
	if !ok {
		tb.Fatalf("testenv: no series %s%v", name, labels)
	}
	return v
}

// FindMetric is MetricValue that reports whether the series exists
// instead of failing the test.
func FindMetric(tb testing.TB, reg prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	tb.Helper()
	families, err := reg.Gather()
	if err != nil {
		tb.Fatalf("testenv: gathering metrics: %v", err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			return metricValue(m), true
		}
	}
	return 0, false
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}
