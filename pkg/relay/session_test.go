package relay_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/pkg/config"
	"github.com/walrelay/walrelay/pkg/localpg"
	"github.com/walrelay/walrelay/pkg/metrics"
	"github.com/walrelay/walrelay/pkg/relay"
	"github.com/walrelay/walrelay/pkg/setup"
)

// Tests of what a relay does across replication sessions within one
// process: a transaction resumed after breaks, a standby taking over a
// slot, a server replaced under the same DSN.

// count returns how many log lines have exactly the message msg.
func (b *logBuffer) count(msg string) int {
	return strings.Count(b.String(), `"msg":"`+msg+`"`)
}

// endOffsets is the number of records on topic: the sum of its
// partitions' end offsets (nothing is ever deleted from a test topic).
func endOffsets(t *testing.T, f *fixture, topic string) int64 {
	t.Helper()
	adm := kadm.NewClient(f.broker.Client(t))
	ends, err := adm.ListEndOffsets(t.Context(), topic)
	if err != nil {
		t.Fatalf("listing end offsets of %s: %v", topic, err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset of %s[%d]: %v", topic, o.Partition, o.Err)
		}
		n += o.Offset
	})
	return n
}

// walsender returns the pid of the walsender holding the relay's slot, 0
// if none.
func walsender(t *testing.T, conn *pgx.Conn) int32 {
	t.Helper()
	var pid int32
	err := conn.QueryRow(t.Context(), `SELECT coalesce(max(r.pid), 0) FROM pg_stat_replication r
		JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE s.slot_name = 'walrelay'`).Scan(&pid)
	if err != nil {
		t.Fatalf("reading pg_stat_replication: %v", err)
	}
	return pid
}

