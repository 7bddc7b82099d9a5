package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/config"
)

// Drain is one consumer draining a backlog.
type Drain struct {
	// Seconds is the wall time from the process start to the end: for
	// pg_recvlogical its exit at --endpos; for walrelay the slot's
	// confirmed_flush_lsn reaching the backlog's end (every record acked).
	Seconds float64 `json:"seconds"`
	// StreamSeconds excludes startup: from the slot becoming active (the
	// walsender started streaming to the process) to the same end.
	StreamSeconds float64 `json:"stream_seconds"`
	EventsPerSec  float64 `json:"events_per_sec"`
	// StreamEventsPerSec is events per StreamSeconds.
	StreamEventsPerSec float64 `json:"stream_events_per_sec"`
	// AckedSeconds (walrelay only) is from the process start to the broker
	// holding all N records (end offsets polled), before the confirmation.
	AckedSeconds float64 `json:"acked_seconds,omitempty"`
	// CPUSeconds is the process's own CPU time (user+system, all threads)
	// from its start to the end, startup included.
	CPUSeconds    float64 `json:"cpu_seconds"`
	CPUPerEventUS float64 `json:"cpu_us_per_event"`
	PeakRSSBytes  int64   `json:"peak_rss_bytes"`
	WalsenderCPU  float64 `json:"walsender_cpu_seconds,omitempty"`
	BrokerCPU     float64 `json:"broker_cpu_seconds,omitempty"`
	// BrokerRecords (walrelay only) is the records the drain put on the
	// topic: by its end offsets, or in exactly-once delivery as a
	// read_committed consumer sees them (committedRecords).
	BrokerRecords   int64   `json:"broker_records,omitempty"`
	ShutdownSeconds float64 `json:"shutdown_seconds,omitempty"`
	// KafkaTransactions and KafkaAborted (exactly-once delivery only) are
	// walrelay's Kafka transactions committed and aborted in the drain
	// (walrelay_kafka_transactions_total when the slot reached the end).
	KafkaTransactions int64 `json:"kafka_transactions,omitempty"`
	KafkaAborted      int64 `json:"kafka_transactions_aborted,omitempty"`
	// OtherCPU is the share of the machine's CPU (all cores) that
	// processes outside the benchmark used during the drain; -1 when
	// unknown (external Postgres). Anything above a few percent skews it.
	OtherCPU float64 `json:"other_cpu_share"`
}

// runFloor drains the backlog from slot with pg_recvlogical to /dev/null,
// exiting at target (--endpos).
func (e *env) runFloor(ctx context.Context, slot string, start, target pglogrepl.LSN, n int) (Drain, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.StepTimeout)
	defer cancel()
	w, stopWatch, err := watchSlot(ctx, e.dsn, slot, target, e.local)
	if err != nil {
		return Drain{}, err
	}
	defer stopWatch()
	// The password goes in the environment, not on the command line
	// (which every user can read in ps).
	conninfo, password := splitPassword(e.dsn)
	cmd := exec.Command(filepath.Join(e.pgBin, "pg_recvlogical"),
		"-d", conninfo, "--slot", slot, "--start", "--no-loop",
		// The options walrelay starts replication with: pgoutput sends
		// the logical messages of the message style too.
		"-o", "proto_version=1", "-o", "publication_names="+pubName, "-o", "messages=true",
		"-f", "/dev/null", "--endpos", target.String())
	cmd.Env = childEnv()
	if password != "" {
		cmd.Env = append(cmd.Env, "PGPASSWORD="+password)
	}
	before := e.beforeDrain()
	p, err := startProc("pg_recvlogical", cmd, filepath.Join(e.workDir, "pg_recvlogical.log"))
	if err != nil {
		return Drain{}, err
	}
	progCtx, stopProg := context.WithCancel(ctx)
	go progressLoop(progCtx, e.cfg, "pg_recvlogical", w, start, target, p.started)
	err = p.wait(ctx)
	mark := e.cpuMark()
	stopProg()
	if err != nil {
		return Drain{}, fmt.Errorf("pg_recvlogical: %w\n%s", err, p.logTail(20))
	}
	stopWatch()
	v := w.snapshot()
	if v.err != nil {
		return Drain{}, v.err
	}
	d := e.drain(before, mark, p.started, p.exitAt, v)
	if cpu, rss, ok := p.rusage(); ok {
		d.CPUSeconds, d.PeakRSSBytes = cpu.Seconds(), rss
	}
	d.rates(n)
	return d, nil
}

