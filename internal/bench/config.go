package bench

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/walrelay/walrelay/internal/config"
)

// Config configures a harness run. Default returns the default set; the
// zero value of a field means its default.
type Config struct {
	// DSN is an existing Postgres server (wal_level=logical; a role that
	// may create schemas, publications and slots). Empty: a private
	// cluster from the local installation (internal/localpg). pg_recvlogical
	// comes from the private cluster's installation, or with DSN from
	// localpg.FindBinDir ($WALRELAY_PG_BIN chooses it).
	DSN string
	// PGUnixSocket connects every client of the private cluster (the
	// writers, pg_recvlogical, walrelay) over its Unix-domain socket
	// instead of TCP on 127.0.0.1. Not with DSN, which chooses for itself.
	PGUnixSocket bool
	// Brokers are existing Kafka brokers. Empty: kfake in a child process
	// started with BrokerCommand.
	Brokers []string
	// BrokerCommand starts the kfake child: it is run with the flags of
	// KfakeOptions appended and must behave like ServeKfake. Default: this
	// executable with the argument "kfake".
	BrokerCommand []string
	// KfakeBlackhole has kfake acknowledge produced records without
	// storing them (KfakeOptions.Blackhole): backlogs only, since live
	// runs consume.
	KfakeBlackhole bool
	// KfakeHeapMiB runs the kfake process with Go's garbage collector off
	// (GOGC=off) until its heap reaches this many MiB (GOMEMLIMIT); 0
	// keeps Go's default collector. kfake keeps every record on its heap
	// (hundreds of MB in a measurement), and marking it stalls kfake's
	// responses for tens of milliseconds: a pause of the stand-in, not of
	// walrelay or of a real broker, which keeps records in files. The
	// harness has kfake collect between measurements instead.
	KfakeHeapMiB int
	// KfakeRealtime switches the kfake process to SCHED_FIFO (priority 1;
	// see setFIFO) before the live runs, so that it answers as soon as a
	// request arrives instead of waiting for one of the CPUs the measured
	// load keeps busy: its response time is part of the latency measured
	// there. The backlog drains run first under the normal policy, where
	// a real-time kfake would preempt the walsender at every request and
	// slow the drains it is not part of.
	KfakeRealtime bool
	// WalrelayBin is the walrelay binary to measure. Empty: built with
	// `go build` from the module (BuildWalrelay).
	WalrelayBin string
	// Converter is walrelay's value converter (converter.value) in every
	// drain and live run: raw (walrelay's default), json (Kafka Connect's
	// JsonConverter with schemas.enable, Connect's default) or avro
	// (Confluent's AvroConverter, registering its schemas with a schema
	// registry the harness serves from its own process: franz-go's srfake,
	// see registry.go). Keys and headers stay raw, so that runs with
	// different converters differ in the value's encoding only. Empty:
	// walrelay's default, reported as before this field existed.
	Converter string
	// WalrelayEnv are extra KEY=VALUE settings for `walrelay run`, after
	// the harness's own (so they override them).
	WalrelayEnv []string
	// Backlogs are the backlog-drain measurements, in order.
	Backlogs []Backlog
	// Deliveries are the relay.delivery modes (config.AtLeastOnce,
	// config.ExactlyOnce) walrelay drains each backlog in: each
	// repetition drains it once per mode, each from a slot of its own,
	// interleaved with pg_recvlogical's drain, so that the modes are
	// compared on the same backlog under the same conditions. Empty, or
	// at_least_once alone: walrelay's default, measured and reported as
	// before this field existed. Backlogs only (no Lives): a live run's
	// consumer reads uncommitted records.
	Deliveries []string
	// Lives are the live measurements, in order.
	Lives []Live
	// LiveDuration is how long each live measurement drives its rate,
	// after LiveWarmup.
	LiveDuration time.Duration
	// LiveWarmup is driven at the same rate before measuring; its events
	// are not counted.
	LiveWarmup time.Duration
	// Writers is the number of concurrent writer connections building a
	// backlog of single-row or small transactions, and driving live mode.
	Writers int
	// PayloadBytes is the approximate size of each row's jsonb payload.
	PayloadBytes int
	// StatusInterval is walrelay's postgres.status_interval during the
	// runs. It bounds how late the slot's confirmed_flush_lsn shows the
	// acknowledgements, so it is part of the measured drain time.
	StatusInterval time.Duration
	// StepTimeout bounds each build, drain and live measurement.
	StepTimeout time.Duration
	// Repeat is how many times each backlog is drained by each consumer
	// (each from its own slot; the backlog is built once). The report
	// gives the median run and the spread.
	Repeat int
	// ProfileDir, when set, receives a CPU profile of walrelay for each
	// drain (as long as the floor's drain of the same backlog) and live
	// window, from its /debug/pprof/profile (the harness sets
	// http.pprof). Profiling costs walrelay a little CPU: measure without
	// it.
	ProfileDir string
	// Progress receives progress lines (stderr); nil discards them.
	Progress io.Writer
	// Log receives the harness's diagnostics; nil discards them.
	Log *slog.Logger
}

