package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
)

// LiveResult is one live measurement.
type LiveResult struct {
	Shape string `json:"shape"`
	// TargetRate is events/s asked for; 0 means as fast as the writers go.
	TargetRate int `json:"target_events_per_sec"`
	// AchievedRate is events/s committed during the measured window.
	AchievedRate float64 `json:"achieved_events_per_sec"`
	Seconds      float64 `json:"seconds"`
	// Events were committed in the measured window; their latencies are
	// Latency's samples.
	Events int `json:"events"`
	// Latency is commit-to-consume: the time a consumer (franz-go,
	// FetchMaxWait 100ms, woken by new data) received the record minus the
	// later of the record timestamp (the transaction's commit time,
	// truncated to the millisecond by Kafka) and the row's insert time
	// (clock_timestamp() in the payload, in µs), both at or before the
	// commit. It is an upper bound of commit-to-ack.
	Latency Quantiles `json:"commit_to_consume"`
	// RelayLatency is walrelay's own walrelay_end_to_end_latency_seconds
	// histogram (commit to broker ack) over the window, when the binary
	// exposes it.
	RelayLatency *Quantiles `json:"walrelay_histogram,omitempty"`
	// RelayRead and RelayAck split it: walrelay_commit_read_latency_seconds
	// (commit to walrelay reading the transaction: the walsender sending it
	// and walrelay's wait to read; per transaction) and
	// walrelay_produce_ack_latency_seconds (franz-go and the broker; per
	// record), when the binary exposes them.
	RelayRead *Quantiles `json:"walrelay_commit_read_histogram,omitempty"`
	RelayAck  *Quantiles `json:"walrelay_produce_ack_histogram,omitempty"`
	// BrokerRTT is walrelay_kafka_request_duration_e2e_seconds: franz-go's
	// requests' round trips (write to response read), the broker's part of
	// RelayAck; when the binary exposes it.
	BrokerRTT *Quantiles `json:"walrelay_kafka_request_histogram,omitempty"`
	// GoroutineWaits summarises go_sched_latencies_seconds over the window:
	// how often walrelay's goroutines were runnable for long before they
	// ran; when the binary exposes it.
	GoroutineWaits *Waits `json:"walrelay_goroutine_waits,omitempty"`
	// CPUPerEventUS is walrelay's CPU time from the window's start until
	// every record was consumed, per event committed in the window.
	CPUPerEventUS float64 `json:"cpu_us_per_event"`
	PeakRSSBytes  int64   `json:"peak_rss_bytes"`
	// Inserted and Received count every event of the run, warm-up included.
	Inserted int64 `json:"inserted"`
	Received int64 `json:"received"`
	// Missed are transactions the pacer could not hand to a free writer
	// (the writers were behind the target rate).
	Missed int64 `json:"missed_transactions"`
	// OtherCPU is the share of the machine's CPU that processes outside
	// the benchmark used during the window; -1 when unknown.
	OtherCPU float64 `json:"other_cpu_share"`
	// WalrelayCPUWait, WalsenderCPUWait and BrokerCPUWait are the time
	// walrelay's threads (and the slot's walsender, and the local broker's
	// threads) spent runnable but waiting for a CPU, per second they ran,
	// over the same span as CPUPerEventUS: how crowded the machine was for
	// each hop. -1 when unknown (no schedstat; --dsn, --brokers).
	WalrelayCPUWait  float64 `json:"walrelay_cpu_wait_per_cpu_second"`
	WalsenderCPUWait float64 `json:"walsender_cpu_wait_per_cpu_second"`
	BrokerCPUWait    float64 `json:"broker_cpu_wait_per_cpu_second"`
}