// relayRun is one drain by walrelay.
type relayRun struct {
	name, slot string // the drain's name (its log, its profile) and slot
	delivery   string // relay.delivery
	// compare: the run compares delivery modes, and the harness sets
	// relay.delivery (Config.comparesDeliveries).
	compare       bool
	start, target pglogrepl.LSN // the backlog's WAL
	n             int           // its events
	topic         string        // where they go
	// messages: the backlog is logical messages (outbox.message_prefix
	// is set to messagePrefix).
	messages bool
	// profileSeconds is the length of the CPU profile, with
	// Config.ProfileDir.
	profileSeconds int
}

// runRelay drains the backlog from run.slot with `walrelay run` until the
// slot's confirmed_flush_lsn reaches run.target, then stops it with
// SIGTERM, and checks that the topic gained exactly run.n records: by its
// end offsets, or in exactly-once delivery with a read_committed consumer
// (committedRecords), since transaction markers take offsets too.
func (e *env) runRelay(ctx context.Context, run relayRun) (Drain, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.StepTimeout)
	defer cancel()
	eos := run.delivery == config.ExactlyOnce
	from, err := e.endOffsets(ctx, run.topic)
	if err != nil {
		return Drain{}, fmt.Errorf("reading the end offsets of %s before the drain: %w", run.topic, err)
	}
	var base int64 // records on the topic before the drain
	for _, o := range from {
		base += o
	}
	w, stopWatch, err := watchSlot(ctx, e.dsn, run.slot, run.target, e.local)
	if err != nil {
		return Drain{}, err
	}
	defer stopWatch()
	httpAddr, err := freeAddr()
	if err != nil {
		return Drain{}, err
	}
	var extra []string
	if run.messages {
		extra = append(extra, "WALRELAY_OUTBOX_MESSAGE_PREFIX="+messagePrefix)
	}
	if run.compare {
		extra = append(extra, envDelivery+"="+run.delivery)
	}
	if eos {
		// Its own transactional id (and so its own checkpoints): a drain
		// starts as a first deployment does, whatever drained before it.
		extra = append(extra, "WALRELAY_KAFKA_TRANSACTIONAL_ID=walrelay-bench-"+run.name)
	}
	before := e.beforeDrain()
	p, err := e.startWalrelay(run.name, run.slot, httpAddr, extra...)
	if err != nil {
		return Drain{}, err
	}
	defer p.stop(syscall.SIGKILL, 5*time.Second) // no-op after a clean stop
	waitProfile := e.startProfile(ctx, httpAddr, run.name, run.profileSeconds, w.active)

	// The broker holds all N records: polled less often than the slot.
	// Not in exactly-once delivery, where the end offsets count the
	// transaction markers too (records become visible at their Kafka
	// transaction's commit, which the confirmation follows).
	var ackedAt time.Time
	ackedCh := make(chan struct{})
	go func() {
		defer close(ackedCh)
		if eos {
			return
		}
		t := time.NewTicker(max(5*pollInterval, 50*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if got, err := e.topicRecords(ctx, run.topic); err == nil && got >= base+int64(run.n) {
				ackedAt = time.Now()
				return
			}
		}
	}()
	progCtx, stopProg := context.WithCancel(ctx)
	go progressLoop(progCtx, e.cfg, "walrelay", w, run.start, run.target, p.started)
	select {
	case <-w.reached:
	case <-w.done: // the watcher failed
	case <-p.done:
	case <-ctx.Done():
	}
	stopProg()
	v := w.snapshot()
	if v.reachedAt.IsZero() {
		stopWatch()
		cancel()
		<-ackedCh
		_ = p.stop(syscall.SIGTERM, 10*time.Second)
		why := "timed out"
		if v.err != nil {
			why = v.err.Error()
		} else if p.exited() {
			why = fmt.Sprintf("walrelay exited: %v", p.waitErr)
		} else if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			why = ctx.Err().Error()
		}
		return Drain{}, fmt.Errorf("walrelay did not confirm the backlog's end %s: %s\n%s", run.target, why, p.logTail(20))
	}
	// Sample the process before stopping it.
	mark := e.cpuMark()
	cpu, cpuErr := ProcessCPU(p.pid())
	hwm, hwmErr := procHWM(p.pid())
	<-ackedCh
	d := e.drain(before, mark, p.started, v.reachedAt, v)
	if !ackedAt.IsZero() {
		d.AckedSeconds = ackedAt.Sub(p.started).Seconds()
	}
	waitProfile()
	if eos {
		committed, aborted, err := kafkaTransactions(ctx, httpAddr)
		if err != nil {
			return Drain{}, fmt.Errorf("reading walrelay's Kafka transactions: %w", err)
		}
		d.KafkaTransactions, d.KafkaAborted = committed, aborted
	}
	stopAt := time.Now()
	if err := p.stop(syscall.SIGTERM, 30*time.Second); err != nil {
		return Drain{}, fmt.Errorf("stopping walrelay: %w\n%s", err, p.logTail(20))
	}
	d.ShutdownSeconds = p.exitAt.Sub(stopAt).Seconds()
	if err := errors.Join(cpuErr, hwmErr); err != nil {
		// The process is gone (it should not be): fall back to rusage,
		// which covers its whole life.
		ru, rss, ok := p.rusage()
		if !ok {
			return Drain{}, fmt.Errorf("reading walrelay's CPU and memory: %w", err)
		}
		cpu, hwm = ru, rss
	}
	d.CPUSeconds, d.PeakRSSBytes = cpu.Seconds(), hwm
	d.rates(run.n)

	if eos {
		d.BrokerRecords, err = committedRecords(ctx, e.brokers, e.admin, run.topic, from)
		// The next exactly-once drain creates the checkpoint topic again,
		// as a first deployment does; failing to delete costs memory.
		if _, derr := e.admin.DeleteTopics(context.WithoutCancel(ctx), e.checkpointTopic()); derr != nil {
			e.cfg.Log.Warn("deleting the checkpoint topic", "topic", e.checkpointTopic(), "err", derr)
		}
	} else {
		var got int64
		got, err = e.topicRecords(ctx, run.topic)
		d.BrokerRecords = got - base
	}
	if err != nil {
		return Drain{}, fmt.Errorf("counting records on %s: %w", run.topic, err)
	}
	if d.BrokerRecords != int64(run.n) {
		return Drain{}, fmt.Errorf("walrelay put %d records on %s, want %d", d.BrokerRecords, run.topic, run.n)
	}
	return d, nil
}

