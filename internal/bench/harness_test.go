package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
)

// TestMain doubles as the kfake child the harness starts: the smoke test
// passes this test binary with the argument "kfake" as BrokerCommand.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "kfake" {
		os.Exit(kfakeChild(os.Args[2:]))
	}
	testenv.Main(m)
}

func kfakeChild(args []string) int {
	fs := flag.NewFlagSet("kfake", flag.ContinueOnError)
	var opts KfakeOptions
	fs.IntVar(&opts.Partitions, "partitions", 3, "")
	fs.BoolVar(&opts.Blackhole, "blackhole", false, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := ServeKfake(ctx, opts, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// smokeConfig is what the smoke tests share: a database, a walrelay
// binary built for them, the broker in a process of this test binary, and
// a context that bounds the run. The test adds backlogs and live runs.
func smokeConfig(t *testing.T) (context.Context, Config) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	bin := filepath.Join(t.TempDir(), "walrelay")
	if err := BuildWalrelay(ctx, bin, raceBuildFlags...); err != nil {
		t.Fatal(err)
	}
	return ctx, Config{
		DSN:           testenv.Postgres(t).NewDatabase(t),
		BrokerCommand: []string{os.Args[0], "kfake"},
		WalrelayBin:   bin,
		Writers:       2,
		StepTimeout:   2 * time.Minute,
		Progress:      t.Output(),
	}
}

// TestSmoke runs one small backlog measurement, the same backlog as
// logical messages (the table-less outbox), and one short live
// measurement end to end (private broker process, real walrelay binary)
// and checks the results are complete and consistent. It asserts nothing
// about speed.
func TestSmoke(t *testing.T) {
	ctx, cfg := smokeConfig(t)
	const n = 2000
	cfg.Backlogs = []Backlog{{Shape: Shape{RowsPerTx: 1}, N: n}, {Shape: Shape{RowsPerTx: 1, Messages: true}, N: n}}
	cfg.Lives = []Live{{Shape: Shape{RowsPerTx: 2}, Rate: 200}}
	cfg.LiveDuration, cfg.LiveWarmup = 2*time.Second, 500*time.Millisecond
	cfg.Repeat = 1
	cfg.KfakeRealtime = true
	r, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}

	// The broker was switched to real-time before the live run, or says
	// why not (a test run without root or CAP_SYS_NICE).
	if !strings.Contains(r.Broker, "real-time scheduling (SCHED_FIFO 1) in the live runs") && !strings.Contains(r.Broker, "real-time refused") {
		t.Errorf("broker %q: want its scheduling in the live runs", r.Broker)
	}
	if len(r.Backlogs) != 2 {
		t.Fatalf("%d backlog results, want 2", len(r.Backlogs))
	}
	for i, want := range []struct{ shape, style string }{{"single", "rows"}, {"msg-single", "messages"}} {
		b := r.Backlogs[i]
		if b.Error != "" {
			t.Fatalf("backlog %s failed: %s", want.shape, b.Error)
		}
		if b.Shape != want.shape || b.Style != want.style || b.Events != n || b.Transactions != n || b.WALBytes == 0 || b.PayloadBytes < 250 ||
			math.Abs(b.WALBytesPerEvent-float64(b.WALBytes)/n) > 1e-9 {
			t.Errorf("backlog = %s (%s), %d events in %d transactions, %d WAL bytes (%.1f per event), %.0f-byte payloads; want %s (%s), %d in %d, some WAL, payloads",
				b.Shape, b.Style, b.Events, b.Transactions, b.WALBytes, b.WALBytesPerEvent, b.PayloadBytes, want.shape, want.style, n, n)
		}
		if b.Walrelay == nil || b.Walrelay.BrokerRecords != n || b.Walrelay.CPUPerEventUS <= 0 {
			t.Fatalf("%s: walrelay drain %+v, want %d records on the broker and its CPU", b.Shape, b.Walrelay, n)
		}
	}
	b := r.Backlogs[0]
	if b.Floor == nil || b.Walrelay == nil || len(b.FloorRuns) != 1 || len(b.WalrelayRuns) != 1 {
		t.Fatalf("floor %v, walrelay %v, runs %d/%d; want one of each", b.Floor, b.Walrelay, len(b.FloorRuns), len(b.WalrelayRuns))
	}
	if got := b.Walrelay.BrokerRecords; got != n {
		t.Errorf("broker holds %d records, want %d", got, n)
	}
	for name, d := range map[string]*Drain{"pg_recvlogical": b.Floor, "walrelay": b.Walrelay} {
		if d.Seconds <= 0 || d.EventsPerSec <= 0 || d.StreamSeconds <= 0 || d.StreamSeconds > d.Seconds || d.PeakRSSBytes <= 0 || d.CPUSeconds <= 0 {
			t.Errorf("%s drain = %+v; want positive times, rates, RSS and CPU, stream time within wall time", name, *d)
		}
		if math.Abs(d.EventsPerSec*d.Seconds-n) > 1 {
			t.Errorf("%s: %.0f events/s over %.3fs is not %d events", name, d.EventsPerSec, d.Seconds, n)
		}
	}
	if b.Walrelay.AckedSeconds <= 0 || b.Walrelay.AckedSeconds > b.Walrelay.Seconds+1 {
		t.Errorf("walrelay acked at %.3fs, confirmed at %.3fs", b.Walrelay.AckedSeconds, b.Walrelay.Seconds)
	}
	if want := b.Walrelay.EventsPerSec / b.Floor.EventsPerSec; b.Ratio <= 0 || math.Abs(b.Ratio-want) > 1e-9 || b.StreamRatio <= 0 {
		t.Errorf("ratio = %v (stream %v), want %v", b.Ratio, b.StreamRatio, want)
	}

	if len(r.Lives) != 1 {
		t.Fatalf("%d live results, want 1", len(r.Lives))
	}
	l := r.Lives[0]
	if l.Error != "" {
		t.Fatalf("live failed: %s", l.Error)
	}
	if l.Inserted <= 0 || l.Received != l.Inserted || l.Events <= 0 || int64(l.Events) > l.Inserted || l.Latency.Samples != l.Events {
		t.Errorf("live: inserted %d, received %d, %d events in the window, %d latency samples", l.Inserted, l.Received, l.Events, l.Latency.Samples)
	}
	if l.AchievedRate <= 0 || l.Latency.P50 <= 0 || l.Latency.P99 < l.Latency.P50 || l.Latency.P999 < l.Latency.P99 || l.Latency.Max < l.Latency.P999 {
		t.Errorf("live: %.0f events/s, latency %+v", l.AchievedRate, l.Latency)
	}
	if l.PeakRSSBytes <= 0 || l.CPUPerEventUS < 0 {
		t.Errorf("live: peak RSS %d, CPU %.2f µs/event", l.PeakRSSBytes, l.CPUPerEventUS)
	}
	// The walsender is read only from the harness's own cluster; this run
	// was given a DSN.
	if l.WalrelayCPUWait < 0 || l.BrokerCPUWait < 0 || l.WalsenderCPUWait != -1 {
		t.Errorf("live: CPU wait per CPU second walrelay %v, walsender %v, broker %v; want walrelay's and the broker's, the walsender's unknown",
			l.WalrelayCPUWait, l.WalsenderCPUWait, l.BrokerCPUWait)
	}
	// walrelay's histograms over the window: one commit-to-read sample per
	// transaction (two rows each), one of each other per record.
	if l.GoroutineWaits == nil || l.GoroutineWaits.Samples == 0 {
		t.Errorf("live: goroutine waits %+v; want walrelay's scheduler histogram read", l.GoroutineWaits)
	}
	if l.RelayLatency == nil || l.RelayRead == nil || l.RelayAck == nil || l.BrokerRTT == nil {
		t.Fatalf("live: walrelay histograms commit-ack %v, commit-read %v, produce-ack %v, broker round trip %v; want all four",
			l.RelayLatency, l.RelayRead, l.RelayAck, l.BrokerRTT)
	}
	if l.RelayRead.Samples >= l.RelayLatency.Samples || l.RelayAck.Samples != l.RelayLatency.Samples || l.RelayRead.P50 <= 0 || l.RelayAck.P50 <= 0 {
		t.Errorf("live: walrelay histograms commit-ack %+v, commit-read %+v, produce-ack %+v; want fewer reads than records, as many acks, positive medians",
			*l.RelayLatency, *l.RelayRead, *l.RelayAck)
	}

	var table, js bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pg_recvlogical ev/s", "ratio", "single", "tx2", "p99.9 ms", "WAL B/ev", "Outbox styles", "msg-single", "CPU µs/ev (pg_recvlogical/walrelay)", "commit-read p50/p99 ms", "broker round trip", "goroutine waits", "CPU wait/run", "walrelay peak RSS MiB"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("JSON report does not decode: %v", err)
	}
	if back.Backlogs[0].Ratio != b.Ratio || back.Lives[0].Latency != l.Latency {
		t.Errorf("JSON round trip changed the results")
	}
	t.Logf("\n%s", table.String())
}

