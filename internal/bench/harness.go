package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/walrelay/walrelay/internal/config"
)

// progress prints one line on cfg.Progress.
func progress(cfg Config, format string, args ...any) {
	fmt.Fprintf(cfg.Progress, "walrelay-bench: "+format+"\n", args...)
}

// ErrMeasurementsFailed is returned (wrapped) by Run when at least one
// measurement failed; the report holds the others and each one's error.
var ErrMeasurementsFailed = errors.New("some measurements failed")

// Run performs every measurement of cfg and returns the report. It starts
// and stops everything it needs; on return no process it started is left
// and nothing it created in Postgres remains. A measurement that fails is
// recorded in the report and the run goes on; Run then returns the report
// and an error wrapping ErrMeasurementsFailed. Other errors (the
// environment could not start) return a nil report.
func Run(ctx context.Context, cfg Config) (_ *Report, err error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid benchmark configuration: %w", err)
	}
	began := time.Now()
	mach := machine()
	if mach.LoadStart > 0.5 {
		progress(cfg, "warning: load average %.2f before starting: other work on this machine will skew the results", mach.LoadStart)
	}
	e, err := startEnv(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := e.close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("cleaning up: %w", cerr))
		}
	}()

	r := &Report{
		Started:  began,
		Machine:  mach,
		Walrelay: e.walrelayVersion,
		Broker:   "kfake (franz-go) in its own process",
		Settings: Settings{
			Partitions: topicPartitions, PayloadBytes: cfg.PayloadBytes, Writers: cfg.Writers, Repeat: cfg.Repeat,
			StatusInterval: cfg.StatusInterval.String(), WalrelayEnv: cfg.WalrelayEnv, Converter: cfg.Converter,
			LiveSeconds: cfg.LiveDuration.Seconds(), LiveWarmupSecond: cfg.LiveWarmup.Seconds(),
		},
	}
	if cfg.comparesDeliveries() {
		r.Settings.Deliveries = cfg.Deliveries
	}
	if cfg.KfakeBlackhole {
		r.Broker += ", blackhole produce"
	}
	if cfg.KfakeHeapMiB > 0 {
		r.Broker += fmt.Sprintf(", garbage collector off up to a %d MiB heap", cfg.KfakeHeapMiB)
	}
	if len(cfg.Brokers) > 0 {
		r.Broker = "external: " + strings.Join(cfg.Brokers, ",")
	}
	if r.Postgres, err = e.db.serverVersion(ctx); err != nil {
		return nil, fmt.Errorf("reading the postgres version: %w", err)
	}
	if cfg.PGUnixSocket {
		r.Postgres += " (clients on its Unix-domain socket)"
	}

	failed := 0
	for i, b := range cfg.Backlogs {
		if ctx.Err() != nil {
			break
		}
		progress(cfg, "backlog %d/%d: %s", i+1, len(cfg.Backlogs), b)
		res, err := e.backlog(ctx, i+1, b)
		if err != nil {
			failed++
			res.Error = err.Error()
			progress(cfg, "backlog %s failed: %v", b, err)
		}
		r.Backlogs = append(r.Backlogs, res)
		if err := e.reset(ctx); err != nil {
			return r, err
		}
	}
	if e.broker != nil && cfg.KfakeRealtime && len(cfg.Lives) > 0 {
		if err := e.broker.realtime(); err != nil {
			r.Broker += ", normal scheduling (real-time refused: " + err.Error() + ")"
			progress(cfg, "warning: kfake stays under the normal scheduling policy in the live runs: %v", err)
		} else {
			r.Broker += ", real-time scheduling (SCHED_FIFO 1) in the live runs"
		}
	}
	for i, l := range cfg.Lives {
		if ctx.Err() != nil {
			break
		}
		progress(cfg, "live %d/%d: %s", i+1, len(cfg.Lives), l)
		agg := fmt.Sprintf("l%d_%s_%d", i+1, l.Shape, l.Rate)
		res, err := e.runLive(ctx, fmt.Sprintf("live%d", i+1), l, agg)
		out := LiveOutcome{LiveResult: res}
		if err != nil {
			failed++
			out.Error = err.Error()
			progress(cfg, "live %s failed: %v", l, err)
		} else {
			progress(cfg, "  %s: %s events/s, p50 %.1f ms, p99 %.1f ms, p99.9 %.1f ms", l, rate(res.AchievedRate), res.Latency.P50, res.Latency.P99, res.Latency.P999)
		}
		r.Lives = append(r.Lives, out)
		e.deleteTopic(ctx, "outbox.event."+agg)
		if err := e.reset(ctx); err != nil {
			return r, err
		}
	}
	if e.registry != nil {
		if r.RegistrySubjects, err = e.registry.subjects(ctx); err != nil {
			return r, err
		}
	}
	r.Seconds = time.Since(began).Seconds()
	r.Machine.LoadEnd = loadAvg()
	if err := ctx.Err(); err != nil {
		return r, err
	}
	if failed > 0 {
		return r, fmt.Errorf("%w: %d of %d", ErrMeasurementsFailed, failed, len(cfg.Backlogs)+len(cfg.Lives))
	}
	return r, nil
}