// drainMarks are read just before a drain's consumer starts.
type drainMarks struct {
	cpu       cpuSample     // for the share of other work
	brokerCPU time.Duration // the local broker's CPU time (0 without one)
}

func (e *env) beforeDrain() drainMarks {
	m := drainMarks{cpu: e.cpuMark()}
	if e.broker != nil {
		m.brokerCPU = e.broker.cpu()
	}
	return m
}

// drain fills what both consumers' drains measure alike: the time from the
// process start to end, and from the slot's activation (v) to end, the
// walsender's CPU, and since before, other work's share of the machine
// (up to mark) and the local broker's CPU.
func (e *env) drain(before drainMarks, mark cpuSample, started, end time.Time, v slotView) Drain {
	d := Drain{Seconds: end.Sub(started).Seconds(), WalsenderCPU: v.walsenderCPU.Seconds(), OtherCPU: otherCPU(before.cpu, mark)}
	if !v.activeAt.IsZero() {
		d.StreamSeconds = end.Sub(v.activeAt).Seconds()
	}
	if e.broker != nil {
		d.BrokerCPU = (e.broker.cpu() - before.brokerCPU).Seconds()
	}
	return d
}

// rates fills the per-event figures of a drain of n events.
func (d *Drain) rates(n int) {
	if d.Seconds > 0 {
		d.EventsPerSec = float64(n) / d.Seconds
	}
	if d.StreamSeconds > 0 {
		d.StreamEventsPerSec = float64(n) / d.StreamSeconds
	}
	if n > 0 {
		d.CPUPerEventUS = d.CPUSeconds * 1e6 / float64(n)
	}
}

// endOffsets returns the end offsets of topic's partitions, none when the
// topic does not exist (yet).
func (e *env) endOffsets(ctx context.Context, topic string) (map[int32]int64, error) {
	offs, err := e.admin.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := make(map[int32]int64)
	for _, o := range offs[topic] {
		switch {
		case errors.Is(o.Err, kerr.UnknownTopicOrPartition):
			return map[int32]int64{}, nil
		case o.Err != nil:
			return nil, fmt.Errorf("partition %d: %w", o.Partition, o.Err)
		}
		out[o.Partition] = o.Offset
	}
	return out, nil
}