// runLive measures walrelay while writers insert at l's rate.
func (e *env) runLive(ctx context.Context, name string, l Live, agg string) (LiveResult, error) {
	res := LiveResult{Shape: l.Shape.String(), TargetRate: l.Rate}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.StepTimeout)
	defer cancel()
	topic := "outbox.event." + agg

	if err := e.db.createSlot(ctx, relaySlot); err != nil {
		return res, err
	}
	// Created up front so the consumer finds it at once.
	if _, err := e.admin.CreateTopic(ctx, topicPartitions, -1, nil, topic); err != nil {
		return res, fmt.Errorf("creating topic %s: %w", topic, err)
	}
	start, err := e.db.currentLSN(ctx)
	if err != nil {
		return res, err
	}
	w, stopWatch, err := watchSlot(ctx, e.dsn, relaySlot, math.MaxUint64, false)
	if err != nil {
		return res, err
	}
	defer stopWatch()
	httpAddr, err := freeAddr()
	if err != nil {
		return res, err
	}
	p, err := e.startWalrelay(name, relaySlot, httpAddr)
	if err != nil {
		return res, err
	}
	defer p.stop(syscall.SIGKILL, 5*time.Second) // no-op after a clean stop
	if err := waitActive(ctx, w, p); err != nil {
		return res, err
	}

	c, err := startConsumer(e.brokers, topic)
	if err != nil {
		return res, err
	}
	defer c.close()

	windowStart := make(chan struct{})
	waitProfile := e.startProfile(ctx, httpAddr, name, int(math.Ceil(e.cfg.LiveDuration.Seconds())), windowStart)
	defer waitProfile()
	warmEnd := time.Now().Add(e.cfg.LiveWarmup)
	end := warmEnd.Add(e.cfg.LiveDuration)
	c.setWindow(warmEnd, end)
	d := &driver{dsn: e.dsn, agg: agg, rowsPerTx: l.Shape.RowsPerTx, rate: l.Rate, writers: e.cfg.Writers, pad: payloadPad(e.cfg.PayloadBytes)}
	var (
		cpu0      time.Duration
		inserted0 int64
		hist0     histograms
		sampleErr error
		mark0     cpuSample
		sched0    [3]schedStat // walrelay, walsender, broker
	)
	progress(e.cfg, "  driving %s for %s (+%s warm-up)", l, e.cfg.LiveDuration, e.cfg.LiveWarmup)
	driveErr := d.run(ctx, warmEnd, end, func() {
		// At the window's start.
		close(windowStart)
		mark0 = e.cpuMark()
		inserted0 = d.inserted.Load()
		cpu0, sampleErr = ProcessCPU(p.pid())
		sched0 = e.schedOf(p, w)
		hist0 = scrapeHistograms(ctx, httpAddr)
	})
	if driveErr != nil {
		return res, driveErr
	}
	if sampleErr != nil {
		return res, fmt.Errorf("reading walrelay's CPU: %w", sampleErr)
	}
	res.Inserted = d.inserted.Load()
	res.Missed = d.missed.Load()
	windowEvents := res.Inserted - inserted0
	progress(e.cfg, "  inserted %d events; waiting for the consumer", res.Inserted)

	// Every inserted event must reach the consumer.
	waitCtx, waitCancel := context.WithTimeout(ctx, 2*time.Minute)
	err = c.waitFor(waitCtx, res.Inserted, p.done)
	waitCancel()
	if err != nil {
		return res, fmt.Errorf("consuming %d events from %s: %w (walrelay log:\n%s)", res.Inserted, topic, err, p.logTail(10))
	}
	res.OtherCPU = otherCPU(mark0, e.cpuMark())
	sched1 := e.schedOf(p, w)
	res.WalrelayCPUWait = waitPerRun(sched0[0], sched1[0])
	res.WalsenderCPUWait = waitPerRun(sched0[1], sched1[1])
	res.BrokerCPUWait = waitPerRun(sched0[2], sched1[2])
	cpu1, err := ProcessCPU(p.pid())
	if err != nil {
		return res, fmt.Errorf("reading walrelay's CPU: %w", err)
	}
	if res.PeakRSSBytes, err = procHWM(p.pid()); err != nil {
		return res, fmt.Errorf("reading walrelay's peak RSS: %w", err)
	}
	if hist0 != nil {
		hist1 := scrapeHistograms(ctx, httpAddr)
		res.RelayLatency = hist1.quantiles(hist0, histEndToEnd)
		res.RelayRead = hist1.quantiles(hist0, histCommitRead)
		res.RelayAck = hist1.quantiles(hist0, histProduceAck)
		res.BrokerRTT = hist1.quantiles(hist0, histKafkaRequest)
		res.GoroutineWaits = waitsOf(hist0[histGoSched], hist1[histGoSched])
	}
	waitProfile()
	if err := p.stop(syscall.SIGTERM, 30*time.Second); err != nil {
		return res, fmt.Errorf("stopping walrelay: %w\n%s", err, p.logTail(20))
	}
	if v := w.snapshot(); v.err == nil && v.confirmed <= start {
		return res, fmt.Errorf("walrelay never confirmed anything past %s", start)
	}

	lat := c.latencies()
	res.Received = c.received.Load()
	if res.Received != res.Inserted {
		// Nothing restarts during a live run, so walrelay should publish
		// each event exactly once.
		return res, fmt.Errorf("consumed %d records for %d inserted events", res.Received, res.Inserted)
	}
	res.Seconds = e.cfg.LiveDuration.Seconds()
	res.Events = len(lat)
	res.AchievedRate = float64(windowEvents) / res.Seconds
	res.Latency = quantiles(lat)
	if windowEvents > 0 {
		res.CPUPerEventUS = float64((cpu1 - cpu0).Microseconds()) / float64(windowEvents)
	}
	return res, nil
}