// backlog builds one backlog and measures pg_recvlogical and walrelay (in
// each delivery mode) draining it cfg.Repeat times each, each from its own
// slot created before the first row. Each repetition runs the drains in
// turn, its first drain the next one's last (with one mode: pg_recvlogical
// and walrelay alternate which goes first).
func (e *env) backlog(ctx context.Context, idx int, b Backlog) (BacklogResult, error) {
	res := BacklogResult{Shape: b.Shape.String(), Style: b.Shape.Style(), Events: b.N, Transactions: 1}
	if b.Shape.RowsPerTx > 0 {
		res.Transactions = b.N / b.Shape.RowsPerTx
	}
	agg := fmt.Sprintf("b%d_%s", idx, strings.ReplaceAll(b.Shape.String(), "-", "_"))
	topic := "outbox.event." + agg
	defer e.deleteTopic(ctx, topic)

	modes, compare := e.cfg.deliveries(), e.cfg.comparesDeliveries()
	if compare {
		for _, m := range modes {
			res.Deliveries = append(res.Deliveries, DeliveryResult{Delivery: m})
		}
	}
	reps := e.cfg.Repeat
	slots := func(r int) []string {
		out := []string{floorSlotN(r)}
		for _, m := range modes {
			out = append(out, e.relaySlotN(r, m))
		}
		return out
	}
	for r := range reps {
		for _, s := range slots(r) {
			if err := e.db.createSlot(ctx, s); err != nil {
				return res, err
			}
		}
	}
	start, err := e.db.currentLSN(ctx)
	if err != nil {
		return res, err
	}
	buildStart := time.Now()
	if err := e.build(ctx, b, agg); err != nil {
		return res, err
	}
	res.BuildSeconds = time.Since(buildStart).Seconds()
	// Flush the build's dirty buffers now rather than during a drain.
	if err := e.db.checkpoint(ctx); err != nil {
		return res, err
	}
	end, err := e.db.currentLSN(ctx)
	if err != nil {
		return res, err
	}
	res.WALBytes = uint64(end - start)
	res.WALBytesPerEvent = float64(res.WALBytes) / float64(b.N)
	if res.PayloadBytes, err = e.db.avgPayload(ctx, b.Shape, agg, payloadPad(e.cfg.PayloadBytes)); err != nil {
		return res, fmt.Errorf("sampling payload sizes: %w", err)
	}
	progress(e.cfg, "  built %d events (%s) in %d transactions in %.1fs (%.0f MB of WAL, %.0f bytes/event, end %s)",
		b.N, res.Style, res.Transactions, res.BuildSeconds, float64(res.WALBytes)/1e6, res.WALBytesPerEvent, end)

	for r := range reps {
		floor := func() error {
			progress(e.cfg, "  [%d/%d] pg_recvlogical draining to /dev/null", r+1, reps)
			d, err := e.runFloor(ctx, floorSlotN(r), start, end, b.N)
			if err != nil {
				return fmt.Errorf("floor: %w", err)
			}
			res.FloorRuns = append(res.FloorRuns, d)
			progress(e.cfg, "  [%d/%d] pg_recvlogical: %.2fs, %s events/s", r+1, reps, d.Seconds, rate(d.EventsPerSec))
			return nil
		}
		relay := func(i int, mode string) func() error {
			label, name := "walrelay", fmt.Sprintf("%s.%d", agg, r+1)
			if compare {
				label, name = "walrelay "+mode, name+"."+mode
			}
			return func() error {
				progress(e.cfg, "  [%d/%d] %s draining to the broker", r+1, reps, label)
				seconds := 10 // the length of its profile: the floor's time, once known
				if len(res.FloorRuns) > 0 {
					seconds = int(math.Ceil(res.FloorRuns[len(res.FloorRuns)-1].Seconds))
				}
				run := relayRun{name: name, slot: e.relaySlotN(r, mode), delivery: mode, compare: compare,
					start: start, target: end, n: b.N, topic: topic, profileSeconds: seconds, messages: b.Shape.Messages}
				d, err := e.runRelay(ctx, run)
				if err != nil {
					return fmt.Errorf("%s: %w", label, err)
				}
				if compare {
					res.Deliveries[i].Runs = append(res.Deliveries[i].Runs, d)
				} else {
					res.WalrelayRuns = append(res.WalrelayRuns, d)
				}
				progress(e.cfg, "  [%d/%d] %s: %.2fs, %s events/s, %.2f µs CPU/event, peak RSS %.1f MiB%s",
					r+1, reps, label, d.Seconds, rate(d.EventsPerSec), d.CPUPerEventUS, mib(d.PeakRSSBytes), kafkaTxns(d))
				return nil
			}
		}
		steps := []func() error{floor}
		for i, m := range modes {
			steps = append(steps, relay(i, m))
		}
		k := r % len(steps)
		for _, step := range slices.Concat(steps[k:], steps[:k]) {
			if err := step(); err != nil {
				return res, err
			}
		}
		// Release this repetition's WAL hold.
		for _, s := range slots(r) {
			if err := e.db.dropSlot(ctx, s); err != nil {
				return res, err
			}
		}
	}
	res.summarize()
	if !compare {
		progress(e.cfg, "  median: pg_recvlogical %s events/s, walrelay %s events/s, ratio %.2f",
			rate(res.Floor.EventsPerSec), rate(res.Walrelay.EventsPerSec), res.Ratio)
		return res, nil
	}
	line := "  median: pg_recvlogical " + rate(res.Floor.EventsPerSec) + " events/s"
	for _, d := range res.Deliveries {
		line += fmt.Sprintf(", walrelay %s %s events/s (ratio %.2f)", d.Delivery, rate(d.Walrelay.EventsPerSec), d.Ratio)
	}
	if res.ExactlyOnceRatio > 0 {
		line += fmt.Sprintf("; exactly_once / at_least_once %.2f (per repetition: median %.2f of", res.ExactlyOnceRatio, res.ExactlyOnceRepRatio)
		for _, v := range res.ExactlyOnceRepRatios {
			line += fmt.Sprintf(" %.2f", v)
		}
		line += ")"
	}
	progress(e.cfg, "%s", line)
	return res, nil
}

