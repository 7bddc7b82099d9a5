// Command walrelay-demo runs walrelay end to end on a private Postgres and
// an in-process Kafka-protocol broker: what `make demo` runs. It starts a
// throwaway Postgres cluster (from the local PostgreSQL installation) and
// franz-go's kfake, then runs the real walrelay binary against them, as
// an operator would: `walrelay setup`, `walrelay run` in the background,
// `walrelay slot inspect` while the slot catches up. It writes sample
// orders in real transactions (one rolled back), prints what landed on
// each topic, that the rolled-back order is absent, the slot's lag going
// to 0 and a line of walrelay's /metrics, stops walrelay with SIGTERM, and
// ends with the next command to try. It removes everything it created.
//
// Usage: walrelay-demo [WALRELAY]. WALRELAY is the walrelay binary (make
// demo passes bin/walrelay, which make build writes); without it the demo
// builds one with the go command into a temporary directory.
//
// It is a command of its own so that the daemon's binary does not carry a
// Kafka broker, whose code would make walrelay's binary and its resident
// size larger (docs/benchmarks.md, "Profile findings").
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/outbox"
	sqlfiles "github.com/walrelay/walrelay/sql"
)

func main() {
	if len(os.Args) > 2 {
		os.Exit(cli.ExitCode("walrelay-demo", cli.UsageError{Err: fmt.Errorf("usage: walrelay-demo [WALRELAY] (got %q)", os.Args[1:])}, os.Stderr))
	}
	var bin string
	if len(os.Args) == 2 {
		bin = os.Args[1]
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := demo(ctx, bin, os.Stdout, os.Stderr)
	stop()
	os.Exit(cli.ExitCode("walrelay-demo", err, os.Stderr))
}

// Topics the demo's events are routed to (the router's default,
// outbox.event.<aggregatetype>).
const (
	orderTopic    = "outbox.event.order"
	customerTopic = "outbox.event.customer"
)

// demo runs the demo with the walrelay binary at bin ("": build one).
func demo(ctx context.Context, bin string, stdout, stderr io.Writer) error {
	// Postgres's own start and stop are logged only when they go wrong: the
	// demo's steps say what it does, and its last line is what to try next.
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	step := func(format string, args ...any) { fmt.Fprintf(stdout, "==> "+format+"\n", args...) }

	tmp, err := os.MkdirTemp("", "walrelay-demo-")
	if err != nil {
		return fmt.Errorf("creating a temporary directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	if bin == "" {
		step("building walrelay (go build ./cmd/walrelay)")
		if bin, err = buildWalrelay(ctx, tmp); err != nil {
			return err
		}
	}

	step("starting a private Postgres cluster")
	pg, err := localpg.Start(ctx, localpg.Options{Logger: log})
	if err != nil {
		return fmt.Errorf("starting postgres: %w", err)
	}
	defer pg.Close()

	step("starting an in-process Kafka broker (kfake)")
	broker, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return fmt.Errorf("starting kafka broker: %w", err)
	}
	defer broker.Close()

	listen, err := freeAddr()
	if err != nil {
		return err
	}
	wr := walrelay{bin: bin, env: map[string]string{
		"WALRELAY_POSTGRES_DSN":           pg.DSN("postgres"),
		"WALRELAY_KAFKA_BROKERS":          strings.Join(broker.ListenAddrs(), ","),
		"WALRELAY_KAFKA_TOPIC_PARTITIONS": "3",
		"WALRELAY_HTTP_LISTEN":            listen,
		// The table-less outbox: events emitted with
		// pg_logical_emit_message under this prefix are routed like
		// outbox rows.
		"WALRELAY_OUTBOX_MESSAGE_PREFIX": messagePrefix,
	}}
	step("walrelay is configured through its environment here:")
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range wr.env {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(stdout, "    %s=%s\n", k, wr.env[k])
	}

	step("$ walrelay setup")
	out, err := wr.output(ctx, "setup")
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, indent(out))

	step("$ walrelay run &   (its log goes to stderr)")
	relay, err := wr.start(ctx, stderr, "run")
	if err != nil {
		return err
	}
	defer relay.kill()
	if err := waitReady(ctx, "http://"+listen+"/readyz", relay); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "    ready: http://%s/readyz answers \"ready\"\n", listen)

	conn, err := pgx.Connect(ctx, pg.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("connecting to postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	step("writing sample orders in real transactions: sql/example_transactions.sql, outbox.Emit as outbox rows, and outbox.Emit as logical messages (the table-less outbox, outbox.message_prefix=%q); one order is rolled back", messagePrefix)
	sample, err := writeSampleOrders(ctx, conn)
	if err != nil {
		return err
	}
	var lastCommit string
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lastCommit); err != nil {
		return fmt.Errorf("reading the WAL position: %w", err)
	}

	step("$ walrelay slot inspect walrelay -o json   (until the slot has confirmed the last order's commit, %s)", lastCommit)
	if err := watchLag(ctx, wr, stdout, lastCommit); err != nil {
		return err
	}

	step("what landed on Kafka, per topic")
	records, err := consume(ctx, broker.ListenAddrs(), []string{orderTopic, customerTopic}, sample.events)
	for _, topic := range []string{orderTopic, customerTopic} {
		var of []*kgo.Record
		for _, rec := range records {
			if rec.Topic == topic {
				of = append(of, rec)
			}
		}
		slices.SortFunc(of, func(a, b *kgo.Record) int {
			return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
		})
		fmt.Fprintf(stdout, "    %s: %d records\n", topic, len(of))
		for _, rec := range of {
			fmt.Fprintf(stdout, "      partition=%d offset=%d key=%s headers=%s\n        value=%s\n",
				rec.Partition, rec.Offset, rec.Key, formatHeaders(rec.Headers), rec.Value)
		}
	}
	if err != nil {
		return err
	}

	var leaked []string
	for _, rec := range records {
		if (rec.Topic == orderTopic && string(rec.Key) == sample.rolledBackID) || (rec.Topic == customerTopic && string(rec.Key) == sample.rolledBackCustomer) {
			leaked = append(leaked, fmt.Sprintf("%s key %s", rec.Topic, rec.Key))
		}
	}
	if len(leaked) > 0 {
		return fmt.Errorf("the rolled-back order's events were published: %s", strings.Join(leaked, ", "))
	}
	step("the rolled-back order (id %s, customer %s) is absent: no record with key %s on %s, none with key %s on %s",
		sample.rolledBackID, sample.rolledBackCustomer, sample.rolledBackID, orderTopic, sample.rolledBackCustomer, customerTopic)

	step("one line of walrelay's metrics (curl -s http://%s/metrics | grep '^walrelay_events_published_total{topic=\"%s\"}')", listen, orderTopic)
	line, err := metricLine(ctx, "http://"+listen+"/metrics", `walrelay_events_published_total{topic="`+orderTopic+`"}`)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "    "+line)

	step("stopping walrelay with SIGTERM (it drains what is in flight and confirms it)")
	if err := relay.stop(); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "    walrelay run exited 0")

	step("done: %d events relayed", len(records))
	step("next: point walrelay at your own Postgres and Kafka; check changes nothing and says what to fix:")
	fmt.Fprintf(stdout, "    %s check --postgres.dsn 'postgres://USER@HOST:5432/DATABASE' --kafka.brokers HOST:9092\n", shown(bin))
	return nil
}