// committedRecords counts the records on topic after the offsets from
// (by partition; a partition missing from it from its start) that a
// read_committed consumer sees: the records of committed transactions,
// without those of aborted ones nor the transaction markers, which take
// offsets too. It reads up to the end offsets, and fails if a
// transaction is still open on the topic (its last stable offset behind
// its end), whose records may yet commit.
func committedRecords(ctx context.Context, brokers []string, adm *kadm.Client, topic string, from map[int32]int64) (int64, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("listing end offsets: %w", err)
	}
	stable, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = stable.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("listing last stable offsets: %w", err)
	}
	goal := make(map[int32]int64) // partitions left to read, up to their end
	parts := make(map[int32]kgo.Offset)
	var openErr error
	ends.Each(func(o kadm.ListedOffset) {
		if lso, ok := stable.Lookup(topic, o.Partition); !ok || lso.Offset != o.Offset {
			openErr = fmt.Errorf("partition %d: a transaction is open (last stable offset %d, end %d)", o.Partition, lso.Offset, o.Offset)
		}
		if o.Offset > from[o.Partition] {
			goal[o.Partition] = o.Offset
			parts[o.Partition] = kgo.NewOffset().At(from[o.Partition])
		}
	})
	if openErr != nil {
		return 0, openErr
	}
	if len(goal) == 0 {
		return 0, nil
	}
	// Control records kept, so that reading past a partition's last
	// marker shows it was read to its end.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		return 0, fmt.Errorf("creating a read_committed consumer: %w", err)
	}
	defer cl.Close()
	var n int64
	for len(goal) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return n, fmt.Errorf("reading %s with %d of its partitions left: %w", topic, len(goal), err)
		}
		var ferr error
		fs.EachError(func(_ string, p int32, err error) { ferr = errors.Join(ferr, fmt.Errorf("partition %d: %w", p, err)) })
		if ferr != nil {
			return n, fmt.Errorf("reading %s: %w", topic, ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := goal[r.Partition]
			if !ok || r.Offset >= end {
				return // past the end listed before reading: not this drain's
			}
			if !r.Attrs.IsControl() {
				n++
			}
			if r.Offset+1 >= end {
				delete(goal, r.Partition)
			}
		})
	}
	return n, nil
}

// checkpointTopic is walrelay's relay.checkpoint_topic in the drains: its
// default unless Config.WalrelayEnv sets it.
func (e *env) checkpointTopic() string {
	topic := config.Default().Relay.CheckpointTopic
	for _, kv := range e.cfg.WalrelayEnv {
		if v, ok := strings.CutPrefix(kv, "WALRELAY_RELAY_CHECKPOINT_TOPIC="); ok {
			topic = v
		}
	}
	return topic
}

// topicRecords sums the end offsets of topic's partitions (each backlog
// has its own topic, starting empty).
func (e *env) topicRecords(ctx context.Context, topic string) (int64, error) {
	offs, err := e.admin.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	if err := offs.Error(); err != nil {
		return 0, err
	}
	var sum int64
	offs.Each(func(o kadm.ListedOffset) { sum += o.Offset })
	return sum, nil
}

// freeAddr returns a loopback host:port nobody listens on right now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(l.Addr().(*net.TCPAddr).Port)), nil
}

// splitPassword removes the password from a libpq connection string (URL
// or key=value) and returns it separately.
func splitPassword(dsn string) (conninfo, password string) {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		if u.User != nil {
			if p, ok := u.User.Password(); ok {
				u.User = url.User(u.User.Username())
				password = p
			}
		}
		q := u.Query()
		if p := q.Get("password"); p != "" {
			password = p
			q.Del("password")
			u.RawQuery = q.Encode()
		}
		return u.String(), password
	}
	// key=value: values may be quoted with single quotes.
	var out []string
	for _, kv := range splitConninfo(dsn) {
		if v, ok := strings.CutPrefix(kv, "password="); ok {
			password = strings.Trim(v, "'")
			continue
		}
		out = append(out, kv)
	}
	return strings.Join(out, " "), password
}

// splitConninfo splits key=value pairs on spaces outside single quotes.
func splitConninfo(s string) []string {
	var (
		out    []string
		cur    strings.Builder
		quoted bool
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			cur.WriteByte(c)
			i++
			cur.WriteByte(s[i])
		case c == '\'':
			quoted = !quoted
			cur.WriteByte(c)
		case c == ' ' && !quoted:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteByte(c)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}
