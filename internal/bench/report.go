package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/walrelay/walrelay/internal/config"
)

// Report is the outcome of a run; it is written as JSON and as a table.
type Report struct {
	Started  time.Time `json:"started"`
	Seconds  float64   `json:"seconds"`
	Machine  Machine   `json:"machine"`
	Postgres string    `json:"postgres"`
	Walrelay string    `json:"walrelay"`
	Broker   string    `json:"broker"`
	Settings Settings  `json:"settings"`

	Backlogs []BacklogResult `json:"backlogs"`
	Lives    []LiveOutcome   `json:"live"`

	// RegistrySubjects are the subjects walrelay registered schemas under
	// in a run with the avro converter (Config.Converter).
	RegistrySubjects []string `json:"registry_subjects,omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model"`
	MemBytes  int64  `json:"mem_bytes"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"go"` // the harness's
	// LoadStart and LoadEnd are /proc/loadavg's 1-minute load before and
	// after the run (LoadEnd includes the run's own processes); each
	// measurement's other_cpu_share says what other work took during it.
	LoadStart float64 `json:"load_start"`
	LoadEnd   float64 `json:"load_end"`
}

// loadAvg returns the 1-minute load average, or -1 when unknown.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	var l float64
	if _, err := fmt.Sscan(string(b), &l); err != nil {
		return -1
	}
	return l
}

// Settings are the knobs the results depend on.
type Settings struct {
	Partitions       int      `json:"partitions"`
	PayloadBytes     int      `json:"payload_bytes"`
	Writers          int      `json:"writers"`
	Repeat           int      `json:"repeat"`
	StatusInterval   string   `json:"walrelay_status_interval"`
	WalrelayEnv      []string `json:"walrelay_env,omitempty"`
	LiveSeconds      float64  `json:"live_seconds"`
	LiveWarmupSecond float64  `json:"live_warmup_seconds"`
	// Converter is Config.Converter, walrelay's value converter (empty:
	// walrelay's default, raw).
	Converter string `json:"converter,omitempty"`
	// Deliveries are Config.Deliveries when the run compared delivery
	// modes (empty: walrelay's default, at_least_once, alone).
	Deliveries []string `json:"deliveries,omitempty"`
}

// BacklogResult is one backlog: building it, then the floor and walrelay
// draining it.
type BacklogResult struct {
	Shape string `json:"shape"`
	// Style is the outbox style the events were written in: "rows"
	// (INSERTs into the outbox table) or "messages" (logical decoding
	// messages, the table-less outbox).
	Style        string  `json:"style"`
	Events       int     `json:"events"`
	Transactions int     `json:"transactions"`
	PayloadBytes float64 `json:"avg_payload_bytes"`
	// WALBytes is the WAL written while the backlog was built
	// (pg_current_wal_lsn before and after, a CHECKPOINT included);
	// WALBytesPerEvent the same over Events.
	WALBytes         uint64  `json:"wal_bytes"`
	WALBytesPerEvent float64 `json:"wal_bytes_per_event"`
	BuildSeconds     float64 `json:"build_seconds"`
	// Floor and Walrelay are the median runs by events/s.
	Floor    *Drain `json:"pg_recvlogical,omitempty"`
	Walrelay *Drain `json:"walrelay,omitempty"`
	// Ratio is walrelay's median events/s over pg_recvlogical's, from
	// process start; StreamRatio the same from the slot becoming active.
	Ratio       float64 `json:"ratio"`
	StreamRatio float64 `json:"stream_ratio"`
	// The spread over the repetitions, and walrelay's largest peak RSS.
	FloorMinRate    float64 `json:"pg_recvlogical_min_events_per_sec"`
	FloorMaxRate    float64 `json:"pg_recvlogical_max_events_per_sec"`
	WalrelayMinRate float64 `json:"walrelay_min_events_per_sec"`
	WalrelayMaxRate float64 `json:"walrelay_max_events_per_sec"`
	WalrelayPeakRSS int64   `json:"walrelay_peak_rss_bytes"`
	// OtherCPU is the largest OtherCPU of the runs (-1: unknown).
	OtherCPU     float64 `json:"max_other_cpu_share"`
	FloorRuns    []Drain `json:"pg_recvlogical_runs,omitempty"`
	WalrelayRuns []Drain `json:"walrelay_runs,omitempty"`
	// Deliveries, when the run compared delivery modes
	// (Config.Deliveries), are walrelay's drains in each mode, in the
	// order given. The walrelay fields above then repeat the first
	// mode's figures (its runs are only here).
	Deliveries []DeliveryResult `json:"deliveries,omitempty"`
	// ExactlyOnceRatio is exactly_once's median events/s over
	// at_least_once's, when both ran; ExactlyOnceStreamRatio the same
	// from the slot becoming active.
	ExactlyOnceRatio       float64 `json:"exactly_once_ratio,omitempty"`
	ExactlyOnceStreamRatio float64 `json:"exactly_once_stream_ratio,omitempty"`
	// ExactlyOnceRepRatios are exactly_once's events/s over
	// at_least_once's in each repetition (drains a few seconds apart, so
	// under the most alike conditions the machine gives), and
	// ExactlyOnceRepRatio their median. The drain rates of this machine
	// are often bimodal; the ratio of the medians can then compare runs
	// of different modes, which the repetitions' ratios do not.
	ExactlyOnceRepRatios []float64 `json:"exactly_once_repetition_ratios,omitempty"`
	ExactlyOnceRepRatio  float64   `json:"exactly_once_repetition_ratio,omitempty"`
	Error                string    `json:"error,omitempty"`
}