// schedOf reads the scheduler accounting of walrelay (p), of the walsender
// streaming to it (when the cluster is local) and of the local broker; a
// reading that could not be made is the zero schedStat.
func (e *env) schedOf(p *proc, w *slotWatch) [3]schedStat {
	pids := [3]int{p.pid(), 0, 0}
	if e.local {
		pids[1] = w.snapshot().activePID
	}
	if e.broker != nil {
		pids[2] = e.broker.p.pid()
	}
	var st [3]schedStat
	for i, pid := range pids {
		if pid != 0 {
			st[i], _ = processSched(pid) // the zero reading on error: reported as unknown
		}
	}
	return st
}

// waitActive waits until walrelay streams from the slot.
func waitActive(ctx context.Context, w *slotWatch, p *proc) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	select {
	case <-w.active:
		return nil
	case <-w.done: // the watcher failed, or ctx's parent is done
		if err := w.snapshot().err; err != nil {
			return err
		}
		return fmt.Errorf("walrelay did not start streaming: %w", context.Cause(ctx))
	case <-p.done:
		return fmt.Errorf("walrelay exited before streaming: %v\n%s", p.waitErr, p.logTail(20))
	case <-ctx.Done():
		return fmt.Errorf("walrelay did not start streaming: %w\n%s", ctx.Err(), p.logTail(20))
	}
}

// driver inserts outbox rows at a steady rate from several connections.
type driver struct {
	dsn       string
	agg       string
	rowsPerTx int
	rate      int // events/s; 0: as fast as possible
	writers   int
	pad       int

	seq      atomic.Int64 // last sequence number handed out
	inserted atomic.Int64 // events committed
	missed   atomic.Int64 // transactions the pacer dropped
}

