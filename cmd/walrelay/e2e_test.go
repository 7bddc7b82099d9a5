package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
)

// e2e is one end-to-end test's database, broker and walrelay environment.
type e2e struct {
	dsn    string
	broker *testenv.Broker
	prefix string // topic prefix: topics are <prefix>.order and <prefix>.customer
	env    []string
}

func newE2E(t *testing.T) *e2e {
	t.Helper()
	e := &e2e{dsn: testenv.Postgres(t).NewDatabase(t), broker: testenv.Kafka(t), prefix: testenv.UniqueName(t, "e2e")}
	e.env = childEnv(
		"WALRELAY_POSTGRES_DSN="+e.dsn,
		"WALRELAY_KAFKA_BROKERS="+strings.Join(e.broker.Addrs(), ","),
		"WALRELAY_KAFKA_TOPIC_PARTITIONS=4",
		"WALRELAY_POSTGRES_STATUS_INTERVAL=100ms",
		"WALRELAY_POSTGRES_MIN_BACKOFF=50ms",
		"WALRELAY_POSTGRES_MAX_BACKOFF=1s",
		"WALRELAY_RELAY_SHUTDOWN_TIMEOUT=10s",
		"WALRELAY_LOG_FORMAT=json",
		"WALRELAY_ROUTER_ROUTE_TOPIC_REPLACEMENT="+e.prefix+".${routedByValue}",
	)
	return e
}

func (e *e2e) topics() []string { return []string{e.prefix + ".order", e.prefix + ".customer"} }

// setup runs `walrelay setup` and checks what it reports for each object.
func (e *e2e) setup(t *testing.T, want string) {
	t.Helper()
	stdout, stderr, code := walrelay(t, e.env, "setup")
	if code != 0 {
		t.Fatalf("walrelay setup: exit %d\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	objects := []string{"table", "publication", "records", "slot"}
	if len(lines) != len(objects) {
		t.Fatalf("walrelay setup printed %d lines, want one per object:\n%s", len(lines), stdout)
	}
	for i, obj := range objects {
		if f := strings.Fields(lines[i]); len(f) < 3 || f[0] != obj || !strings.HasSuffix(lines[i], want) {
			t.Errorf("walrelay setup line %d = %q, want %s ... %s", i+1, lines[i], obj, want)
		}
	}
}

// slot returns the slot's confirmed_flush_lsn and the server's WAL position.
func (e *e2e) slot(t *testing.T) (confirmed, current pglogrepl.LSN) {
	t.Helper()
	return testenv.SlotLSNs(t, e.dsn, "walrelay")
}

// waitConfirmed waits until the slot's confirmed_flush_lsn reaches target.
func (e *e2e) waitConfirmed(t *testing.T, target pglogrepl.LSN, timeout time.Duration) {
	t.Helper()
	testenv.WaitConfirmed(t, e.dsn, "walrelay", target, timeout)
}

// readAll reads every record now on the topics (up to their end offsets).
func (e *e2e) readAll(t *testing.T) []*kgo.Record {
	t.Helper()
	ends, err := kadm.NewClient(e.broker.Client(t)).ListEndOffsets(t.Context(), e.topics()...)
	if err != nil {
		t.Fatalf("listing end offsets: %v", err)
	}
	total := 0
	ends.Each(func(o kadm.ListedOffset) { total += int(o.Offset) })
	if total == 0 {
		return nil // ReadAll would read for its whole timeout
	}
	return e.broker.ReadAll(t, e.topics(), total, 60*time.Second)
}

// writeTx commits n outbox rows in one transaction and returns their ids
// and the transaction's xid.
func writeTx(ctx context.Context, conn *pgx.Conn, n int) (ids []string, xid uint32, err error) {
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
			SELECT CASE WHEN random() < 0.5 THEN 'order' ELSE 'customer' END, 'agg-' || (random() * 50)::int,
			       'Happened', jsonb_build_object('i', i)
			FROM generate_series(1, $1) i RETURNING id::text`, n)
		if err != nil {
			return err
		}
		if ids, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT txid_current()::text::bigint`).Scan(&xid)
	})
	return ids, xid, err
}