// Fixed settings of every run.
const (
	// topicPartitions is the partition count of the topics walrelay
	// creates (WALRELAY_KAFKA_TOPIC_PARTITIONS) and kfake auto-creates.
	topicPartitions = 3
	// pollInterval is how often a slot's state is sampled; the broker's
	// record count is polled at most every 50ms.
	pollInterval = 10 * time.Millisecond
)

// Default returns the default set, the one `make bench` runs (about 4
// minutes on 2 cores): backlogs of 200k single-row transactions, 500k rows
// in 100-row transactions and 1M rows in one transaction, each drained 3
// times by each consumer; live at 2k, 5k and 10k single-row transactions/s
// and at 20k events/s in 10-row transactions, 15s each after a 3s warm-up.
func Default() Config {
	return Config{
		Backlogs: []Backlog{
			{Shape: Shape{RowsPerTx: 1}, N: 200000},
			{Shape: Shape{RowsPerTx: 100}, N: 500000},
			{Shape: Shape{RowsPerTx: 0}, N: 1000000},
		},
		Lives: []Live{
			{Shape: Shape{RowsPerTx: 1}, Rate: 2000},
			{Shape: Shape{RowsPerTx: 1}, Rate: 5000},
			{Shape: Shape{RowsPerTx: 1}, Rate: 10000},
			{Shape: Shape{RowsPerTx: 10}, Rate: 20000},
		},
		LiveDuration:   15 * time.Second,
		LiveWarmup:     3 * time.Second,
		Repeat:         3,
		Writers:        8,
		PayloadBytes:   300,
		StatusInterval: 100 * time.Millisecond,
		StepTimeout:    10 * time.Minute,
		KfakeHeapMiB:   defaultKfakeHeapMiB(),
		KfakeRealtime:  true,
	}
}

// withDefaults fills zero fields from Default (not Backlogs and Lives:
// empty lists mean none).
func (c Config) withDefaults() Config {
	d := Default()
	c.LiveDuration = cmp.Or(c.LiveDuration, d.LiveDuration)
	c.LiveWarmup = cmp.Or(c.LiveWarmup, d.LiveWarmup)
	c.Writers = cmp.Or(c.Writers, d.Writers)
	c.Repeat = cmp.Or(c.Repeat, d.Repeat)
	c.PayloadBytes = cmp.Or(c.PayloadBytes, d.PayloadBytes)
	c.StatusInterval = cmp.Or(c.StatusInterval, d.StatusInterval)
	c.StepTimeout = cmp.Or(c.StepTimeout, d.StepTimeout)
	c.Progress = cmp.Or(c.Progress, io.Discard)
	c.Log = cmp.Or(c.Log, slog.New(slog.DiscardHandler))
	return c
}