// shown is how the demo names the binary in the command to try next: as
// the user can type it (bin/walrelay from make), or plain walrelay for
// one the demo built and removes.
func shown(bin string) string {
	if rel, err := filepath.Rel(".", bin); err == nil && !strings.HasPrefix(rel, "..") && !strings.Contains(bin, "walrelay-demo-") {
		if !strings.Contains(rel, "/") {
			return "./" + rel
		}
		return rel
	}
	return "walrelay"
}

// buildWalrelay builds cmd/walrelay into dir and returns the binary's path.
func buildWalrelay(ctx context.Context, dir string) (string, error) {
	gocmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gocmd); err != nil {
		gocmd = "go"
	}
	bin := filepath.Join(dir, "walrelay")
	cmd := exec.CommandContext(ctx, gocmd, "build", "-o", bin, "github.com/walrelay/walrelay/cmd/walrelay")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building walrelay: %w\n%s", err, out)
	}
	return bin, nil
}

// freeAddr returns a loopback address with a port nothing listens on.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// walrelay runs the walrelay binary with the demo's configuration.
type walrelay struct {
	bin string
	env map[string]string
}

func (w walrelay) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, w.bin, args...)
	// The user's own WALRELAY_* settings must not point the demo at
	// their database or brokers.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WALRELAY_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range w.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

