package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// KfakeOptions configures ServeKfake: one kfake broker on a free port of
// 127.0.0.1. The harness passes them to its child as the flags
// --partitions and --blackhole.
type KfakeOptions struct {
	// Partitions is the partition count of auto-created topics (default 3).
	Partitions int
	// Blackhole acknowledges produced records without storing them
	// (kfake.BlackholeProduce): offsets advance, nothing can be consumed.
	Blackhole bool
}

// defaultKfakeHeapMiB is kfake's default heap limit: 4 GiB, or a quarter
// of the machine's memory when that is less.
func defaultKfakeHeapMiB() int {
	const want = 4096
	total, err := procKB("/proc/meminfo", "MemTotal")
	if err != nil {
		return want
	}
	return int(min(want, total>>20/4))
}

// kfakeEnv is the environment of the kfake child: Go's collector off up to
// heapMiB (Config.KfakeHeapMiB; 0 leaves it on), and one P (GOMAXPROCS=1):
// kfake serves every request from one goroutine, so a second P only adds
// hand-offs between threads, each waiting for one of the CPUs the
// measured load shares (walrelay's relay.max_procs has the same reason).
func kfakeEnv(heapMiB int) []string {
	if heapMiB <= 0 {
		return childEnv("GOMAXPROCS=1")
	}
	return childEnv("GOMAXPROCS=1", "GOGC=off", "GOMEMLIMIT="+strconv.Itoa(heapMiB)+"MiB")
}

// listenPrefix starts the line ServeKfake prints once it listens.
const listenPrefix = "kfake listening on "

// collectCommand, a line on ServeKfake's stdin ("collect" or "collect N"),
// makes it collect its garbage and return the memory to the system; it
// answers collectedLine, followed by the same N. The harness numbers its
// requests, so the late answer to one it gave up on cannot end the wait
// for the next.
const (
	collectCommand = "collect"
	collectedLine  = "kfake collected"
)

// ServeKfake runs a one-broker kfake cluster until ctx is done or stdin
// reaches EOF (the harness that started it closed the pipe or died). Once
// it listens it prints one line to out: "kfake listening on host:port".
// For each line "collect [N]" on stdin it runs a full garbage collection,
// returns freed memory to the system and prints "kfake collected [N]": the
// harness asks between measurements, after deleting a measurement's topic,
// so that with the collector off (Config.KfakeHeapMiB) none runs during
// one.
func ServeKfake(ctx context.Context, opts KfakeOptions, stdin io.Reader, out io.Writer) error {
	if opts.Partitions <= 0 {
		opts.Partitions = topicPartitions
	}
	kopts := []kfake.Opt{kfake.NumBrokers(1), kfake.DefaultNumPartitions(opts.Partitions)}
	if opts.Blackhole {
		kopts = append(kopts, kfake.BlackholeProduce())
	}
	c, err := kfake.NewCluster(kopts...)
	if err != nil {
		return fmt.Errorf("starting kfake: %w", err)
	}
	defer c.Close()
	if _, err := fmt.Fprintln(out, listenPrefix+strings.Join(c.ListenAddrs(), ",")); err != nil {
		return fmt.Errorf("announcing kfake address: %w", err)
	}
	eof := make(chan struct{})
	if stdin != nil {
		go func() {
			defer close(eof) // at EOF or on a read error
			sc := bufio.NewScanner(stdin)
			for sc.Scan() {
				cmd, n, _ := strings.Cut(sc.Text(), " ")
				if cmd != collectCommand {
					continue
				}
				debug.FreeOSMemory() // a full collection first
				if _, err := fmt.Fprintln(out, strings.TrimSpace(collectedLine+" "+n)); err != nil {
					return
				}
			}
		}()
	}
	select {
	case <-ctx.Done():
	case <-eof:
	}
	return nil
}

// broker is a kfake cluster in a child process.
type broker struct {
	p     *proc
	stdin io.WriteCloser
	addrs []string
	lines chan string // its stdout after the address line
	asked int         // collect requests so far
}

// startBroker runs command (which must behave like ServeKfake) with opts
// appended as flags and the environment of kfakeEnv(heapMiB), and waits
// for its address.
func startBroker(ctx context.Context, command []string, opts KfakeOptions, heapMiB int, workDir string) (*broker, error) {
	args := append(append([]string(nil), command[1:]...), "--partitions", strconv.Itoa(max(opts.Partitions, 1)))
	if opts.Blackhole {
		args = append(args, "--blackhole")
	}
	cmd := exec.Command(command[0], args...)
	cmd.Env = kfakeEnv(heapMiB)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("starting kfake: %w", err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("starting kfake: %w", err)
	}
	p, err := startProc("kfake", cmd, filepath.Join(workDir, "kfake.log"))
	if err != nil {
		return nil, err
	}
	b := &broker{p: p, stdin: stdin, lines: make(chan string, 16)}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), listenPrefix); ok {
				lines <- addr
				break
			}
		}
		for sc.Scan() {
			select {
			case b.lines <- sc.Text():
			default: // nobody waiting for it
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case addr := <-lines:
		b.addrs = strings.Split(addr, ",")
		return b, nil
	case <-p.done:
		return nil, fmt.Errorf("kfake exited before listening: %v\n%s", p.waitErr, p.logTail(20))
	case <-time.After(30 * time.Second):
		b.close()
		return nil, fmt.Errorf("kfake did not announce its address within 30s\n%s", p.logTail(20))
	case <-ctx.Done():
		b.close()
		return nil, ctx.Err()
	}
}

// collect has the broker collect its garbage and waits until it did.
func (b *broker) collect(ctx context.Context) error {
	b.asked++
	if _, err := fmt.Fprintf(b.stdin, "%s %d\n", collectCommand, b.asked); err != nil {
		return fmt.Errorf("asking kfake to collect: %w", err)
	}
	want := fmt.Sprintf("%s %d", collectedLine, b.asked)
	for {
		select {
		case line := <-b.lines:
			if line == want {
				return nil
			}
		case <-b.p.done:
			return fmt.Errorf("kfake exited: %v", b.p.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("waiting for kfake to collect: %w", ctx.Err())
		}
	}
}

// realtime switches the broker process to SCHED_FIFO (setFIFO).
func (b *broker) realtime() error { return setFIFO(b.p.pid()) }

// cpu returns the broker process's CPU time so far.
func (b *broker) cpu() time.Duration {
	d, _ := ProcessCPU(b.p.pid()) // 0 when unreadable: reported as unknown
	return d
}

// close asks the broker to exit by closing its stdin, then kills its
// process group.
func (b *broker) close() {
	_ = b.stdin.Close()
	select {
	case <-b.p.done:
	case <-time.After(5 * time.Second):
	}
	_ = b.p.stop(syscall.SIGKILL, 5*time.Second) // exit status of a killed fake broker: nothing to report
}
