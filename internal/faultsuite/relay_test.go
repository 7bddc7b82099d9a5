package faultsuite

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// relayProc is one walrelay process.
type relayProc struct {
	name     string
	cmd      *exec.Cmd
	logPath  string
	httpAddr string
	started  time.Time
	done     chan struct{}
	err      error // Wait's result, set before done is closed
}

// relayEnv is the configuration every relay in the suite gets, in
// delivery mode d; scenarios append to it (later entries win).
func relayEnv(dsn string, brokers []string, d delivery) []string {
	return []string{
		"WALRELAY_RELAY_DELIVERY=" + string(d),
		"WALRELAY_POSTGRES_DSN=" + dsn,
		"WALRELAY_POSTGRES_SLOT=" + slotFor(dsn),
		"WALRELAY_KAFKA_BROKERS=" + strings.Join(brokers, ","),
		"WALRELAY_POSTGRES_STATUS_INTERVAL=100ms",
		"WALRELAY_POSTGRES_MIN_BACKOFF=50ms",
		"WALRELAY_POSTGRES_MAX_BACKOFF=1s",
		"WALRELAY_METRICS_SLOT_POLL_INTERVAL=200ms",
		"WALRELAY_KAFKA_TOPIC_PARTITIONS=4",
		"WALRELAY_RELAY_SHUTDOWN_TIMEOUT=10s",
		"WALRELAY_LOG_FORMAT=json",
	}
}

// childEnv is this process's environment without any WALRELAY_* variable
// (walrelay rejects unknown ones, and the test's own must not leak in),
// plus env.
func childEnv(env []string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WALRELAY_") {
			out = append(out, kv)
		}
	}
	// Later entries override earlier ones; exec keeps the last.
	return append(out, env...)
}

// runCLI runs a walrelay subcommand to completion and fails the test on
// error.
func runCLI(t *testing.T, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, relayBin, args...)
	cmd.Env = childEnv(env)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("walrelay %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// startRelay starts `walrelay run` with env and an HTTP listener on a free
// loopback port. Its stderr goes to a file shown when the test fails; the
// process is killed at cleanup if still running.
func startRelay(t *testing.T, name string, env []string) *relayProc {
	t.Helper()
	p := &relayProc{name: name, httpAddr: freeAddr(t), done: make(chan struct{})}
	p.logPath = filepath.Join(t.TempDir(), name+".log")
	logf, err := os.Create(p.logPath)
	if err != nil {
		t.Fatalf("creating relay log: %v", err)
	}
	p.cmd = exec.Command(relayBin, "run")
	p.cmd.Env = childEnv(append(append([]string(nil), env...), "WALRELAY_HTTP_LISTEN="+p.httpAddr))
	p.cmd.Stdout = logf
	p.cmd.Stderr = logf
	if err := p.cmd.Start(); err != nil {
		_ = logf.Close()
		t.Fatalf("starting walrelay %s: %v", name, err)
	}
	p.started = time.Now()
	go func() {
		p.err = p.cmd.Wait()
		_ = logf.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("walrelay %s (pid %d) log tail:\n%s", name, p.cmd.Process.Pid, tailFile(p.logPath, 60))
		}
	})
	return p
}

func (p *relayProc) pid() int { return p.cmd.Process.Pid }

// running reports whether the process has not exited.
func (p *relayProc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits for the process to be reaped.
func (p *relayProc) kill() {
	if p.running() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// stop sends SIGTERM and returns the exit error (nil for exit 0).
func (p *relayProc) stop(timeout time.Duration) error {
	if !p.running() {
		return fmt.Errorf("walrelay %s already exited: %v", p.name, p.err)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		p.kill()
		return fmt.Errorf("walrelay %s still running %s after SIGTERM", p.name, timeout)
	}
}

// signal sends sig to the process (SIGSTOP, SIGCONT); it fails the test
// when the process is gone.
func (p *relayProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("sending %s to walrelay %s: %v", sig, p.name, err)
	}
}

// waitExit waits up to timeout for the process to exit on its own and
// returns its exit code, or fails the test.
func (p *relayProc) waitExit(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("walrelay %s still running %s later", p.name, timeout)
	}
	return p.cmd.ProcessState.ExitCode()
}

// logHas reports whether the process's log has a line containing s.
func (p *relayProc) logHas(s string) bool {
	b, err := os.ReadFile(p.logPath)
	return err == nil && strings.Contains(string(b), s)
}

// peakRSS returns VmHWM (peak resident set size) from /proc/<pid>/status,
// in bytes.
func (p *relayProc) peakRSS() (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.pid()))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("no VmHWM in /proc status")
}

// readyz returns the status code and body of GET /readyz, or 0 when the
// listener does not answer.
func (p *relayProc) readyz() (int, string) {
	cl := http.Client{Timeout: time.Second}
	resp, err := cl.Get("http://" + p.httpAddr + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// metricSum scrapes the process's /metrics and returns the sum of the
// family's samples over all label values (counters and gauges), or over
// those with the labels given as name=value pairs.
func (p *relayProc) metricSum(ctx context.Context, name string, labels ...string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.httpAddr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("parsing /metrics: %w", err)
	}
	var sum float64
	for _, m := range fams[name].GetMetric() {
		if hasLabels(m.GetLabel(), labels) {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum, nil
}

// hasLabels reports whether the sample has every name=value label pair.
func hasLabels(have []*dto.LabelPair, want []string) bool {
	for _, kv := range want {
		name, value, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(have, func(l *dto.LabelPair) bool { return l.GetName() == name && l.GetValue() == value }) {
			return false
		}
	}
	return true
}

// slotFor names the scenario's slot after its DSN: slots are
// cluster-wide, and scenarios share the package's Postgres server.
func slotFor(dsn string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(dsn))
	return fmt.Sprintf("walrelay_%08x", h.Sum32())
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

func freePort(t *testing.T) int {
	t.Helper()
	_, port, _ := net.SplitHostPort(freeAddr(t))
	n, _ := strconv.Atoi(port)
	return n
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d earlier lines)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