// output runs walrelay with args to completion and returns its stdout.
func (w walrelay) output(ctx context.Context, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := w.command(ctx, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("walrelay %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// process is a walrelay running in the background.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // valid once done is closed
	copy chan struct{}
}

// start starts walrelay with args; its stdout and stderr go to log, each
// line prefixed with "walrelay: ".
func (w walrelay) start(ctx context.Context, log io.Writer, args ...string) (*process, error) {
	// Not CommandContext: stop sends SIGTERM, as a supervisor does.
	cmd := w.command(context.WithoutCancel(ctx), args...)
	r, wpipe := io.Pipe()
	cmd.Stdout, cmd.Stderr = wpipe, wpipe
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting walrelay %s: %w", strings.Join(args, " "), err)
	}
	p := &process{cmd: cmd, done: make(chan struct{}), copy: make(chan struct{})}
	go func() {
		defer close(p.copy)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			fmt.Fprintf(log, "walrelay: %s\n", sc.Text())
		}
		_, _ = io.Copy(io.Discard, r)
	}()
	go func() {
		p.err = cmd.Wait()
		wpipe.Close()
		<-p.copy
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM and waits for a clean exit.
func (p *process) stop() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("stopping walrelay: %w", err)
	}
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		return errors.New("walrelay did not stop within a minute of SIGTERM")
	}
	if p.err != nil {
		return fmt.Errorf("walrelay run: %w", p.err)
	}
	return nil
}