// DeliveryResult is walrelay draining a backlog in one delivery mode,
// Repeat times.
type DeliveryResult struct {
	Delivery string `json:"delivery"` // relay.delivery
	// Walrelay is the median run by events/s; Ratio its events/s over
	// pg_recvlogical's median, StreamRatio the same from the slot
	// becoming active.
	Walrelay    *Drain  `json:"walrelay,omitempty"`
	Ratio       float64 `json:"ratio"`
	StreamRatio float64 `json:"stream_ratio"`
	// The spread over the runs, and the largest peak RSS of any.
	MinRate      float64 `json:"min_events_per_sec"`
	MaxRate      float64 `json:"max_events_per_sec"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
	Runs         []Drain `json:"runs"`
}

// LiveOutcome is a live measurement or why it failed.
type LiveOutcome struct {
	LiveResult
	Error string `json:"error,omitempty"`
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), LoadStart: loadAvg()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if total, err := procKB("/proc/meminfo", "MemTotal"); err == nil {
		m.MemBytes = total
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// WriteJSON writes the report, indented.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report for people.
func (r *Report) WriteTable(w io.Writer) error {
	bw := bufio.NewWriter(w)
	m := r.Machine
	fmt.Fprintf(bw, "machine: %d CPUs (%s), %.0f GiB, Linux %s; %s; load average %.2f before the run\n",
		m.CPUs, m.CPUModel, float64(m.MemBytes)/(1<<30), m.Kernel, m.GoVersion, m.LoadStart)
	fmt.Fprintf(bw, "postgres: %s\nwalrelay: %s\nbroker: %s\n", r.Postgres, r.Walrelay, r.Broker)
	s := r.Settings
	fmt.Fprintf(bw, "settings: %d partitions, ~%d-byte payloads, %d writers, walrelay status interval %s", s.Partitions, s.PayloadBytes, s.Writers, s.StatusInterval)
	if len(s.WalrelayEnv) > 0 {
		fmt.Fprintf(bw, ", %s", strings.Join(s.WalrelayEnv, " "))
	}
	if s.Converter != "" {
		fmt.Fprintf(bw, ", walrelay value converter %s", s.Converter)
	}
	compare := len(s.Deliveries) > 0
	if compare {
		fmt.Fprintf(bw, ", walrelay delivery %s (each backlog drained in each, interleaved)", strings.Join(s.Deliveries, ", "))
	}
	fmt.Fprintln(bw)

	if len(r.Backlogs) > 0 {
		fmt.Fprintf(bw, "\nBacklog drain: median events/s over %d runs each (min-max), from process start; ratio = walrelay / pg_recvlogical;\nother CPU = share of the machine used by processes outside the benchmark (worst run)\n", s.Repeat)
		tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
		header := "shape\tevents\tbuild s\tWAL B/ev\tpg_recvlogical ev/s\twalrelay ev/s\tratio\tratio excl. startup\tCPU µs/ev (pg_recvlogical/walrelay)\twalrelay peak RSS MiB\twalsender CPU µs/ev (floor/walrelay)\tkfake CPU µs/ev\tother CPU\t"
		if compare {
			header = strings.Replace(header, "shape\t", "shape\tdelivery\t", 1)
		}
		fmt.Fprintln(tw, header)
		for _, b := range r.Backlogs {
			lead := []string{b.Shape}
			if compare {
				lead = append(lead, "")
			}
			if b.Error != "" {
				errorRow(tw, header, append(lead, strconv.Itoa(b.Events), "error: "+firstLine(b.Error))...)
				continue
			}
			rows := []DeliveryResult{{Walrelay: b.Walrelay, Ratio: b.Ratio, StreamRatio: b.StreamRatio,
				MinRate: b.WalrelayMinRate, MaxRate: b.WalrelayMaxRate, PeakRSSBytes: b.WalrelayPeakRSS}}
			if compare {
				rows = b.Deliveries
			}
			for _, d := range rows {
				if compare {
					lead[1] = d.Delivery
				}
				fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.0f\t%s (%s-%s)\t%s (%s-%s)\t%.2f\t%.2f\t%.2f / %.2f\t%.1f\t%s / %s\t%s\t%s\t\n",
					strings.Join(lead, "\t"), b.Events, b.BuildSeconds, b.WALBytesPerEvent,
					rate(b.Floor.EventsPerSec), rate(b.FloorMinRate), rate(b.FloorMaxRate),
					rate(d.Walrelay.EventsPerSec), rate(d.MinRate), rate(d.MaxRate),
					d.Ratio, d.StreamRatio, b.Floor.CPUPerEventUS, d.Walrelay.CPUPerEventUS, mib(d.PeakRSSBytes),
					perEvent(b.Floor.WalsenderCPU, b.Events), perEvent(d.Walrelay.WalsenderCPU, b.Events),
					perEvent(d.Walrelay.BrokerCPU, b.Events), share(b.OtherCPU))
			}
		}
		tw.Flush()
		if compare && slices.Contains(s.Deliveries, config.AtLeastOnce) && slices.Contains(s.Deliveries, config.ExactlyOnce) {
			writeDeliveryTable(bw, r)
		}
		if pairs := stylePairs(r.Backlogs); len(pairs) > 0 {
			writeStyleTable(bw, pairs)
		}
	}
	if len(r.Lives) > 0 {
		fmt.Fprintln(bw, "\nLive: commit-to-consume latency (an upper bound of commit-to-ack) over the measured window")
		tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
		const header = "shape\ttarget ev/s\tachieved ev/s\tevents\tp50 ms\tp99 ms\tp99.9 ms\tmax ms\twalrelay hist p50/p99 ms\tcommit-read p50/p99 ms\tproduce-ack p50/p99 ms\tbroker round trip p50/p99 ms\tgoroutine waits >1/>10 ms\twalrelay CPU µs/ev\twalrelay peak RSS MiB\tCPU wait/run walrelay/walsender/kfake\tother CPU\t"
		fmt.Fprintln(tw, header)
		for _, l := range r.Lives {
			target := "max"
			if l.TargetRate > 0 {
				target = rate(float64(l.TargetRate))
			}
			if l.Error != "" {
				errorRow(tw, header, l.Shape, target, "error: "+firstLine(l.Error))
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%.2f\t%.1f\t%s / %s / %s\t%s\t\n",
				l.Shape, target, rate(l.AchievedRate), l.Events, l.Latency.P50, l.Latency.P99, l.Latency.P999, l.Latency.Max,
				p50p99(l.RelayLatency), p50p99(l.RelayRead), p50p99(l.RelayAck), p50p99(l.BrokerRTT), waits(l.GoroutineWaits), l.CPUPerEventUS, mib(l.PeakRSSBytes),
				ratio(l.WalrelayCPUWait), ratio(l.WalsenderCPUWait), ratio(l.BrokerCPUWait), share(l.OtherCPU))
		}
		tw.Flush()
	}
	fmt.Fprintf(bw, "\ntotal %.0fs\n", r.Seconds)
	return bw.Flush()
}

// writeDeliveryTable compares exactly_once with at_least_once, backlog by
// backlog.
func writeDeliveryTable(w io.Writer, r *Report) {
	fmt.Fprintf(w, "\nDelivery: exactly_once against at_least_once on the same backlogs, drains interleaved; median events/s over %d runs each (min-max), from process start;\n"+
		"ratio = exactly_once / at_least_once, of the medians, and the median (min-max) of each repetition's two drains; CPU of each mode's median drain;\n"+
		"peak RSS the largest of each mode's drains; Kafka transactions committed (aborted) in exactly_once's median drain\n", r.Settings.Repeat)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	const header = "shape\tevents\tat_least_once ev/s\texactly_once ev/s\tratio\tratio excl. startup\tratio per repetition\tCPU µs/ev (at_least_once/exactly_once)\tpeak RSS MiB (at_least_once/exactly_once)\tKafka transactions\tevents per Kafka transaction\t"
	fmt.Fprintln(tw, header)
	for _, b := range r.Backlogs {
		alo, eos := b.delivery(config.AtLeastOnce), b.delivery(config.ExactlyOnce)
		if b.Error != "" || alo == nil || eos == nil || alo.Walrelay == nil || eos.Walrelay == nil {
			why := "error: " + firstLine(b.Error)
			if b.Error == "" {
				why = "not measured in both modes"
			}
			errorRow(tw, header, b.Shape, strconv.Itoa(b.Events), why)
			continue
		}
		perTxn := "-"
		if n := eos.Walrelay.KafkaTransactions; n > 0 {
			perTxn = fmt.Sprintf("%.0f", float64(b.Events)/float64(n))
		}
		lo, hi := math.Inf(1), 0.0
		for _, v := range b.ExactlyOnceRepRatios {
			lo, hi = min(lo, v), max(hi, v)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s (%s-%s)\t%s (%s-%s)\t%.2f\t%.2f\t%.2f (%.2f-%.2f)\t%.2f / %.2f\t%.1f / %.1f\t%d (%d)\t%s\t\n",
			b.Shape, b.Events,
			rate(alo.Walrelay.EventsPerSec), rate(alo.MinRate), rate(alo.MaxRate),
			rate(eos.Walrelay.EventsPerSec), rate(eos.MinRate), rate(eos.MaxRate),
			b.ExactlyOnceRatio, b.ExactlyOnceStreamRatio, b.ExactlyOnceRepRatio, lo, hi,
			alo.Walrelay.CPUPerEventUS, eos.Walrelay.CPUPerEventUS,
			mib(alo.PeakRSSBytes), mib(eos.PeakRSSBytes), eos.Walrelay.KafkaTransactions, eos.Walrelay.KafkaAborted, perTxn)
	}
	tw.Flush()
}

// stylePair is one backlog written both ways: as outbox rows and as
// logical messages, in the same shape and number of events.
type stylePair struct{ rows, messages *BacklogResult }

// stylePairs pairs each measured message-style backlog with the first
// measured row-style backlog of the same shape and events, in the order
// of the message backlogs. Failed measurements pair with nothing.
func stylePairs(backlogs []BacklogResult) []stylePair {
	var out []stylePair
	for i := range backlogs {
		m := &backlogs[i]
		if m.Style != "messages" || m.Error != "" || m.Walrelay == nil {
			continue
		}
		for j := range backlogs {
			r := &backlogs[j]
			if r.Style != "messages" && r.Error == "" && r.Walrelay != nil && r.Events == m.Events && msgPrefix+r.Shape == m.Shape {
				out = append(out, stylePair{rows: r, messages: m})
				break
			}
		}
	}
	return out
}

// writeStyleTable compares the two outbox styles on the same events:
// walrelay's median drain of each (in its first delivery mode), and the
// WAL each style wrote.
func writeStyleTable(w io.Writer, pairs []stylePair) {
	fmt.Fprintf(w, "\nOutbox styles: the same events written as outbox rows and as logical messages (pg_logical_emit_message);\n"+
		"walrelay's median events/s, from process start; ratio = messages / rows; CPU of the median drains; WAL written per event while building the backlog\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	const header = "shape\tevents\trows ev/s\tmessages ev/s\tratio\twalrelay CPU µs/ev (rows/messages)\twalsender CPU µs/ev (rows/messages)\tWAL B/ev (rows/messages)\tavg payload B\t"
	fmt.Fprintln(tw, header)
	for _, p := range pairs {
		r, m := p.rows, p.messages
		ratio := 0.0
		if r.Walrelay.EventsPerSec > 0 {
			ratio = m.Walrelay.EventsPerSec / r.Walrelay.EventsPerSec
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.2f\t%.2f / %.2f\t%s / %s\t%.0f / %.0f\t%.0f\t\n",
			r.Shape, r.Events, rate(r.Walrelay.EventsPerSec), rate(m.Walrelay.EventsPerSec), ratio,
			r.Walrelay.CPUPerEventUS, m.Walrelay.CPUPerEventUS,
			perEvent(r.Walrelay.WalsenderCPU, r.Events), perEvent(m.Walrelay.WalsenderCPU, m.Events),
			r.WALBytesPerEvent, m.WALBytesPerEvent, r.PayloadBytes)
	}
	tw.Flush()
}

// errorRow writes a row of a failed measurement: its first cells, then
// empty ones up to header's column count (every header cell ends in a tab).
func errorRow(w io.Writer, header string, cells ...string) {
	fmt.Fprintln(w, strings.Join(cells, "\t")+strings.Repeat("\t", strings.Count(header, "\t")-len(cells)+1))
}

// waits shows the shares of long goroutine waits, "-" without them.
func waits(w *Waits) string {
	if w == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f%% / %.3f%%", 100*w.Over1, 100*w.Over10)
}

// ratio shows a non-negative ratio, "-" for unknown (negative).
func ratio(v float64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

// p50p99 shows a histogram's median and 99th percentile, "-" without it.
func p50p99(q *Quantiles) string {
	if q == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f / %.1f", q.P50, q.P99)
}

func rate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

// mib converts bytes to MiB, the unit of the RSS columns.
func mib(b int64) float64 { return float64(b) / (1 << 20) }

func perEvent(cpuSeconds float64, n int) string {
	if cpuSeconds == 0 || n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", cpuSeconds*1e6/float64(n))
}

// share formats an OtherCPU share as a percentage of the machine.
func share(v float64) string {
	if v < 0 {
		return "?"
	}
	return fmt.Sprintf("%.0f%%", 100*v)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
