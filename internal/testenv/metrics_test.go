package testenv_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/testenv"
)

func TestMetricValue(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total"}, []string{"topic"})
	c.WithLabelValues("a").Add(2)
	c.WithLabelValues("b").Add(5)
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"})
	g.Set(7)
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h"})
	h.Observe(1)
	h.Observe(2)
	reg.MustRegister(c, g, h)
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
		found  bool
	}{
		{"c_total", map[string]string{"topic": "b"}, 5, true},
		{"c_total", map[string]string{"topic": "z"}, 0, false},
		{"g", nil, 7, true},
		{"h", nil, 2, true}, // a histogram's sample count
		{"missing", nil, 0, false},
	} {
		got, found := testenv.FindMetric(t, reg, tc.name, tc.labels)
		if got != tc.want || found != tc.found {
			t.Errorf("FindMetric(%s%v) = %v, %t; want %v, %t", tc.name, tc.labels, got, found, tc.want, tc.found)
		}
	}
	if got := testenv.MetricValue(t, reg, "c_total", map[string]string{"topic": "a"}); got != 2 {
		t.Errorf("MetricValue(c_total{topic=a}) = %v, want 2", got)
	}
}