// kafkaTxns describes an exactly-once drain's Kafka transactions for a
// progress line; empty for other drains.
func kafkaTxns(d Drain) string {
	if d.KafkaTransactions == 0 {
		return ""
	}
	return fmt.Sprintf(", %d Kafka transactions (%d aborted)", d.KafkaTransactions, d.KafkaAborted)
}

func floorSlotN(r int) string { return fmt.Sprintf("%s_%d", floorSlot, r+1) }

// relaySlotN is walrelay's slot of repetition r in delivery mode; with
// walrelay's default alone, as before modes were compared.
func (e *env) relaySlotN(r int, mode string) string {
	if !e.cfg.comparesDeliveries() {
		return fmt.Sprintf("%s_%d", relaySlot, r+1)
	}
	return fmt.Sprintf("%s_%d_%s", relaySlot, r+1, mode)
}

// summarize picks the median runs and computes the ratios.
func (b *BacklogResult) summarize() {
	floor := medianDrain(b.FloorRuns, eventsPerSec)
	b.Floor = &floor
	b.FloorMinRate, b.FloorMaxRate = rateSpread(b.FloorRuns)
	all := slices.Clone(b.FloorRuns)
	if len(b.Deliveries) == 0 {
		b.setWalrelay(summarizeRelay("", b.FloorRuns, b.WalrelayRuns))
		all = append(all, b.WalrelayRuns...)
	} else {
		for i, d := range b.Deliveries {
			b.Deliveries[i] = summarizeRelay(d.Delivery, b.FloorRuns, d.Runs)
			all = append(all, d.Runs...)
		}
		b.setWalrelay(b.Deliveries[0])
		alo, eos := b.delivery(config.AtLeastOnce), b.delivery(config.ExactlyOnce)
		if alo != nil && eos != nil {
			if r := alo.Walrelay.EventsPerSec; r > 0 {
				b.ExactlyOnceRatio = eos.Walrelay.EventsPerSec / r
			}
			if r := medianDrain(alo.Runs, streamPerSec).StreamEventsPerSec; r > 0 {
				b.ExactlyOnceStreamRatio = medianDrain(eos.Runs, streamPerSec).StreamEventsPerSec / r
			}
			// The runs are in repetition order, one per repetition.
			for i := range min(len(alo.Runs), len(eos.Runs)) {
				if r := alo.Runs[i].EventsPerSec; r > 0 {
					b.ExactlyOnceRepRatios = append(b.ExactlyOnceRepRatios, eos.Runs[i].EventsPerSec/r)
				}
			}
			if n := len(b.ExactlyOnceRepRatios); n > 0 {
				s := slices.Sorted(slices.Values(b.ExactlyOnceRepRatios))
				b.ExactlyOnceRepRatio = s[(n-1)/2]
			}
		}
	}
	b.OtherCPU = 0
	for _, d := range all {
		if d.OtherCPU < 0 {
			b.OtherCPU = -1
			break
		}
		b.OtherCPU = max(b.OtherCPU, d.OtherCPU)
	}
}

