package relay_test

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/setup"
	"github.com/walrelay/walrelay/internal/testenv"
)

// One relay process following a server replaced behind its DSN (another
// WAL history).

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
	testenv.WaitCaughtUp(t, dsn2, "walrelay", 30*time.Second)
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