// kill ends the process if it still runs (the demo failed).
func (p *process) kill() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// waitReady waits until url answers 200, or the process exits.
func waitReady(ctx context.Context, url string, p *process) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("walrelay run exited before it was ready: %v", p.err)
		case <-ctx.Done():
			return fmt.Errorf("walrelay run not ready at %s: %w", url, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// watchLag runs `walrelay slot inspect walrelay -o json` until the slot's
// confirmed_flush_lsn reaches lastCommit, printing each new lag.
func watchLag(ctx context.Context, wr walrelay, stdout io.Writer, lastCommit string) error {
	target, err := pglogrepl.ParseLSN(lastCommit)
	if err != nil {
		return fmt.Errorf("parsing the WAL position %q: %w", lastCommit, err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	shownLag := int64(-1)
	for {
		out, err := wr.output(ctx, "slot", "inspect", "walrelay", "-o", "json")
		if err != nil {
			return err
		}
		var s postgres.Slot
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			return fmt.Errorf("decoding walrelay slot inspect -o json: %w", err)
		}
		confirmed, err := pglogrepl.ParseLSN(s.ConfirmedFlushLSN)
		if err != nil {
			return fmt.Errorf("parsing confirmed_flush_lsn %q: %w", s.ConfirmedFlushLSN, err)
		}
		lag := max(int64(target)-int64(confirmed), 0)
		if lag != shownLag {
			fmt.Fprintf(stdout, "    confirmed_flush_lsn %-10s  lag behind the last order's commit: %s\n", s.ConfirmedFlushLSN, postgres.HumanBytes(lag))
			shownLag = lag
		}
		if lag == 0 {
			fmt.Fprintln(stdout, "    lag 0: Kafka acknowledged every committed order, and walrelay confirmed it to Postgres")
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the slot did not confirm %s: %w", lastCommit, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// metricLine returns the line of the metrics page at url that starts with
// series.
func metricLine(ctx context.Context, url, series string) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", url, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), series+" ") {
			return sc.Text(), nil
		}
	}
	return "", fmt.Errorf("%s has no series %s", url, series)
}

// indent indents each line of s by four spaces.
func indent(s string) string {
	var b strings.Builder
	for l := range strings.Lines(s) {
		b.WriteString("    " + l)
	}
	return b.String()
}

// messagePrefix is the demo's outbox.message_prefix.
const messagePrefix = "outbox"

// sample is what writeSampleOrders wrote.
type sample struct {
	events             int    // events the committed transactions publish
	rolledBackID       string // the rolled-back order's id: its events' key on orderTopic
	rolledBackCustomer string // its customer: its events' key on customerTopic
}

// writeSampleOrders runs the example SQL, then writes more orders, each in
// its own transaction with its events written by outbox: the first
// orders' as outbox rows, the last ones' as logical messages, which no
// table holds. A rolled-back order's events are never published.
func writeSampleOrders(ctx context.Context, conn *pgx.Conn) (sample, error) {
	if _, err := conn.Exec(ctx, sqlfiles.ExampleTransactions); err != nil {
		return sample{}, fmt.Errorf("running example transactions: %w", err)
	}
	rows, err := outbox.New(outbox.Config{}) // public.outbox, Debezium's column names
	if err != nil {
		return sample{}, err
	}
	messages, err := outbox.New(outbox.Config{Style: outbox.StyleMessage, Prefix: messagePrefix})
	if err != nil {
		return sample{}, err
	}
	out := sample{events: 2}
	for i, o := range []struct {
		customer string
		w        *outbox.Writer
		commit   bool
	}{{"c-7", rows, true}, {"c-8", rows, true}, {"c-7", messages, true}, {"c-9", messages, false}, {"c-8", messages, true}} {
		var id int64
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, `INSERT INTO orders (customer_id, total_cents) VALUES ($1, $2) RETURNING id`, o.customer, 1000*(i+1)).Scan(&id); err != nil {
				return err
			}
			for _, ev := range []outbox.Event{
				{AggregateType: "order", AggregateID: fmt.Sprint(id), Type: "OrderCreated",
					Payload: fmt.Appendf(nil, `{"orderId":%d,"customerId":%q,"style":%q}`, id, o.customer, o.w.Style())},
				{AggregateType: "customer", AggregateID: o.customer, Type: "CustomerOrdered",
					Payload: fmt.Appendf(nil, `{"customerId":%q,"orders":%d,"style":%q}`, o.customer, i+1, o.w.Style())},
			} {
				if _, err := o.w.Emit(ctx, tx, ev); err != nil {
					return err
				}
			}
			if !o.commit {
				return errRolledBack
			}
			return nil
		})
		switch {
		case errors.Is(err, errRolledBack):
			// Its events were never committed: nothing is published.
			out.rolledBackID, out.rolledBackCustomer = fmt.Sprint(id), o.customer
			continue
		case err != nil:
			return sample{}, fmt.Errorf("writing order for %s: %w", o.customer, err)
		}
		out.events += 2
	}
	return out, nil
}

// errRolledBack rolls a sample order back.
var errRolledBack = errors.New("order rolled back")

// consume reads want records from topics, from the start, and then
// whatever else arrives within a second: more than want is an error.
func consume(ctx context.Context, brokers, topics []string, want int) ([]*kgo.Record, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, fmt.Errorf("creating consumer: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < want {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out, fmt.Errorf("read %d of %d events before timing out", len(out), want)
		}
		fetches.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	ctx, cancel = context.WithTimeout(ctx, time.Second)
	defer cancel()
	cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, r) })
	if len(out) > want {
		return out, fmt.Errorf("read %d events, more than the %d committed", len(out), want)
	}
	return out, nil
}

func formatHeaders(hs []kgo.RecordHeader) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = h.Key + "=" + string(h.Value)
	}
	return "[" + strings.Join(parts, " ") + "]"
}