// Validate reports every bad field, naming it and its value.
func (c Config) Validate() error {
	var errs []error
	bad := func(field string, value any, why string) {
		errs = append(errs, fmt.Errorf("%s=%v: %s", field, value, why))
	}
	if len(c.Backlogs) == 0 && len(c.Lives) == 0 {
		bad("backlogs/lives", "(none)", "nothing to measure")
	}
	for _, b := range c.Backlogs {
		if b.N < 1 {
			bad("backlog", b, "N must be positive")
		}
		if b.Shape.RowsPerTx > 0 && b.N%b.Shape.RowsPerTx != 0 {
			bad("backlog", b, "N must be a multiple of the rows per transaction")
		}
	}
	for _, l := range c.Lives {
		if l.Shape.RowsPerTx < 1 {
			bad("live", l, "shape must have rows per transaction")
		}
		if l.Shape.Messages {
			bad("live", l, "live runs write outbox rows only")
		}
		if l.Rate < 0 {
			bad("live", l, "rate must be positive (or 0 for max)")
		}
	}
	if len(c.Lives) > 0 && c.KfakeBlackhole {
		bad("kfake-blackhole", c.KfakeBlackhole, "live runs consume, which a blackhole broker cannot serve; add --live none")
	}
	if c.LiveDuration < 0 || c.LiveWarmup < 0 {
		bad("live duration/warmup", c.LiveDuration.String()+"/"+c.LiveWarmup.String(), "must not be negative")
	}
	deliveries := c.deliveries()
	seen := make(map[string]bool)
	for _, d := range c.Deliveries {
		switch {
		case d != config.AtLeastOnce && d != config.ExactlyOnce:
			bad("delivery", d, "want "+config.AtLeastOnce+" or "+config.ExactlyOnce)
		case seen[d]:
			bad("delivery", d, "given twice")
		}
		seen[d] = true
	}
	if c.comparesDeliveries() && len(c.Lives) > 0 {
		bad("delivery", strings.Join(c.Deliveries, ","), "live runs measure at_least_once only; add --live none")
	}
	if seen[config.ExactlyOnce] && c.KfakeBlackhole {
		bad("kfake-blackhole", c.KfakeBlackhole, "exactly_once drains are counted by consuming the topic, which a blackhole broker cannot serve")
	}
	// Slots per repetition: pg_recvlogical's and one per delivery mode,
	// within the private cluster's max_replication_slots (64).
	slots := 1 + len(deliveries)
	if maxRepeat := 50 / slots; c.Repeat < 1 || c.Repeat > maxRepeat {
		bad("repeat", c.Repeat, fmt.Sprintf("must be between 1 and %d (%s slots each)", maxRepeat, slotCount(slots)))
	}
	if c.Writers < 1 || c.Writers > 128 {
		bad("writers", c.Writers, "must be between 1 and 128")
	}
	if c.PayloadBytes < 0 || c.PayloadBytes > 1<<20 {
		bad("payload-bytes", c.PayloadBytes, "must be between 0 and 1MiB")
	}
	if c.StatusInterval < 10*time.Millisecond {
		bad("status-interval", c.StatusInterval, "walrelay accepts 10ms at least")
	}
	if !slices.Contains(converters, c.Converter) {
		bad("converter", c.Converter, "want "+strings.Join(converters[1:], ", ")+" or empty (walrelay's default, raw)")
	}
	if c.PGUnixSocket && c.DSN != "" {
		bad("pg-unix-socket", c.PGUnixSocket, "is for the private cluster; give a socket DSN with --dsn instead (host=/path/to/socket/dir)")
	}
	if c.KfakeHeapMiB < 0 {
		bad("kfake-heap-mib", c.KfakeHeapMiB, "must not be negative")
	}
	if len(c.BrokerCommand) == 0 && len(c.Brokers) == 0 {
		bad("broker-command", "(empty)", "needed when no brokers are given")
	}
	for _, kv := range c.WalrelayEnv {
		k, _, ok := strings.Cut(kv, "=")
		switch {
		case !ok || !strings.HasPrefix(k, "WALRELAY_"):
			bad("walrelay-env", kv, "want WALRELAY_NAME=value")
		case k == envValueConverter && c.Converter != "":
			bad("walrelay-env", kv, "give the value converter with --converter")
		case k == envDelivery:
			// The harness counts an exactly-once drain's records
			// differently, so it must know the mode.
			bad("walrelay-env", kv, "give the delivery mode with --delivery")
		}
	}
	return errors.Join(errs...)
}

// envValueConverter is walrelay's setting of converter.value, which the
// harness sets itself with Config.Converter.
const envValueConverter = "WALRELAY_CONVERTER_VALUE"

// converters are the values of Config.Converter.
var converters = []string{"", "raw", "json", "avro"}

// converterEnv is the walrelay configuration of Config.Converter, for a
// registry at registryURL (avro only).
func (c Config) converterEnv(registryURL string) []string {
	switch c.Converter {
	case "":
		return nil
	case "avro":
		return []string{envValueConverter + "=avro", "WALRELAY_CONVERTER_VALUE_SCHEMA_REGISTRY_URL=" + registryURL}
	}
	return []string{envValueConverter + "=" + c.Converter}
}

// envDelivery is walrelay's setting of relay.delivery, which the harness
// sets itself for each drain when it compares modes.
const envDelivery = "WALRELAY_RELAY_DELIVERY"

// deliveries are the modes each backlog is drained in: Deliveries, or
// walrelay's default alone.
func (c Config) deliveries() []string {
	if len(c.Deliveries) == 0 {
		return []string{config.AtLeastOnce}
	}
	return c.Deliveries
}

// comparesDeliveries reports whether Deliveries asks for anything but
// walrelay's default: then each drain is labelled with its mode, the
// harness sets relay.delivery, and the report has the modes' results.
func (c Config) comparesDeliveries() bool {
	return len(c.Deliveries) > 1 || len(c.Deliveries) == 1 && c.Deliveries[0] != config.AtLeastOnce
}

// slotCount spells a small count of slots.
func slotCount(n int) string {
	if words := []string{"zero", "one", "two", "three"}; n < len(words) {
		return words[n]
	}
	return strconv.Itoa(n)
}