// counter counts the records arriving on topics, from the start.
func counter(t *testing.T, e *e2e) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	cl := e.broker.Client(t, kgo.ConsumeTopics(e.topics()...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			n.Add(int64(cl.PollFetches(ctx).NumRecords()))
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return &n
}

// SIGKILL at random moments mid-stream, then restart: every committed
// event reaches Kafka at least once, nothing else does, and the slot
// catches up with the server once the last walrelay runs on.
func TestRunSurvivesSIGKILL(t *testing.T) {
	e := newE2E(t)
	e.setup(t, "created")
	e.setup(t, "already exists") // idempotent
	for _, topic := range e.topics() {
		e.broker.CreateTopic(t, topic, 4) // so the counter can subscribe before the first event
	}
	arrived := counter(t, e)

	const total, minKills = 3000, 3
	var (
		mu        sync.Mutex
		committed = map[string]bool{}
		kills     atomic.Int32
		writerErr error
	)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, e.dsn)
		if err != nil {
			writerErr = err
			return
		}
		defer conn.Close(ctx)
		written := 0
		for written < total || kills.Load() < minKills {
			n := min(1+rand.IntN(20), total-written)
			if written >= total*9/10 && kills.Load() < minKills {
				// Until walrelay has been killed enough times, trickle
				// single events, so every kill lands mid-stream.
				n = 1
				time.Sleep(50 * time.Millisecond)
			}
			ids, _, err := writeTx(ctx, conn, n)
			if err != nil {
				writerErr = err
				return
			}
			mu.Lock()
			for _, id := range ids {
				committed[id] = true
			}
			mu.Unlock()
			written += len(ids)
			time.Sleep(time.Duration(rand.IntN(8)) * time.Millisecond)
		}
	}()

	// A long linger keeps records in walrelay's producer buffer for a
	// while: a kill then always finds records read from the slot but not
	// yet acknowledged, which must not have been confirmed.
	e.env = append(e.env, "WALRELAY_KAFKA_LINGER=200ms")
	c := startChild(t, e.env, "run")
	for writing := true; writing; {
		// Let this walrelay start delivering, then kill it at a random
		// moment while it streams.
		target := arrived.Load() + 1
		deadline := time.Now().Add(60 * time.Second)
		for arrived.Load() < target && !c.exited() {
			if time.Now().After(deadline) {
				t.Fatalf("no progress: %d records arrived, waiting for %d", arrived.Load(), target)
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(time.Duration(50+rand.IntN(600)) * time.Millisecond)
		if c.exited() {
			t.Fatalf("walrelay exited on its own with %d", c.code)
		}
		select {
		case <-writerDone:
			writing = false
		default:
		}
		if !writing && kills.Load() >= minKills {
			break
		}
		confirmed, _ := e.slot(t)
		if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if code := c.wait(t, 10*time.Second); code != -1 {
			t.Fatalf("walrelay exited with %d before SIGKILL", code)
		}
		kills.Add(1)
		mu.Lock()
		n := len(committed)
		mu.Unlock()
		t.Logf("SIGKILL #%d: %d events committed, %d records arrived, slot confirmed at %s", kills.Load(), n, arrived.Load(), confirmed)
		c = startChild(t, e.env, "run")
	}
	<-writerDone
	if writerErr != nil {
		t.Fatalf("writer: %v", writerErr)
	}
	if len(committed) < total {
		t.Fatalf("writer committed %d events, want at least %d", len(committed), total)
	}

	_, current := e.slot(t)
	e.waitConfirmed(t, current, 60*time.Second)

	recs := e.readAll(t)
	seen := map[string]int{}
	for _, r := range recs {
		id := testenv.Header(r, "id")
		if !committed[id] {
			t.Errorf("record %s[%d]@%d has id %q, which no committed transaction wrote", r.Topic, r.Partition, r.Offset, id)
		}
		seen[id]++
	}
	missing := 0
	for id := range committed {
		if seen[id] == 0 {
			missing++
			if missing <= 5 {
				t.Errorf("committed event %s never reached Kafka", id)
			}
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d committed events missing on Kafka", missing, len(committed))
	}
	t.Logf("%d SIGKILLs; %d records for %d events (%d duplicates)", kills.Load(), len(recs), len(seen), len(recs)-len(seen))

	c.signal(t, syscall.SIGTERM)
	if code := c.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("last walrelay exited %d after SIGTERM", code)
	}
}

// SIGTERM: walrelay exits 0 within relay.shutdown_timeout and leaves the
// slot confirmed at least up to the end of the last event transaction.
func TestRunSIGTERMConfirmsEverything(t *testing.T) {
	e := newE2E(t)
	e.setup(t, "created")
	// A second slot the test only peeks at, to learn the exact end LSN
	// pgoutput reports for a transaction.
	testenv.Exec(t, e.dsn, `SELECT pg_create_logical_replication_slot('probe', 'pgoutput')`)

	if e.broker.Cluster == nil {
		t.Skip("needs kfake to hold acknowledgements")
	}
	c := startChild(t, append(e.env, "WALRELAY_POSTGRES_STATUS_INTERVAL=1m"), "run")
	conn := testenv.Connect(t, e.dsn)
	events := 0
	for range 40 {
		ids, _, err := writeTx(t.Context(), conn, 1+rand.IntN(10))
		if err != nil {
			t.Fatal(err)
		}
		events += len(ids)
	}
	e.broker.ReadAll(t, e.topics(), events, 60*time.Second)
	// The last transaction's records are still waiting for their
	// acknowledgement (the broker holds produce answers 2s) when SIGTERM
	// comes: the slot can only reach it through the shutdown's drain and
	// final report.
	var held atomic.Bool
	e.broker.Cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		if !held.Swap(true) {
			time.Sleep(2 * time.Second)
		}
		return nil, nil, false
	})
	ids, lastXid, err := writeTx(t.Context(), conn, 5)
	if err != nil {
		t.Fatal(err)
	}
	events += len(ids)
	for !held.Load() {
		time.Sleep(10 * time.Millisecond)
	}
	lastEnd := testenv.ParseLSN(t, testenv.QueryValue[string](t, e.dsn, `
		SELECT lsn::text FROM pg_logical_slot_peek_binary_changes('probe', NULL, NULL,
			'proto_version', '1', 'publication_names', 'walrelay_outbox')
		WHERE xid::text = $1 AND get_byte(data, 0) = 67 -- 'C'ommit`, fmt.Sprint(lastXid)))

	if confirmed, _ := e.slot(t); confirmed >= lastEnd {
		t.Fatalf("slot already confirmed at %s before SIGTERM; the test cannot tell whether shutdown reports the final position", confirmed)
	}
	start := time.Now()
	c.signal(t, syscall.SIGTERM)
	if code := c.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}
	took := time.Since(start)
	t.Logf("walrelay stopped %s after SIGTERM", took)
	if took > 10*time.Second {
		t.Errorf("walrelay took %s to stop, beyond relay.shutdown_timeout=10s", took)
	}
	// The walsender applies the final status update it was sent on its own
	// time; walrelay has exited, so nothing else can move the slot: a
	// position reached within a few seconds is the one walrelay reported.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		confirmed, _ := e.slot(t)
		if confirmed >= lastEnd {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after SIGTERM the slot is confirmed at %s, before the end %s of the last event transaction", confirmed, lastEnd)
		}
	}
	if active := testenv.QueryValue[bool](t, e.dsn, `SELECT active FROM pg_replication_slots WHERE slot_name = 'walrelay'`); active {
		t.Errorf("slot still active after walrelay exited")
	}
	e.broker.ReadAll(t, e.topics(), events, 30*time.Second)
	noStackTrace(t, "stderr", c.stderr.String())
}
