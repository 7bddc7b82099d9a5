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
			StatusInterval: cfg.StatusInterval.String(), WalrelayEnv: cfg.WalrelayEnv,
			LiveSeconds: cfg.LiveDuration.Seconds(), LiveWarmupSecond: cfg.LiveWarmup.Seconds(),
		},
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

// backlog builds one backlog and measures both consumers draining it
// cfg.Repeat times each, alternating which goes first, each from its own
// slot created before the first row.
func (e *env) backlog(ctx context.Context, idx int, b Backlog) (BacklogResult, error) {
	res := BacklogResult{Shape: b.Shape.String(), Events: b.N, Transactions: 1}
	if b.Shape.RowsPerTx > 0 {
		res.Transactions = b.N / b.Shape.RowsPerTx
	}
	agg := fmt.Sprintf("b%d_%s", idx, b.Shape)
	topic := "outbox.event." + agg
	defer e.deleteTopic(ctx, topic)

	reps := e.cfg.Repeat
	for r := range reps {
		for _, s := range []string{floorSlotN(r), relaySlotN(r)} {
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
	if res.PayloadBytes, err = e.db.avgPayload(ctx, agg); err != nil {
		return res, fmt.Errorf("sampling payload sizes: %w", err)
	}
	progress(e.cfg, "  built %d events in %d transactions in %.1fs (%.0f MB of WAL, end %s)",
		b.N, res.Transactions, res.BuildSeconds, float64(res.WALBytes)/1e6, end)

	var base int64 // records on the topic before a walrelay drain
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
		relay := func() error {
			progress(e.cfg, "  [%d/%d] walrelay draining to the broker", r+1, reps)
			seconds := 10 // the length of its profile: the floor's time, once known
			if len(res.FloorRuns) > 0 {
				seconds = int(math.Ceil(res.FloorRuns[len(res.FloorRuns)-1].Seconds))
			}
			d, err := e.runRelay(ctx, fmt.Sprintf("%s.%d", agg, r+1), relaySlotN(r), start, end, b.N, topic, base, seconds)
			if err != nil {
				return fmt.Errorf("walrelay: %w", err)
			}
			got, err := e.topicRecords(ctx, topic)
			if err != nil {
				return fmt.Errorf("counting records on %s: %w", topic, err)
			}
			d.BrokerRecords = got - base
			if d.BrokerRecords != int64(b.N) {
				return fmt.Errorf("walrelay put %d records on %s, want %d", d.BrokerRecords, topic, b.N)
			}
			base += int64(b.N)
			res.WalrelayRuns = append(res.WalrelayRuns, d)
			progress(e.cfg, "  [%d/%d] walrelay: %.2fs, %s events/s, %.2f µs CPU/event, peak RSS %.1f MiB",
				r+1, reps, d.Seconds, rate(d.EventsPerSec), d.CPUPerEventUS, mib(d.PeakRSSBytes))
			return nil
		}
		order := []func() error{floor, relay}
		if r%2 == 1 {
			order = []func() error{relay, floor}
		}
		for _, step := range order {
			if err := step(); err != nil {
				return res, err
			}
		}
		// Release this repetition's WAL hold.
		for _, s := range []string{floorSlotN(r), relaySlotN(r)} {
			if err := e.db.dropSlot(ctx, s); err != nil {
				return res, err
			}
		}
	}
	res.summarize()
	progress(e.cfg, "  median: pg_recvlogical %s events/s, walrelay %s events/s, ratio %.2f",
		rate(res.Floor.EventsPerSec), rate(res.Walrelay.EventsPerSec), res.Ratio)
	return res, nil
}

func floorSlotN(r int) string { return fmt.Sprintf("%s_%d", floorSlot, r+1) }
func relaySlotN(r int) string { return fmt.Sprintf("%s_%d", relaySlot, r+1) }

// summarize picks the median runs and computes the ratios.
func (b *BacklogResult) summarize() {
	median := func(runs []Drain, by func(Drain) float64) Drain {
		s := slices.Clone(runs)
		slices.SortFunc(s, func(x, y Drain) int { return cmp.Compare(by(x), by(y)) })
		return s[(len(s)-1)/2]
	}
	rate := func(d Drain) float64 { return d.EventsPerSec }
	stream := func(d Drain) float64 { return d.StreamEventsPerSec }
	floor, relay := median(b.FloorRuns, rate), median(b.WalrelayRuns, rate)
	b.Floor, b.Walrelay = &floor, &relay
	if floor.EventsPerSec > 0 {
		b.Ratio = relay.EventsPerSec / floor.EventsPerSec
	}
	if f := median(b.FloorRuns, stream).StreamEventsPerSec; f > 0 {
		b.StreamRatio = median(b.WalrelayRuns, stream).StreamEventsPerSec / f
	}
	b.WalrelayMinRate, b.WalrelayMaxRate = math.Inf(1), 0
	for _, d := range b.WalrelayRuns {
		b.WalrelayMinRate = min(b.WalrelayMinRate, d.EventsPerSec)
		b.WalrelayMaxRate = max(b.WalrelayMaxRate, d.EventsPerSec)
		b.WalrelayPeakRSS = max(b.WalrelayPeakRSS, d.PeakRSSBytes)
	}
	b.FloorMinRate, b.FloorMaxRate = math.Inf(1), 0
	for _, d := range b.FloorRuns {
		b.FloorMinRate = min(b.FloorMinRate, d.EventsPerSec)
		b.FloorMaxRate = max(b.FloorMaxRate, d.EventsPerSec)
	}
	b.OtherCPU = 0
	for _, d := range append(slices.Clone(b.FloorRuns), b.WalrelayRuns...) {
		if d.OtherCPU < 0 {
			b.OtherCPU = -1
			break
		}
		b.OtherCPU = max(b.OtherCPU, d.OtherCPU)
	}
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