// run drives until end; atWarmEnd is called once when warmEnd passes.
func (d *driver) run(parent context.Context, warmEnd, end time.Time, atWarmEnd func()) error {
	// ctx ends the driving at end; a statement already sent runs on parent,
	// so every transaction that commits is counted (none is cut off).
	ctx, cancel := context.WithDeadline(parent, end)
	defer cancel()
	cc, err := pgx.ParseConfig(d.dsn)
	if err != nil {
		return fmt.Errorf("parsing the writers' DSN: %w", err)
	}
	// The INSERT's row count comes from its parameters (generate_series),
	// so Postgres's plan cache would keep choosing a custom plan and plan
	// every transaction again, CPU the writers' backends take from the
	// machine walrelay is measured on (docs/benchmarks.md, Live). An
	// application's INSERT ... VALUES is planned once.
	cc.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	conns := make([]*pgx.Conn, d.writers)
	for i := range conns {
		c, err := pgx.ConnectConfig(ctx, cc)
		if err != nil {
			return fmt.Errorf("connecting writer %d: %w", i, err)
		}
		defer c.Close(context.Background())
		conns[i] = c
	}
	sql := fmt.Sprintf(rowsSQL, "$1::text", "$2::int", "$3::bigint", "$4::bigint")

	var (
		tokens chan struct{}
		ticks  <-chan time.Time // nil (never) at the max rate
	)
	if d.rate > 0 {
		tokens = make(chan struct{}, d.writers)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		ticks = tick.C
	}
	var (
		wg      sync.WaitGroup
		errOnce sync.Once
		runErr  error
	)
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if tokens != nil {
					select {
					case <-ctx.Done():
						return
					case <-tokens:
					}
				} else if ctx.Err() != nil {
					return
				}
				k := int64(d.rowsPerTx)
				first := d.seq.Add(k) - k + 1
				if _, err := c.Exec(parent, sql, d.agg, d.pad, first, first+k-1); err != nil {
					if parent.Err() == nil {
						errOnce.Do(func() { runErr = fmt.Errorf("inserting: %w", err); cancel() })
					}
					return
				}
				d.inserted.Add(k)
			}
		}()
	}
	// The pacer hands out one token per transaction on schedule; a token
	// no writer is free to take is counted as missed, not queued.
	warmTimer := time.NewTimer(time.Until(warmEnd))
	defer warmTimer.Stop()
	warmDone := false
	began := time.Now()
	var issued int64
	txRate := float64(d.rate) / float64(d.rowsPerTx)
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-warmTimer.C:
			// Sampled aside so the pacer keeps its schedule.
			warmDone = true
			wg.Add(1)
			go func() { defer wg.Done(); atWarmEnd() }()
		case now := <-ticks:
			due := int64(now.Sub(began).Seconds() * txRate)
			for ; issued < due; issued++ {
				select {
				case tokens <- struct{}{}:
				default:
					d.missed.Add(1)
				}
			}
		}
	}
	wg.Wait()
	if !warmDone {
		atWarmEnd() // a zero-length window
	}
	if runErr != nil {
		return runErr
	}
	if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// consumer reads the live topic and records commit-to-consume latencies.
type consumer struct {
	cl       *kgo.Client
	received atomic.Int64
	done     chan struct{}
	cancel   context.CancelFunc

	mu       sync.Mutex
	from, to int64   // window, µs since the epoch
	lat      []int64 // µs, events inserted in the window
	changed  chan struct{}
}

func startConsumer(brokers []string, topic string) (*consumer, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("creating consumer: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &consumer{cl: cl, done: make(chan struct{}), cancel: cancel, changed: make(chan struct{}, 1)}
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			recv := time.Now()
			var n int64
			c.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				n++
				ts, ok := payloadTS(r.Value)
				if !ok || ts < c.from || ts >= c.to {
					return
				}
				commit := max(ts, r.Timestamp.UnixMicro()) // both at or before the commit
				c.lat = append(c.lat, recv.UnixMicro()-commit)
			})
			c.mu.Unlock()
			if n > 0 {
				c.received.Add(n)
				select {
				case c.changed <- struct{}{}:
				default:
				}
			}
		}
	}()
	return c, nil
}

func (c *consumer) setWindow(from, to time.Time) {
	c.mu.Lock()
	c.from, c.to = from.UnixMicro(), to.UnixMicro()
	c.mu.Unlock()
}

// waitFor waits until n records arrived; producerDone closing (walrelay
// exited) ends the wait early.
func (c *consumer) waitFor(ctx context.Context, n int64, producerDone <-chan struct{}) error {
	for c.received.Load() < n {
		select {
		case <-ctx.Done():
			return fmt.Errorf("received %d of %d: %w", c.received.Load(), n, ctx.Err())
		case <-producerDone:
			if c.received.Load() < n {
				return fmt.Errorf("received %d of %d: walrelay exited", c.received.Load(), n)
			}
		case <-c.changed:
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

func (c *consumer) latencies() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.lat)
}

func (c *consumer) close() {
	c.cancel()
	<-c.done
	c.cl.Close()
}

// payloadTS reads the "ts" member of a payload written by rowsSQL (jsonb
// text: `"ts": 1763712000123456`).
func payloadTS(v []byte) (int64, bool) {
	i := bytes.Index(v, []byte(`"ts": `))
	if i < 0 {
		return 0, false
	}
	rest := v[i+len(`"ts": `):]
	j := 0
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	n, err := strconv.ParseInt(string(rest[:j]), 10, 64)
	return n, err == nil
}
