package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Quantiles summarise a latency distribution, in milliseconds.
type Quantiles struct {
	Samples int     `json:"samples"`
	P50     float64 `json:"p50_ms"`
	P99     float64 `json:"p99_ms"`
	P999    float64 `json:"p999_ms"`
	Max     float64 `json:"max_ms,omitempty"`
	Mean    float64 `json:"mean_ms,omitempty"`
}

// quantiles of µs samples, in ms (nearest rank).
func quantiles(us []int64) Quantiles {
	q := Quantiles{Samples: len(us)}
	if len(us) == 0 {
		return q
	}
	slices.Sort(us)
	at := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(us)))) - 1
		return float64(us[max(0, min(i, len(us)-1))]) / 1000
	}
	var sum float64
	for _, v := range us {
		sum += float64(v)
	}
	q.P50, q.P99, q.P999 = at(0.50), at(0.99), at(0.999)
	q.Max = float64(us[len(us)-1]) / 1000
	q.Mean = sum / float64(len(us)) / 1000
	return q
}

// walrelay's latency histograms, as its HTTP listener exports them.
const (
	histEndToEnd     = "walrelay_end_to_end_latency_seconds"
	histCommitRead   = "walrelay_commit_read_latency_seconds"
	histProduceAck   = "walrelay_produce_ack_latency_seconds"
	histKafkaRequest = "walrelay_kafka_request_duration_e2e_seconds"
	histGoSched      = "go_sched_latencies_seconds"
)

// Waits are the share of a histogram's observations between two scrapes
// above the bucket bounds nearest 1ms and 10ms (Go's scheduler histogram
// has few buckets: 0.92ms and 10.5ms there).
type Waits struct {
	Samples uint64 `json:"samples"`
	// Over1 is the share above Bound1 (seconds), Over10 above Bound10.
	Over1   float64 `json:"share_over_bound1"`
	Bound1  float64 `json:"bound1_seconds"`
	Over10  float64 `json:"share_over_bound10"`
	Bound10 float64 `json:"bound10_seconds"`
}

// waitsOf computes Waits from two scrapes of a histogram's cumulative
// buckets; nil when either is missing or nothing was observed.
func waitsOf(before, after map[float64]uint64) *Waits {
	if before == nil || after == nil {
		return nil
	}
	total := after[math.Inf(1)] - before[math.Inf(1)]
	if total == 0 {
		return nil
	}
	nearest := func(want float64) float64 {
		best := math.Inf(1)
		for b := range after {
			if !math.IsInf(b, 1) && math.Abs(math.Log(b/want)) < math.Abs(math.Log(best/want)) {
				best = b
			}
		}
		return best
	}
	over := func(bound float64) float64 {
		return float64(total-(after[bound]-before[bound])) / float64(total)
	}
	w := &Waits{Samples: total, Bound1: nearest(0.001), Bound10: nearest(0.010)}
	w.Over1, w.Over10 = over(w.Bound1), over(w.Bound10)
	return w
}

// histograms are a scrape's cumulative bucket counts by upper bound, per
// histogram name (summed over label sets).
type histograms map[string]map[float64]uint64

// quantiles estimates the quantiles of name's observations since before,
// or nil when either scrape lacks it or nothing was observed in between.
func (h histograms) quantiles(before histograms, name string) *Quantiles {
	b, a := before[name], h[name]
	if b == nil || a == nil {
		return nil
	}
	q, ok := histogramQuantiles(b, a)
	if !ok {
		return nil
	}
	return &q
}

// scrapeHistograms reads every histogram from walrelay's /metrics; nil
// when the scrape fails.
func scrapeHistograms(ctx context.Context, addr string) histograms {
	fams, err := scrape(ctx, addr)
	if err != nil {
		return nil
	}
	return histogramsOf(fams)
}

// scrape reads walrelay's /metrics.
func scrape(ctx context.Context, addr string) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	body, err := get(ctx, "http://"+addr+"/metrics")
	if err != nil {
		return nil, err
	}
	defer body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(body)
	if err != nil {
		return nil, fmt.Errorf("parsing walrelay's metrics: %w", err)
	}
	return fams, nil
}

// kafkaTxnsMetric counts exactly-once delivery's Kafka transactions, by
// result (committed, aborted).
const kafkaTxnsMetric = "walrelay_kafka_transactions_total"

// kafkaTransactions reads walrelay's Kafka transactions so far, committed
// and aborted, from its /metrics at addr.
func kafkaTransactions(ctx context.Context, addr string) (committed, aborted int64, err error) {
	fams, err := scrape(ctx, addr)
	if err != nil {
		return 0, 0, err
	}
	byResult := countersBy(fams[kafkaTxnsMetric], "result")
	return int64(byResult["committed"]), int64(byResult["aborted"]), nil
}

// countersBy sums a counter family's values by the value of label.
func countersBy(fam *dto.MetricFamily, label string) map[string]float64 {
	out := make(map[string]float64)
	for _, m := range fam.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				out[l.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// get fetches url (from walrelay's HTTP listener); the caller closes the
// body. A status other than 200 is an error quoting the response's start.
func get(ctx context.Context, url string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return resp.Body, nil
}

// histogramsOf collects the histogram families' buckets.
func histogramsOf(fams map[string]*dto.MetricFamily) histograms {
	out := make(histograms)
	for name, fam := range fams {
		buckets := make(map[float64]uint64)
		for _, m := range fam.GetMetric() {
			h := m.GetHistogram()
			if h == nil {
				continue
			}
			// The text format lists the +Inf bucket; the count stands in
			// for it if a scrape does not.
			hasInf := false
			for _, b := range h.GetBucket() {
				buckets[b.GetUpperBound()] += b.GetCumulativeCount()
				hasInf = hasInf || math.IsInf(b.GetUpperBound(), 1)
			}
			if !hasInf {
				buckets[math.Inf(1)] += h.GetSampleCount()
			}
		}
		if len(buckets) > 0 {
			out[name] = buckets
		}
	}
	return out
}

// histogramQuantiles estimates quantiles of the observations between two
// scrapes, interpolating linearly inside a bucket (as histogram_quantile).
func histogramQuantiles(before, after map[float64]uint64) (Quantiles, bool) {
	bounds := make([]float64, 0, len(after))
	for b := range after {
		bounds = append(bounds, b)
	}
	slices.Sort(bounds)
	counts := make([]float64, len(bounds))
	for i, b := range bounds {
		counts[i] = float64(after[b] - before[b])
	}
	total := counts[len(counts)-1]
	if total <= 0 {
		return Quantiles{}, false
	}
	at := func(p float64) float64 {
		rank := p * total
		for i, c := range counts {
			if c < rank {
				continue
			}
			lo, prev := 0.0, 0.0
			if i > 0 {
				lo, prev = bounds[i-1], counts[i-1]
			}
			hi := bounds[i]
			if math.IsInf(hi, 1) {
				return lo * 1000 // beyond the last bucket: its lower bound
			}
			if c == prev {
				return hi * 1000
			}
			return (lo + (hi-lo)*(rank-prev)/(c-prev)) * 1000
		}
		return bounds[len(bounds)-1] * 1000
	}
	return Quantiles{Samples: int(total), P50: at(0.5), P99: at(0.99), P999: at(0.999)}, true
}