// A transaction whose session breaks twice while it streams is published
// once: the second break comes right after the relay resumed it, before
// the re-sent copy has passed the point of the first break. The rows
// handled before the first break must still be passed over in the third
// session. No duplicate without a process restart.
func TestRelayResumesTransactionAfterTwoBreaks(t *testing.T) {
	f := newFixture(t, nil)
	run := f.start(t)
	execTx(t, f.dsn, insertEvent("order", "warmup"))
	f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)
	admin := testenv.Connect(t, f.dsn) // open already: a break costs one round trip
	published := func() float64 {
		v, _ := findMetric(t, f.reg, "walrelay_events_published_total", map[string]string{"topic": "outbox.event.order"})
		return v
	}
	// drained waits until nothing is in flight and returns what was
	// published: every row handed to the producer so far.
	drained := func() float64 {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			if n, _ := run.relay.Tracker().InFlight(); n == 0 {
				return published()
			}
			if time.Now().After(deadline) {
				t.Fatal("records still in flight after 60s")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	terminate := func(pid int32) {
		t.Helper()
		var ok bool
		if err := admin.QueryRow(t.Context(), `SELECT pg_terminate_backend($1)`, pid).Scan(&ok); err != nil || !ok {
			t.Fatalf("terminating walsender %d: %v %v", pid, ok, err)
		}
	}
	newWalsender := func(old int32) int32 {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			if pid := walsender(t, admin); pid != 0 && pid != old {
				return pid
			}
			if time.Now().After(deadline) {
				t.Fatal("the relay did not stream again within 60s")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	const rows = 200000
	testenv.Exec(t, f.dsn, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
		SELECT 'order', 'o-' || (i % 17), 'T', jsonb_build_object('i', i) FROM generate_series(1, 200000) i`)

	// First break, once part of the transaction is published.
	pid := newWalsender(0)
	deadline := time.Now().Add(120 * time.Second)
	for published() < 40000 {
		if time.Now().After(deadline) {
			t.Fatal("the transaction did not start publishing")
		}
		time.Sleep(5 * time.Millisecond)
	}
	terminate(pid)
	handled := drained()
	if handled >= rows {
		t.Fatalf("the whole transaction (%v rows) was published before the first break; the test proves nothing", handled)
	}
	t.Logf("first break after %v rows", handled-1)

	// Second break: as soon as the next session resumes the transaction
	// (its Begin arrived: the relay logs the resume), before the re-sent
	// copy has passed the first break point, which shows as nothing more
	// published by that session. Should a session get past it first, it
	// is broken the same way and the next one tried.
	const resumed = "resuming a transaction after reconnecting"
	before := false
	for attempt := 1; attempt <= 5 && !before; attempt++ {
		seen := f.logs.count(resumed)
		pid = newWalsender(pid)
		deadline := time.Now().Add(120 * time.Second)
		for f.logs.count(resumed) == seen {
			if time.Now().After(deadline) {
				t.Fatal("the relay did not resume the transaction within 120s")
			}
			time.Sleep(time.Millisecond)
		}
		terminate(pid)
		now := drained()
		before = now == handled
		t.Logf("break %d: %v rows handled before it, %v after", attempt+1, handled-1, now-1)
		handled = now
	}
	if !before {
		t.Fatal("no session was broken before its replay passed the previous break point; the test proves nothing")
	}

	f.waitCaughtUp(t, 120*time.Second)
	recs := f.broker.ReadAll(t, []string{"outbox.event.order"}, 1+rows, 120*time.Second)
	seen := map[string]int{}
	for _, r := range recs {
		id, _ := header(r, "id")
		seen[id]++
	}
	total := endOffsets(t, f, "outbox.event.order")
	if len(seen) != 1+rows || total != 1+rows {
		t.Errorf("%d distinct events, %d records on the topic; want %d of each (0 lost, 0 duplicates)", len(seen), total, 1+rows)
	}
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}

// startRelay runs a relay with cfg, logging to logs, in the background;
// it is stopped at cleanup if the test did not stop it.
func startRelay(t *testing.T, cfg config.Config, logs *logBuffer) *running {
	t.Helper()
	r, err := relay.New(cfg, logs.logger(), metrics.New(prometheus.NewRegistry(), "test", cfg.Postgres.Slot))
	if err != nil {
		t.Fatalf("relay.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &running{relay: r, cancel: cancel, done: make(chan struct{})}
	go func() {
		run.err = r.Run(ctx)
		close(run.done)
	}()
	t.Cleanup(func() {
		_ = run.stop()
		if t.Failed() {
			t.Logf("log of the relay started with startRelay:\n%s", logs.String())
		}
	})
	return run
}

// slotWatch polls a slot's confirmed_flush_lsn, the flush position its
// walsender last received (pg_stat_replication) and the server's WAL end,
// as often as it can until stopped.
type slotWatch struct {
	stop chan struct{}
	done chan struct{}
	// Set by the goroutine, read after done.
	seen      []pglogrepl.LSN // every change of confirmed_flush_lsn, in order
	reported  []report        // every change of the reported flush position
	pastWAL   []string        // confirmed_flush_lsn seen past the server's WAL end
	polls     int
	lastError error
}

// report is a flush position a client reported to the slot's walsender.
type report struct {
	pid   int32
	flush pglogrepl.LSN
}

func (r report) String() string { return fmt.Sprintf("walsender %d: %s", r.pid, r.flush) }

func watchSlot(t *testing.T, dsn, slot string) *slotWatch {
	t.Helper()
	conn := testenv.Connect(t, dsn)
	w := &slotWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			var c, cur, flush string
			var pid int32
			err := conn.QueryRow(context.Background(), `SELECT coalesce(s.confirmed_flush_lsn::text, '0/0'), pg_current_wal_lsn()::text,
					coalesce(s.active_pid, 0), coalesce(r.flush_lsn::text, '')
				FROM pg_replication_slots s LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid
				WHERE s.slot_name = $1`, slot).Scan(&c, &cur, &pid, &flush)
			if err != nil {
				w.lastError = err
				time.Sleep(10 * time.Millisecond)
				continue
			}
			w.polls++
			confirmed, _ := pglogrepl.ParseLSN(c)
			current, _ := pglogrepl.ParseLSN(cur)
			if n := len(w.seen); n == 0 || w.seen[n-1] != confirmed {
				w.seen = append(w.seen, confirmed)
			}
			if flush != "" {
				lsn, _ := pglogrepl.ParseLSN(flush)
				if n := len(w.reported); n == 0 || w.reported[n-1] != (report{pid, lsn}) {
					w.reported = append(w.reported, report{pid, lsn})
				}
			}
			if confirmed > current {
				w.pastWAL = append(w.pastWAL, fmt.Sprintf("confirmed_flush_lsn %s past the server's WAL end %s", confirmed, current))
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	t.Cleanup(w.end)
	return w
}

// end stops the watch; it returns once the goroutine has.
func (w *slotWatch) end() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// backwards lists the moves of confirmed_flush_lsn to a lower position.
func (w *slotWatch) backwards() []string {
	var out []string
	for i := 1; i < len(w.seen); i++ {
		if w.seen[i] < w.seen[i-1] {
			out = append(out, fmt.Sprintf("%s -> %s", w.seen[i-1], w.seen[i]))
		}
	}
	return out
}

// A standby (a second relay waiting for the slot another one holds) reads
// the slot's position at startup; when it takes over, the slot has moved
// on. It must start from where the slot is then: report that position
// from its first status update, never the stale one. Postgres releases
// before 15.13 moved the slot back to a lower flush position; later ones
// ignore it, and pg_stat_replication shows what was reported.
func TestRelayStandbyTakesOverAtSlotPosition(t *testing.T) {
	f := newFixture(t, nil)
	topic := []string{"outbox.event.order"}
	active := f.start(t)
	execTx(t, f.dsn, insertEvent("order", "a-1"))
	f.broker.ReadAll(t, topic, 1, 30*time.Second)
	f.waitCaughtUp(t, 10*time.Second)
	seeded, _ := f.slot(t)

	standbyCfg := f.cfg
	standbyCfg.Postgres.StatusInterval = time.Second // the default: a stale report would stand for a second
	standbyLogs := &logBuffer{}
	standby := startRelay(t, standbyCfg, standbyLogs)
	standbyLogs.waitLog(t, "found replication slot", nil, 30*time.Second)
	if got := standby.relay.Tracker().Confirmed(); got != seeded {
		t.Fatalf("standby read %s at startup, the slot is at %s", got, seeded)
	}

	// The active relay moves the slot on while the standby waits.
	for i := 2; i <= 6; i++ {
		execTx(t, f.dsn, insertEvent("order", fmt.Sprintf("a-%d", i)))
	}
	f.broker.ReadAll(t, topic, 6, 30*time.Second)
	f.waitCaughtUp(t, 10*time.Second)

	watch := watchSlot(t, f.dsn, "walrelay")
	activePID := testenv.QueryValue[int32](t, f.dsn, `SELECT active_pid FROM pg_replication_slots WHERE slot_name = 'walrelay'`)
	if err := active.stop(); err != nil {
		t.Fatal(err)
	}
	left := active.relay.Tracker().Confirmed() // its final status update
	if left <= seeded {
		t.Fatalf("the active relay left the slot at %s, not past %s; the test proves nothing", left, seeded)
	}

	line := standbyLogs.waitLog(t, "streaming from slot", nil, 30*time.Second)
	if got := line["confirmed"]; got != left.String() {
		t.Errorf("the standby started streaming reporting %v; the slot was at %s when it took over (%s at the standby's startup)", got, left, seeded)
	}
	execTx(t, f.dsn, insertEvent("order", "b-1"))
	f.broker.ReadAll(t, topic, 7, 30*time.Second)
	f.waitCaughtUp(t, 10*time.Second)
	time.Sleep(2 * standbyCfg.Postgres.StatusInterval) // status updates of the standby, watched
	watch.end()
	if back := watch.backwards(); len(back) > 0 {
		t.Errorf("the slot's confirmed_flush_lsn moved back after the takeover: %v (seen %v)", back, watch.seen)
	}
	standbyReports := 0
	for _, r := range watch.reported {
		if r.pid == activePID {
			continue
		}
		standbyReports++
		if r.flush < left {
			t.Errorf("the standby reported flush position %s, behind the slot's %s (reports: %v)", r.flush, left, watch.reported)
			break
		}
	}
	if standbyReports == 0 {
		t.Errorf("the watch saw no status update from the standby (reports: %v, %d polls)", watch.reported, watch.polls)
	}
	if !slices.Contains(watch.seen, left) {
		t.Errorf("the watch never saw the position %s the active relay left (saw %v in %d polls)", left, watch.seen, watch.polls)
	}
	if err := standby.stop(); err != nil {
		t.Fatal(err)
	}
}

// tcpProxy forwards connections to a target address that the test can
// change: the relay's DSN names the proxy, and repointing it stands for a
// failover or a restore behind the same host name.
type tcpProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	target string
	conns  map[net.Conn]struct{}
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		p.repoint("")
	})
	return p
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

// repoint sends new connections to target and cuts every open one.
func (p *tcpProxy) repoint(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

func (p *tcpProxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target := p.target
		p.mu.Unlock()
		out, err := net.Dial("tcp", target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			_ = dst.Close()
			_ = src.Close()
		}
		go pipe(out, in)
		go pipe(in, out)
	}
}

// withHost returns dsn (a URL) with its host and port replaced.
func withHost(t *testing.T, dsn, hostport string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = hostport
	return u.String()
}

// One relay process, one DSN, and behind it first one server, then
// another with its own history (as after a failover to a promoted standby
// or a restore): the second server's slot is at an LSN far below what the
// relay handled on the first. Every event committed on the second server
// must arrive, although its commit LSNs are below those the relay handled
// on the first, and the second server's slot must never be confirmed past
// what was acknowledged there (here: past its own WAL). A record of the
// first server still in flight at the switch is waited for before the
// relay resets its position to the second server's slot.
func TestRelayFollowsServerWithAnotherHistory(t *testing.T) {
	first := testenv.PrivateCluster(t, localpg.Options{})
	second := testenv.PrivateCluster(t, localpg.Options{})
	names := setup.Names{Schema: "public", Table: "outbox", Publication: "walrelay_outbox", Slot: "walrelay"}
	for _, c := range []*localpg.Cluster{first, second} {
		if _, err := setup.Run(t.Context(), testenv.Connect(t, c.DSN("")), names); err != nil {
			t.Fatalf("setup: %v", err)
		}
	}
	dsn1, dsn2 := first.DSN(""), second.DSN("")
	// The first server's WAL runs far ahead of the second's.
	for range 3 {
		testenv.Exec(t, dsn1, `CREATE TABLE IF NOT EXISTS filler AS SELECT 1 AS x; INSERT INTO filler SELECT 1; SELECT pg_switch_wal()`)
	}

	proxy := newTCPProxy(t, net.JoinHostPort("127.0.0.1", fmt.Sprint(first.Port())))
	f := &fixture{dsn: dsn1, broker: testenv.Kafka(t), logs: &logBuffer{}}
	if f.broker.Cluster == nil {
		t.Skip("needs kfake to hold a record in flight")
	}
	cfg := config.Default()
	cfg.Postgres.DSN = withHost(t, dsn1, proxy.addr())
	cfg.Postgres.StatusInterval = 100 * time.Millisecond
	cfg.Postgres.MinBackoff = 50 * time.Millisecond
	cfg.Postgres.MaxBackoff = time.Second
	cfg.Kafka.Brokers = f.broker.Addrs()
	cfg.Kafka.TopicPartitions = 4
	cfg.Relay.ShutdownTimeout = 10 * time.Second
	run := startRelay(t, cfg, f.logs)

	execTx(t, dsn1, insertEvent("one", "1-1"))
	execTx(t, dsn1, insertEvent("one", "1-2"))
	f.broker.ReadAll(t, []string{"outbox.event.one"}, 2, 30*time.Second)
	// One more record of the first server, held in flight across the switch.
	fault := f.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "outbox.event.one", Err: kerr.NotEnoughReplicas, Count: -1})
	execTx(t, dsn1, insertEvent("one", "1-3"))
	deadline := time.Now().Add(30 * time.Second)
	for fault.Hits() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the held record was never produced")
		}
		time.Sleep(10 * time.Millisecond)
	}
	handled := run.relay.Tracker().Confirmed()

	// Events on the second server, before and after the switch.
	var want []string
	for i := range 3 {
		id := fmt.Sprintf("2-%d", i)
		execTx(t, dsn2, insertEvent("two", id))
		want = append(want, id)
	}
	current := testenv.QueryValue[string](t, dsn2, `SELECT pg_current_wal_lsn()::text`)
	if lsn := mustLSN(t, current); lsn >= handled {
		t.Fatalf("the second server's WAL (%s) is not below what the relay handled on the first (%s); the test proves nothing", lsn, handled)
	}
	watch := watchSlot(t, dsn2, "walrelay")
	proxy.repoint(net.JoinHostPort("127.0.0.1", fmt.Sprint(second.Port())))

	// The relay waits for the first server's record before it streams
	// from the second.
	const waiting = "waiting for records of the previous WAL history to be acknowledged before reading the new one"
	deadline = time.Now().Add(20 * time.Second)
	for f.logs.count(waiting) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	waited := f.logs.count(waiting) > 0
	fault.Remove()
	for i := 3; i < 6; i++ {
		id := fmt.Sprintf("2-%d", i)
		execTx(t, dsn2, insertEvent("two", id))
		want = append(want, id)
	}
	f.broker.ReadAll(t, []string{"outbox.event.one"}, 3, 30*time.Second)
	// The second server's slot catches up with its WAL, and never passes it.
	deadline = time.Now().Add(30 * time.Second)
	for {
		c := testenv.QueryValue[string](t, dsn2, `SELECT confirmed_flush_lsn::text || ' ' || pg_current_wal_lsn()::text FROM pg_replication_slots WHERE slot_name = 'walrelay'`)
		confirmed, cur, _ := strings.Cut(c, " ")
		if mustLSN(t, confirmed) >= mustLSN(t, cur) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second server's slot did not catch up: %s", c)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(3 * cfg.Postgres.StatusInterval) // more status updates, watched
	watch.end()
	if len(watch.pastWAL) > 0 {
		t.Errorf("the second server's slot was confirmed past its WAL: %v", watch.pastWAL[0])
	}
	recs := f.broker.ReadAll(t, []string{"outbox.event.two"}, len(want), 60*time.Second)
	got := map[string]bool{}
	for _, r := range recs {
		got[string(r.Key)] = true
	}
	for _, id := range want {
		if !got[id] {
			t.Errorf("event %s committed on the second server never arrived", id)
		}
	}
	if !waited {
		t.Errorf("the relay did not log %q while a record of the first server was in flight", waiting)
	}
	if len(f.logs.lines("the server's WAL history is not the one this process read so far")) == 0 {
		t.Errorf("the relay did not log the change of server")
	}
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}