// summarizeRelay summarizes walrelay's runs in one delivery mode against
// pg_recvlogical's runs of the same backlog.
func summarizeRelay(delivery string, floorRuns, runs []Drain) DeliveryResult {
	d := DeliveryResult{Delivery: delivery, Runs: runs}
	relay := medianDrain(runs, eventsPerSec)
	d.Walrelay = &relay
	if f := medianDrain(floorRuns, eventsPerSec).EventsPerSec; f > 0 {
		d.Ratio = relay.EventsPerSec / f
	}
	if f := medianDrain(floorRuns, streamPerSec).StreamEventsPerSec; f > 0 {
		d.StreamRatio = medianDrain(runs, streamPerSec).StreamEventsPerSec / f
	}
	d.MinRate, d.MaxRate = rateSpread(runs)
	for _, r := range runs {
		d.PeakRSSBytes = max(d.PeakRSSBytes, r.PeakRSSBytes)
	}
	return d
}

// setWalrelay fills the walrelay fields of b from d, except the runs.
func (b *BacklogResult) setWalrelay(d DeliveryResult) {
	b.Walrelay, b.Ratio, b.StreamRatio = d.Walrelay, d.Ratio, d.StreamRatio
	b.WalrelayMinRate, b.WalrelayMaxRate, b.WalrelayPeakRSS = d.MinRate, d.MaxRate, d.PeakRSSBytes
}

// delivery returns the results in mode, or nil.
func (b *BacklogResult) delivery(mode string) *DeliveryResult {
	for i := range b.Deliveries {
		if b.Deliveries[i].Delivery == mode {
			return &b.Deliveries[i]
		}
	}
	return nil
}

func eventsPerSec(d Drain) float64 { return d.EventsPerSec }
func streamPerSec(d Drain) float64 { return d.StreamEventsPerSec }

// medianDrain returns the median of runs by the figure by (the lower one
// of an even count).
func medianDrain(runs []Drain, by func(Drain) float64) Drain {
	s := slices.Clone(runs)
	slices.SortFunc(s, func(x, y Drain) int { return cmp.Compare(by(x), by(y)) })
	return s[(len(s)-1)/2]
}

// rateSpread returns the lowest and highest events/s of runs.
func rateSpread(runs []Drain) (lo, hi float64) {
	lo = math.Inf(1)
	for _, d := range runs {
		lo, hi = min(lo, d.EventsPerSec), max(hi, d.EventsPerSec)
	}
	return lo, hi
}

// build writes the backlog, printing progress every 2s.
func (e *env) build(ctx context.Context, b Backlog, agg string) error {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.StepTimeout)
	defer cancel()
	var rows atomic.Int64
	done := make(chan error, 1)
	began := time.Now()
	go func() { done <- buildBacklog(ctx, e.dsn, b, agg, e.cfg.Writers, payloadPad(e.cfg.PayloadBytes), &rows) }()
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-t.C:
			if b.Shape.RowsPerTx == 0 {
				progress(e.cfg, "  building: %.0fs (one INSERT of %d rows)", time.Since(began).Seconds(), b.N)
			} else {
				n := rows.Load()
				progress(e.cfg, "  building: %.0fs, %d/%d rows (%.0f%%)", time.Since(began).Seconds(), n, b.N, 100*float64(n)/float64(b.N))
			}
		}
	}
}

// reset drops the slots and empties the outbox between measurements.
func (e *env) reset(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if err := e.db.dropSlots(ctx); err != nil {
		return err
	}
	return e.db.truncate(ctx)
}

// deleteTopic frees the broker's memory, and has a local kfake collect its
// garbage now rather than during the next measurement; failures only cost
// memory.
func (e *env) deleteTopic(ctx context.Context, topic string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, err := e.admin.DeleteTopics(ctx, topic); err != nil {
		e.cfg.Log.Warn("deleting topic", "topic", topic, "err", err)
	}
	if e.broker != nil {
		if err := e.broker.collect(ctx); err != nil {
			e.cfg.Log.Warn("kfake's collection between measurements", "err", err)
		}
	}
}
