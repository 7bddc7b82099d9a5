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
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
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

// slotWatch samples a slot every poll on its own connection: when a
// walsender picked it up, how far it is confirmed, and the walsender's CPU.
type slotWatch struct {
	mu           sync.Mutex
	activeAt     time.Time
	activePID    int
	confirmed    pglogrepl.LSN
	sent         pglogrepl.LSN
	reachedAt    time.Time // confirmed >= target
	walsenderCPU time.Duration
	err          error

	reached chan struct{} // closed when confirmed >= target
	done    chan struct{} // closed when the watcher stopped (ctx done or err set)
}

// watchSlot runs until ctx is done. readCPU says whether the walsender's
// /proc entry is this machine's.
func watchSlot(ctx context.Context, dsn, slot string, target pglogrepl.LSN, poll time.Duration, readCPU bool) (*slotWatch, func(), error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("connecting the slot watcher: %w", err)
	}
	w := &slotWatch{reached: make(chan struct{}), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		defer close(w.done)
		defer conn.Close(context.Background())
		t := time.NewTicker(poll)
		defer t.Stop()
		for {
			st, err := readSlot(ctx, conn, slot)
			now := time.Now()
			w.mu.Lock()
			if err != nil {
				if ctx.Err() == nil {
					w.err = err
				}
				w.mu.Unlock()
				return
			}
			if st.activePID != 0 {
				if w.activeAt.IsZero() {
					w.activeAt = now
				}
				w.activePID = st.activePID
				if readCPU {
					if cpu, err := ProcessCPU(st.activePID); err == nil {
						w.walsenderCPU = cpu
					}
				}
			}
			w.confirmed = st.confirmed
			if st.sent > w.sent {
				w.sent = st.sent
			}
			if st.confirmed >= target && w.reachedAt.IsZero() {
				w.reachedAt = now
				close(w.reached)
			}
			w.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	stop := func() { cancel(); <-w.done }
	return w, stop, nil
}

func (w *slotWatch) snapshot() (activeAt time.Time, confirmed, sent pglogrepl.LSN, reachedAt time.Time, walsenderCPU time.Duration, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.activeAt, w.confirmed, w.sent, w.reachedAt, w.walsenderCPU, w.err
}

// walsender returns the pid of the walsender streaming from the slot (0
// before one did).
func (w *slotWatch) walsender() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.activePID
}

// progressLoop prints how far a drain got every 2s until ctx is done.
func progressLoop(ctx context.Context, cfg Config, what string, w *slotWatch, start, target pglogrepl.LSN, began time.Time) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	pct := func(l pglogrepl.LSN) float64 {
		if l <= start || target <= start {
			return 0
		}
		return min(100, 100*float64(l-start)/float64(target-start))
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, confirmed, sent, _, _, _ := w.snapshot()
			progress(cfg, "  %s: %4.1fs, WAL sent %5.1f%%, confirmed %5.1f%%", what, time.Since(began).Seconds(), pct(sent), pct(confirmed))
		}
	}
}

// runFloor drains the backlog from slot with pg_recvlogical to /dev/null,
// exiting at target (--endpos).
func (e *env) runFloor(ctx context.Context, slot string, start, target pglogrepl.LSN, n int) (Drain, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.StepTimeout)
	defer cancel()
	w, stopWatch, err := watchSlot(ctx, e.dsn, slot, target, pollInterval, e.local)
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
	brokerCPU0 := e.brokerCPU()
	mark0 := e.cpuMark()
	p, err := startProc("pg_recvlogical", cmd, filepath.Join(e.workDir, "pg_recvlogical.log"))
	if err != nil {
		return Drain{}, err
	}
	progCtx, stopProg := context.WithCancel(ctx)
	go progressLoop(progCtx, e.cfg, "pg_recvlogical", w, start, target, p.started)
	err = p.wait(ctx)
	mark1 := e.cpuMark()
	stopProg()
	if err != nil {
		return Drain{}, fmt.Errorf("pg_recvlogical: %w\n%s", err, p.logTail(20))
	}
	stopWatch()
	activeAt, _, _, _, wsCPU, werr := w.snapshot()
	if werr != nil {
		return Drain{}, werr
	}
	d := Drain{Seconds: p.exitAt.Sub(p.started).Seconds(), WalsenderCPU: wsCPU.Seconds(), OtherCPU: otherCPU(mark0, mark1)}
	if !activeAt.IsZero() {
		d.StreamSeconds = p.exitAt.Sub(activeAt).Seconds()
	}
	if cpu, rss, ok := p.rusage(); ok {
		d.CPUSeconds, d.PeakRSSBytes = cpu.Seconds(), rss
	}
	if e.broker != nil {
		d.BrokerCPU = (e.brokerCPU() - brokerCPU0).Seconds()
	}
	d.rates(n)
	return d, nil
}

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

func (e *env) brokerCPU() time.Duration {
	if e.broker == nil {
		return 0
	}
	return e.broker.cpu()
}

// runRelay drains the backlog from slot with `walrelay run` until the
// slot's confirmed_flush_lsn reaches target, then stops it with SIGTERM.
// The topic holds base records before the drain and base+n after it.
func (e *env) runRelay(ctx context.Context, name, slot string, start, target pglogrepl.LSN, n int, topic string, base int64, profileSeconds int) (Drain, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.StepTimeout)
	defer cancel()
	w, stopWatch, err := watchSlot(ctx, e.dsn, slot, target, pollInterval, e.local)
	if err != nil {
		return Drain{}, err
	}
	defer stopWatch()
	httpAddr, err := freeAddr()
	if err != nil {
		return Drain{}, err
	}
	brokerCPU0 := e.brokerCPU()
	mark0 := e.cpuMark()
	p, err := e.startWalrelay(name, slot, httpAddr)
	if err != nil {
		return Drain{}, err
	}
	defer p.stop(syscall.SIGKILL, 5*time.Second) // no-op after a clean stop
	active := make(chan struct{})
	go func() {
		defer close(active)
		for ctx.Err() == nil && !p.exited() {
			if at, _, _, _, _, _ := w.snapshot(); !at.IsZero() {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	waitProfile := e.startProfile(ctx, httpAddr, name, profileSeconds, active)

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
	activeAt, _, _, reachedAt, wsCPU, werr := w.snapshot()
	if reachedAt.IsZero() {
		stopWatch()
		cancel()
		<-ackedCh
		_ = p.stop(syscall.SIGTERM, 10*time.Second)
		why := "timed out"
		if werr != nil {
			why = werr.Error()
		} else if p.exited() {
			why = fmt.Sprintf("walrelay exited: %v", p.waitErr)
		} else if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			why = ctx.Err().Error()
		}
		return Drain{}, fmt.Errorf("walrelay did not confirm the backlog's end %s: %s\n%s", target, why, p.logTail(20))
	}
	// Sample the process before stopping it.
	mark1 := e.cpuMark()
	cpu, cpuErr := ProcessCPU(p.pid())
	hwm, hwmErr := procHWM(p.pid())
	<-ackedCh
	d := Drain{Seconds: reachedAt.Sub(p.started).Seconds(), WalsenderCPU: wsCPU.Seconds(), OtherCPU: otherCPU(mark0, mark1)}
	if !activeAt.IsZero() {
		d.StreamSeconds = reachedAt.Sub(activeAt).Seconds()
	}
	if !ackedAt.IsZero() {
		d.AckedSeconds = ackedAt.Sub(p.started).Seconds()
	}
	if e.broker != nil {
		d.BrokerCPU = (e.brokerCPU() - brokerCPU0).Seconds()
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