// TestSmokeDeliveries drains one small backlog in both delivery modes end
// to end and checks each mode's drain was counted as it must be: the
// exactly-once one by a read_committed consumer, with its Kafka
// transactions read from walrelay. It asserts nothing about speed.
func TestSmokeDeliveries(t *testing.T) {
	ctx, cfg := smokeConfig(t)
	const n = 2000
	cfg.Backlogs = []Backlog{{Shape: Shape{RowsPerTx: 10}, N: n}}
	cfg.Deliveries = []string{"exactly_once", "at_least_once"}
	cfg.Repeat = 2
	r, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Backlogs) != 1 || r.Backlogs[0].Error != "" {
		t.Fatalf("backlogs %+v: want one without error", r.Backlogs)
	}
	b := r.Backlogs[0]
	if len(b.Deliveries) != 2 || b.Deliveries[0].Delivery != "exactly_once" || b.Deliveries[1].Delivery != "at_least_once" {
		t.Fatalf("deliveries %+v: want exactly_once then at_least_once", b.Deliveries)
	}
	for _, d := range b.Deliveries {
		if len(d.Runs) != 2 || d.Walrelay == nil {
			t.Fatalf("%s: %d runs, median %v; want 2 and a median", d.Delivery, len(d.Runs), d.Walrelay)
		}
		for _, run := range d.Runs {
			if run.BrokerRecords != n || run.EventsPerSec <= 0 || run.CPUSeconds <= 0 || run.PeakRSSBytes <= 0 {
				t.Errorf("%s drain %+v: want %d records, positive rate, CPU and RSS", d.Delivery, run, n)
			}
			eos := d.Delivery == "exactly_once"
			if eos != (run.KafkaTransactions > 0) || eos == (run.AckedSeconds > 0) {
				t.Errorf("%s drain: %d Kafka transactions, acked at %.3fs; want transactions only in exactly_once, the acked time only in at_least_once",
					d.Delivery, run.KafkaTransactions, run.AckedSeconds)
			}
		}
	}
	if b.ExactlyOnceRatio <= 0 || b.Walrelay != b.Deliveries[0].Walrelay || len(b.FloorRuns) != 2 {
		t.Errorf("ratio %v, walrelay %v, %d floor runs; want a ratio, the first mode's median, 2 floor runs", b.ExactlyOnceRatio, b.Walrelay, len(b.FloorRuns))
	}
	if !slices.Equal(r.Settings.Deliveries, cfg.Deliveries) {
		t.Errorf("settings' deliveries %q, want %q", r.Settings.Deliveries, cfg.Deliveries)
	}
	var table bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "ratio = exactly_once / at_least_once") {
		t.Errorf("table lacks the delivery comparison:\n%s", table.String())
	}
	t.Logf("\n%s", table.String())
}

// TestSmokeAvro drains one small backlog with walrelay's avro value
// converter (Config.Converter) against the harness's schema registry and
// checks that every record landed and that walrelay registered the value
// schema under the topic's subject, and no key schema (keys stay raw). It
// asserts nothing about speed.
func TestSmokeAvro(t *testing.T) {
	ctx, cfg := smokeConfig(t)
	const n = 1000
	cfg.Backlogs = []Backlog{{Shape: Shape{RowsPerTx: 100}, N: n}}
	cfg.Repeat = 1
	cfg.Converter = "avro"
	r, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Backlogs) != 1 || r.Backlogs[0].Walrelay == nil || r.Backlogs[0].Walrelay.BrokerRecords != n {
		t.Fatalf("backlogs %+v: want one drain that put %d records on the broker", r.Backlogs, n)
	}
	if want := []string{"outbox.event.b1_tx100-value"}; !slices.Equal(r.RegistrySubjects, want) {
		t.Errorf("registry subjects %q, want %q", r.RegistrySubjects, want)
	}
	var table bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "walrelay value converter avro") {
		t.Errorf("the table does not name the converter:\n%s", table.String())
	}
}
