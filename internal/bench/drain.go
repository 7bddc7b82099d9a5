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
	CPUSeconds      float64 `json:"cpu_seconds"`
	CPUPerEventUS   float64 `json:"cpu_us_per_event"`
	PeakRSSBytes    int64   `json:"peak_rss_bytes"`
	WalsenderCPU    float64 `json:"walsender_cpu_seconds,omitempty"`
	BrokerCPU       float64 `json:"broker_cpu_seconds,omitempty"`
	BrokerRecords   int64   `json:"broker_records,omitempty"`
	ShutdownSeconds float64 `json:"shutdown_seconds,omitempty"`
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
		"-o", "proto_version=1", "-o", "publication_names="+pubName,
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

// runRelay drains the backlog from slot with `walrelay run` until the
// slot's confirmed_flush_lsn reaches target, then stops it with SIGTERM.
// The topic holds base records before the drain and base+n after it.
func (e *env) runRelay(ctx context.Context, name, slot string, start, target pglogrepl.LSN, n int, topic string, base int64, profileSeconds int) (Drain, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.StepTimeout)
	defer cancel()
	w, stopWatch, err := watchSlot(ctx, e.dsn, slot, target, e.local)
	if err != nil {
		return Drain{}, err
	}
	defer stopWatch()
	httpAddr, err := freeAddr()
	if err != nil {
		return Drain{}, err
	}
	before := e.beforeDrain()
	p, err := e.startWalrelay(name, slot, httpAddr)
	if err != nil {
		return Drain{}, err
	}
	defer p.stop(syscall.SIGKILL, 5*time.Second) // no-op after a clean stop
	waitProfile := e.startProfile(ctx, httpAddr, name, profileSeconds, w.active)

	// The broker holds all N records: polled less often than the slot.
	var ackedAt time.Time
	ackedCh := make(chan struct{})
	go func() {
		defer close(ackedCh)
		t := time.NewTicker(max(5*pollInterval, 50*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if got, err := e.topicRecords(ctx, topic); err == nil && got >= base+int64(n) {
				ackedAt = time.Now()
				return
			}
		}
	}()
	progCtx, stopProg := context.WithCancel(ctx)
	go progressLoop(progCtx, e.cfg, "walrelay", w, start, target, p.started)
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
		return Drain{}, fmt.Errorf("walrelay did not confirm the backlog's end %s: %s\n%s", target, why, p.logTail(20))
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
	d.rates(n)
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
