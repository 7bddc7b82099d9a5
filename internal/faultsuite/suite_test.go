package faultsuite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/internal/verify"
)

// scenario is one fault and how the suite checks walrelay through it, in
// a delivery mode. run fills the row's counts (from the verifier),
// recovery and notes.
type scenario struct {
	name string
	run  func(t *testing.T, row *result, d delivery)
}

var scenarios = []scenario{
	{"sigkill-relay", testSigkill},
	{"broker-down", testBrokerDown},
	{"produce-response-lost", testProduceResponseLost},
	{"leaders-moving", testLeadersMoving},
	{"postgres-immediate-restart", testPostgresRestart},
	{"postgres-fast-restart", testPostgresFastRestart},
	{"walsender-terminated", testWalsenderTerminated},
	{"poison-rows-dlq", testPoisonRows},
	{"standby-takeover", testStandby},
	{"large-transaction", testLargeTransaction},
	{"shared-checkpoint-open-txn", testSharedCheckpointOpenTxn},
	{"commit-outcome-unknown", testCommitOutcomeUnknown},
	{"same-timeline-restore", testSameTimelineRestore},
	{"recreated-slot-retention", testRecreatedSlotRetention},
	{"failover", testFailover},
	{"slot-loss (heal)", testSlotLossHeal},
}

// TestFaultSuite runs every scenario in every delivery mode (in parallel,
// up to -parallel at a time), then logs the table and writes it to
// $WALRELAY_FAULT_REPORT. A scenario's exactly-once row comes right after
// its at-least-once one.
func TestFaultSuite(t *testing.T) {
	buildRelay(t)
	var res results
	var names []string
	start := time.Now()
	t.Run("scenarios", func(t *testing.T) {
		for _, sc := range scenarios {
			for _, d := range deliveries {
				name := d.row(sc.name)
				names = append(names, name)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					row := result{scenario: name}
					begin := time.Now()
					defer func() {
						notes := []string{row.notes}
						if row.readNote != "" {
							notes = append(notes, row.readNote)
						}
						notes = append(notes, fmt.Sprintf("ran %s", time.Since(begin).Round(time.Second)))
						if t.Failed() {
							notes[0] = "FAILED " + notes[0]
						}
						row.notes = strings.Join(notes, "; ")
						res.add(row)
					}()
					sc.run(t, &row, d)
				})
			}
		}
	})
	table := res.markdown(names)
	mode := "make test sizes"
	if soak() {
		mode = "soak sizes (WALRELAY_SOAK=1)"
	}
	t.Logf("fault suite (%s, %s):\n%s", mode, time.Since(start).Round(time.Second), table)
	if path := os.Getenv("WALRELAY_FAULT_REPORT"); path != "" {
		doc := fmt.Sprintf("<!-- walrelay fault suite, %s, %s/%s, %d CPUs, %s, total %s -->\n\n%s",
			mode, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), time.Now().UTC().Format(time.RFC3339), time.Since(start).Round(time.Second), table)
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Errorf("writing %s: %v", path, err)
		}
	}
}

// fixture is a scenario's database (setup done, workload schema created),
// broker, delivery mode and relay environment.
type fixture struct {
	dsn    string
	broker *testenv.Broker
	d      delivery
	env    []string
	adm    *kadm.Client
}

func newFixture(t *testing.T, d delivery, kopts ...kfake.Opt) *fixture {
	t.Helper()
	dsn := testenv.Postgres(t).NewDatabase(t)
	return newFixtureOn(t, dsn, d, kopts...)
}

func newFixtureOn(t *testing.T, dsn string, d delivery, kopts ...kfake.Opt) *fixture {
	t.Helper()
	prepareDB(t, dsn)
	b := testenv.Kafka(t, kopts...)
	if b.Cluster == nil {
		t.Skip("fault injection needs the in-process kfake broker; WALRELAY_TEST_KAFKA_BROKERS or the docker backend is set")
	}
	return &fixture{dsn: dsn, broker: b, d: d, env: relayEnv(dsn, b.Addrs(), d), adm: kadm.NewClient(b.Client(t))}
}

// verify is verifyRun on the fixture.
func (f *fixture) verify(t *testing.T, w *workload) (verify.Report, kafkaRead) {
	t.Helper()
	return verifyRun(t, f.dsn, f.broker.Addrs(), w, f.d)
}

var defaultLoad = workloadOpts{writers: 3, pause: 20 * time.Millisecond}

// waitPublished waits until at least n records are on the broker.
func waitPublished(t *testing.T, adm *kadm.Client, n int64, timeout time.Duration) int64 {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got, err := endOffsetSum(t.Context(), adm)
		if err == nil && got >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d records on the broker after %s, want %d (last error: %v)", got, timeout, n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func published(t *testing.T, adm *kadm.Client) int64 {
	t.Helper()
	n, err := endOffsetSum(t.Context(), adm)
	if err != nil {
		t.Fatalf("reading end offsets: %v", err)
	}
	return n
}

func requireRunning(t *testing.T, p *relayProc, when string) {
	t.Helper()
	if !p.running() {
		t.Fatalf("walrelay %s exited %s: %v", p.name, when, p.err)
	}
}

func stopClean(t *testing.T, p *relayProc) {
	t.Helper()
	if err := p.stop(30 * time.Second); err != nil {
		t.Errorf("walrelay %s did not stop cleanly on SIGTERM: %v", p.name, err)
	}
}

func fill(row *result, rep verify.Report, read kafkaRead) {
	row.committed, row.delivered, row.lost, row.duplicates = rep.Committed, rep.Delivered, rep.Lost, rep.Duplicates
	row.readNote = read.note
}

// recoverAfter measures one fault end: the WAL position now must be
// confirmed; returns the time from end.
func recoverAfter(t *testing.T, dsn string, end time.Time) time.Duration {
	t.Helper()
	return waitConfirmed(t, dsn, mustSlot(t, dsn).current, end, 2*time.Minute)
}

// envSigkillStatusInterval sets walrelay's postgres.status_interval in the
// sigkill-relay scenario, which otherwise runs walrelay's default (what
// users run): what a kill duplicates depends on how often the relay
// confirms. E.g. 100ms, the other scenarios' setting, for comparison.
const envSigkillStatusInterval = "WALRELAY_FAULT_SIGKILL_STATUS_INTERVAL"

// sigkillEnv is the sigkill-relay scenario's relay environment: the
// suite's without its status interval, so that walrelay runs its default,
// or with $WALRELAY_FAULT_SIGKILL_STATUS_INTERVAL. It also describes the
// interval for the report.
func sigkillEnv(t *testing.T, env []string) ([]string, string) {
	t.Helper()
	const key = "WALRELAY_POSTGRES_STATUS_INTERVAL="
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, key) })
	v := os.Getenv(envSigkillStatusInterval)
	if v == "" {
		return env, fmt.Sprintf("status interval %s (walrelay's default)", config.Default().Postgres.StatusInterval)
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", envSigkillStatusInterval, v, err)
	}
	return append(env, key+d.String()), fmt.Sprintf("status interval %s (%s)", d, envSigkillStatusInterval)
}

// testSigkill kills the relay with SIGKILL at random points while writers
// commit, restarting it after each kill, with walrelay's default status
// interval (see sigkillEnv). Recovery: start → the WAL position at start
// confirmed (max over the runs that got there before their kill, and the
// final run).
//
// Duplicates per kill are the verifier's duplicates over the number of
// kills: one process runs at a time and only a restart re-sends, so every
// duplicate is a re-send by the run after some kill (the final run
// re-sends what the last kill left). Every kill counts: each waits for its
// run's first broker ack (the process's own walrelay_events_published_total
// > 0), so none comes before the run published. A run killed before the
// slot's confirmed_flush_lsn moved (read when the next run starts, no
// relay running) confirmed nothing: its successor re-sends all it
// published, and what its predecessors left unconfirmed, again.
//
// With exactly-once delivery there must be no duplicates: a killed run's
// open Kafka transaction is aborted when the next run fences the
// transactional id, and the next run skips what the last committed
// checkpoint covers. The scenario counts the kills that left the
// checkpoint ahead of the slot's confirmed_flush_lsn (committed to Kafka,
// not yet confirmed to Postgres), where only the checkpoint keeps the
// next run from publishing again.
func testSigkill(t *testing.T, row *result, d delivery) {
	f := newFixture(t, d)
	env, interval := sigkillEnv(t, f.env)
	var txnID string
	if d == exactlyOnce {
		txnID = transactionalID(t, f.dsn)
	}
	checkpointAhead := 0
	w := startWorkload(t, f.dsn, defaultLoad)
	cycles := pick(20, 100)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var maxRec time.Duration
	measured, midStream := 0, 0
	// confirmedAt[i] is the slot's confirmed_flush_lsn when run i started
	// (the final run is i == cycles).
	confirmedAt := make([]pglogrepl.LSN, 0, cycles+1)
	for i := range cycles {
		start := mustSlot(t, f.dsn) // no relay runs: where the last run left the slot
		confirmedAt = append(confirmedAt, start.confirmed)
		p := startRelay(t, fmt.Sprintf("run%02d", i), env)
		// The kill comes at a random point 0-1.2s after this run's first
		// broker ack: during the replay of what the last run left
		// unconfirmed, or later, in the steady stream.
		delay := time.Duration(rng.Int64N(int64(1200 * time.Millisecond)))
		var deadline time.Time
		var firstAck time.Duration
		caught := false
		for deadline.IsZero() || time.Now().Before(deadline) {
			if s, err := readSlot(t.Context(), f.dsn); !caught && err == nil && s.confirmed >= start.current {
				caught = true
				measured++
				maxRec = max(maxRec, time.Since(p.started))
			}
			if deadline.IsZero() {
				if n, err := p.metricSum(t.Context(), "walrelay_events_published_total"); err == nil && n > 0 {
					deadline = time.Now().Add(delay)
					firstAck = time.Since(p.started)
				} else if time.Since(p.started) > time.Minute {
					t.Fatalf("run %d had no record acknowledged within a minute (last error: %v)", i, err)
				}
				requireRunning(t, p, "before its SIGKILL")
			}
			time.Sleep(20 * time.Millisecond)
		}
		requireRunning(t, p, "before its SIGKILL")
		s := mustSlot(t, f.dsn)
		acked, _ := p.metricSum(t.Context(), "walrelay_events_published_total")
		p.kill()
		if s.confirmed < s.current {
			midStream++
		}
		ahead := ""
		if d == exactlyOnce {
			// Read after the kill: the checkpoint a killed run left is
			// final, and the slot no longer moves.
			cp, err := readCheckpoint(t.Context(), f.broker.Addrs(), txnID)
			if err != nil {
				t.Fatalf("reading the checkpoint after kill %d: %v", i, err)
			}
			if after := mustSlot(t, f.dsn); cp.LSN > after.confirmed {
				checkpointAhead++
				ahead = fmt.Sprintf("; checkpoint %s ahead of the slot's %s", cp.LSN, after.confirmed)
			}
		}
		t.Logf("run %02d: first ack %s after the start, killed %s after it, %.0f records acked%s", i, firstAck.Round(time.Millisecond), delay.Round(time.Millisecond), acked, ahead)
	}
	final := mustSlot(t, f.dsn)
	confirmedAt = append(confirmedAt, final.confirmed)
	p := startRelay(t, "final", env)
	maxRec = max(maxRec, waitConfirmed(t, f.dsn, final.current, p.started, 2*time.Minute))
	measured++
	unconfirmed := 0
	for i := range cycles {
		if confirmedAt[i+1] <= confirmedAt[i] {
			unconfirmed++
		}
	}
	rep, read := f.verify(t, w)
	stopClean(t, p)
	fill(row, rep, read)
	row.recovery = maxRec
	share := 0.0
	if rep.Delivered > 0 {
		share = 100 * float64(rep.Duplicates) / float64(rep.Delivered)
	}
	dups := fmt.Sprintf("duplicates %.1f per kill (%d / %d kills), %.1f%% of the rows delivered", float64(rep.Duplicates)/float64(cycles), rep.Duplicates, cycles, share)
	t.Logf("%s; %s; %d of %d kills before the run confirmed anything", interval, dups, unconfirmed, cycles)
	ack := "broker ack"
	if d == exactlyOnce {
		ack = "Kafka commit"
		dups = fmt.Sprintf("%s; %d kills left the checkpoint ahead of the slot", dups, checkpointAhead)
	}
	row.notes = fmt.Sprintf("%s; %d SIGKILLs 0-1.2s after the run's first %s (none before it), %d with the slot behind the WAL, %d before the run confirmed anything; %s; recovery (start → WAL at start confirmed) measured on the %d runs that got there",
		interval, cycles, ack, midStream, unconfirmed, dups, measured)
	if midStream < cycles*3/4 {
		t.Errorf("only %d of %d kills happened mid-stream; the scenario is too weak", midStream, cycles)
	}
	if d == exactlyOnce && checkpointAhead == 0 {
		t.Errorf("no kill left the checkpoint ahead of the slot: no run had to skip what only the checkpoint said was on Kafka")
	}
}

// testBrokerDown closes the kfake cluster for a while and recreates it on
// the same port from its data directory (kfake.DataDir persistence).
//
// The broker always stops gracefully (Cluster.Close, which saves its open
// transactions and restores them at the next start), never as a crash: a
// kfake that crashed on a data directory (SIGKILL) "implicitly aborts" the
// transactions open at the time without writing ABORT markers and bumps
// their producer's epoch, after which read_committed readers skip every
// later record of that producer id, committed or not (docs/reliability.md,
// "The test broker's limits"). That is not what a Kafka broker does, so
// the exactly-once row would measure kfake, not walrelay. Instead the
// exactly-once row stops the broker at a moment a Kafka transaction is
// open on it (a partition's last stable offset below its high watermark;
// walrelay frozen meanwhile), so that every outage puts a transaction
// across a broker restart, which kfake must restore and walrelay commit.
func testBrokerDown(t *testing.T, row *result, d delivery) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	prepareDB(t, dsn)
	if os.Getenv(testenv.EnvKafkaBrokers) != "" || os.Getenv(testenv.EnvBackend) == testenv.BackendDocker {
		t.Skip("fault injection needs the in-process kfake broker")
	}
	restored := &txnRestores{}
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(freePort(t)), kfake.DataDir(t.TempDir()), kfake.WithLogger(restored)}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("starting kfake: %v", err)
	}
	t.Cleanup(c.Close)
	brokers := c.ListenAddrs()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admCl.Close)
	adm := kadm.NewClient(admCl)

	w := startWorkload(t, dsn, defaultLoad)
	p := startRelay(t, "relay", relayEnv(dsn, brokers, d))
	waitPublished(t, adm, 500, time.Minute)
	outages, downFor := pick(2, 6), pick(3*time.Second, 10*time.Second)
	var maxRec time.Duration
	heldBack := 0
	for range outages {
		if d == exactlyOnce {
			// Frozen (SIGSTOP) with records in an open Kafka transaction,
			// walrelay cannot end it before the broker is closed; it is
			// continued at once, to meet the outage.
			freezeInTransaction(t, p, adm)
			c.Close()
			p.signal(t, syscall.SIGCONT)
		} else {
			c.Close()
		}
		time.Sleep(downFor)
		requireRunning(t, p, "while the broker was down")
		if s := mustSlot(t, dsn); s.confirmed < s.current {
			heldBack++
		}
		c, err = kfake.NewCluster(opts...)
		if err != nil {
			t.Fatalf("restarting kfake on %v: %v", brokers, err)
		}
		t.Cleanup(c.Close)
		maxRec = max(maxRec, recoverAfter(t, dsn, time.Now()))
		time.Sleep(time.Second)
	}
	if heldBack != outages {
		t.Errorf("the slot was held back in %d of %d outages; the outage did not bite", heldBack, outages)
	}
	rep, read := verifyRun(t, dsn, brokers, w, d)
	stopClean(t, p)
	fill(row, rep, read)
	row.recovery = maxRec
	row.notes = fmt.Sprintf("%d outages of %s: kfake closed, recreated on the same port from its DataDir", outages, downFor)
	if d == exactlyOnce {
		row.notes += fmt.Sprintf(", each closed while walrelay was frozen (SIGSTOP, continued right after) with a Kafka transaction open; kfake restored %d open transactions at its restarts", restored.n.Load())
		if n := restored.n.Load(); n < int64(outages) {
			t.Errorf("kfake restored %d open Kafka transactions at its %d restarts (its debug line %q): not every outage put a transaction across a broker restart", n, outages, restoredTxnLog)
		}
	}
}

// restoredTxnLog starts the debug line kfake logs for each open Kafka
// transaction it restores from its data directory at a start (after a
// Close, which saved it).
const restoredTxnLog = "loadSessionState: restored in-progress txn"

// txnRestores is a kfake logger counting restoredTxnLog lines.
type txnRestores struct{ n atomic.Int64 }

func (r *txnRestores) Logf(_ kfake.LogLevel, format string, _ ...any) {
	if strings.HasPrefix(format, restoredTxnLog) {
		r.n.Add(1)
	}
}

// waitOpenTransaction waits until a Kafka transaction is open on the
// broker (openTransaction) and returns its partitions; under load that is
// most moments. It fails the test after a minute.
func waitOpenTransaction(t *testing.T, adm *kadm.Client) map[string]int64 {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		open, err := openTransaction(t.Context(), adm)
		if err == nil && len(open) > 0 {
			return open
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Kafka transaction open on the broker within a minute (last error: %v)", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// testProduceResponseLost answers produce requests with REQUEST_TIMED_OUT
// after kfake applied them.
func testProduceResponseLost(t *testing.T, row *result, d delivery) {
	f := newFixture(t, d)
	w := startWorkload(t, f.dsn, defaultLoad)
	p := startRelay(t, "relay", f.env)
	waitPublished(t, f.adm, 200, time.Minute)
	episodes := pick(5, 30)
	hits := 0
	var maxRec time.Duration
	for range episodes {
		h := f.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.RequestTimedOut, Count: 10})
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		_ = h.Wait(ctx, 10)
		cancel()
		hits += h.Hits()
		h.Remove()
		maxRec = max(maxRec, recoverAfter(t, f.dsn, time.Now()))
		time.Sleep(300 * time.Millisecond)
	}
	if hits == 0 {
		t.Fatal("the REQUEST_TIMED_OUT fault never hit a produce request")
	}
	requireRunning(t, p, "after lost produce responses")
	rep, read := f.verify(t, w)
	stopClean(t, p)
	fill(row, rep, read)
	row.recovery = maxRec
	row.notes = fmt.Sprintf("%d episodes, %d produce responses replaced by REQUEST_TIMED_OUT after the append", episodes, hits)
}

// testLeadersMoving moves partition leaders around a 3-broker cluster
// while the relay publishes.
func testLeadersMoving(t *testing.T, row *result, d delivery) {
	f := newFixture(t, d, kfake.NumBrokers(3))
	w := startWorkload(t, f.dsn, defaultLoad)
	p := startRelay(t, "relay", f.env)
	waitPublished(t, f.adm, 200, time.Minute)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	before := published(t, f.adm)
	shuffles, moves := 0, 0
	for end := time.Now().Add(pick(6*time.Second, 60*time.Second)); time.Now().Before(end); {
		if rng.IntN(2) == 0 {
			f.broker.Cluster.ShufflePartitionLeaders()
			shuffles++
		} else {
			topics, err := kafkaTopics(t.Context(), f.adm)
			if err != nil || len(topics) == 0 {
				t.Fatalf("listing topics: %v", err)
			}
			if err := f.broker.Cluster.MoveTopicPartition(topics[rng.IntN(len(topics))], rng.Int32N(4), rng.Int32N(3)); err != nil {
				t.Fatalf("moving a partition: %v", err)
			}
			moves++
		}
		time.Sleep(100 * time.Millisecond)
	}
	maxRec := recoverAfter(t, f.dsn, time.Now())
	if after := published(t, f.adm); after <= before {
		t.Fatal("nothing was published while leaders moved")
	}
	requireRunning(t, p, "after leader moves")
	rep, read := f.verify(t, w)
	stopClean(t, p)
	fill(row, rep, read)
	row.recovery = maxRec
	row.notes = fmt.Sprintf("3 brokers, %d ShufflePartitionLeaders + %d MoveTopicPartition", shuffles, moves)
}

// testPostgresRestart stops a private cluster with -m immediate and
// restarts it, with the relay and the writers running.
func testPostgresRestart(t *testing.T, row *result, d delivery) {
	c := testenv.PrivateCluster(t, localpg.Options{})
	f := newFixtureOn(t, c.DSN("postgres"), d)
	w := startWorkload(t, f.dsn, defaultLoad)
	p := startRelay(t, "relay", f.env)
	waitPublished(t, f.adm, 200, time.Minute)
	crashes := pick(2, 6)
	var maxRec time.Duration
	for range crashes {
		time.Sleep(1500 * time.Millisecond)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		if err := c.Stop(ctx, "immediate"); err != nil {
			cancel()
			t.Fatalf("stopping postgres: %v", err)
		}
		time.Sleep(2 * time.Second)
		err := c.Restart(ctx)
		cancel()
		if err != nil {
			t.Fatalf("restarting postgres: %v", err)
		}
		maxRec = max(maxRec, recoverAfter(t, f.dsn, time.Now()))
		requireRunning(t, p, "across a Postgres restart")
	}
	rep, read := f.verify(t, w)
	stopClean(t, p)
	fill(row, rep, read)
	row.recovery = maxRec
	row.notes = fmt.Sprintf("%d × pg_ctl stop -m immediate, 2s down, restart; same relay process", crashes)
	if rep.Duplicates != 0 { // not asserted: see testWalsenderTerminated
		t.Logf("%d duplicates after reconnects, e.g. %v", rep.Duplicates, rep.DuplicateIDs)
	}
}

// testWalsenderTerminated terminates the slot's walsender repeatedly.
func testWalsenderTerminated(t *testing.T, row *result, d delivery) {
	f := newFixture(t, d)
	w := startWorkload(t, f.dsn, defaultLoad)
	p := startRelay(t, "relay", f.env)
	waitPublished(t, f.adm, 200, time.Minute)
	cycles := pick(10, 60)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	terminated := 0
	var maxRec time.Duration
	for range cycles {
		time.Sleep(300*time.Millisecond + time.Duration(rng.Int64N(int64(500*time.Millisecond))))
		if testenv.QueryValue[bool](t, f.dsn, `SELECT coalesce(pg_terminate_backend(active_pid), false) FROM pg_replication_slots WHERE slot_name = $1`, slotFor(f.dsn)) {
			terminated++
		}
		maxRec = max(maxRec, recoverAfter(t, f.dsn, time.Now()))
	}
	if terminated != cycles {
		t.Errorf("terminated the walsender %d times of %d; the slot was not active every time", terminated, cycles)
	}
	requireRunning(t, p, "after walsender terminations")
	rep, read := f.verify(t, w)
	stopClean(t, p)
	fill(row, rep, read)
	row.recovery = maxRec
	row.notes = fmt.Sprintf("%d × pg_terminate_backend(walsender); same relay process", terminated)
	if rep.Duplicates != 0 {
		// Not asserted: a transaction the walsender was streaming when it
		// died is aborted and re-published whole (DESIGN.md, Reconnects),
		// although docs/delivery.md says a reconnect does not duplicate. See
		// TestReconnectMidTransactionRepro.
		t.Logf("%d duplicates after reconnects, e.g. %v", rep.Duplicates, rep.DuplicateIDs)
	}
}

// testPoisonRows mixes rows of every error class into the workload's
// transactions under the default policy dlq.
func testPoisonRows(t *testing.T, row *result, d delivery) {
	f := newFixture(t, d)
	const forbidden = "forbidden"
	fault := f.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topicPrefix + forbidden, Err: kerr.TopicAuthorizationFailed, Count: -1})
	str := func(s string) *string { return &s }
	poison := []poisonRow{
		{class: "routing_value_missing", aggregatetype: nil, payload: "null type"},
		{class: "routing_value_missing", aggregatetype: str(""), payload: "empty type"},
		{class: "topic_invalid", aggregatetype: str("bad topic!"), payload: "illegal topic"},
		{class: "record_too_large", aggregatetype: str("order"), payload: strings.Repeat("x", 100_000)},
		{class: "topic_rejected", aggregatetype: str(forbidden), payload: "refused topic"},
	}
	env := append(slices.Clone(f.env), "WALRELAY_KAFKA_BATCH_MAX_BYTES=65536")
	w := startWorkload(t, f.dsn, workloadOpts{writers: 3, pause: 20 * time.Millisecond, poison: poison})
	p := startRelay(t, "relay", env)
	time.Sleep(pick(6*time.Second, 60*time.Second))
	requireRunning(t, p, "with poison rows (policy dlq)")
	w.stop()
	rec := testenv.WaitCaughtUp(t, f.dsn, slotFor(f.dsn), 2*time.Minute)
	rep, read := f.verify(t, w)
	stopClean(t, p)
	if fault.Hits() == 0 {
		t.Error("the TOPIC_AUTHORIZATION_FAILED fault never hit")
	}
	w.mu.Lock()
	committedPoison := w.poison
	w.mu.Unlock()
	var parts []string
	for _, class := range []string{"routing_value_missing", "topic_invalid", "record_too_large", "topic_rejected"} {
		if committedPoison[class] == 0 {
			t.Errorf("no committed poison row of class %s: the scenario does not cover it", class)
		}
		if got := read.deadLetterClasses[class]; got < committedPoison[class] {
			t.Errorf("class %s: %d dead-letter records for %d committed poison rows", class, got, committedPoison[class])
		}
		parts = append(parts, fmt.Sprintf("%s %d", class, read.deadLetterClasses[class]))
	}
	fill(row, rep, read)
	row.recovery = rec
	row.notes = "dead-lettered: " + strings.Join(parts, ", ") + "; recovery = writers stop → caught up"
}

// testStandby runs two relays on one slot, takes the active one away, and
// checks the standby takes over and that the two never published at the
// same time (per partition, producers form contiguous blocks).
//
// At least once, the active one is SIGKILLed. Exactly once, it becomes a
// zombie: it is frozen with SIGSTOP while it has records in an open Kafka
// transaction (freezeInTransaction) and its walsender is terminated with
// pg_terminate_backend, standing for wal_sender_timeout (60s by default:
// only then would Postgres drop a client that froze, and free the slot).
// The standby takes the slot, fencing the transactional id, and confirms
// the WAL written before the freeze; then the zombie is continued
// (SIGCONT): it must say it was fenced, start again in-process as a
// standby (requireFenced) and stop cleanly, and its open transaction,
// aborted by the fence, must reach no read_committed consumer: every
// event once.
func testStandby(t *testing.T, row *result, d delivery) {
	f := newFixture(t, d)
	w := startWorkload(t, f.dsn, defaultLoad)
	var active, standby *relayProc
	if d == exactlyOnce {
		// The standby joins a running relay. Two exactly-once processes
		// whose first sessions start at the same moment (both find the
		// slot free) both fence the transactional id, and the one the
		// other fenced starts again (internal/relay's
		// TestExactlyOnceFencedWhileFencing): not the pair to test.
		active = startRelay(t, "a0", f.env)
		waitReady(t, active)
		standby = startRelay(t, "b0", f.env)
		waitStandby(t, standby)
	} else {
		active, standby = waitRoles(t, startRelay(t, "a0", f.env), startRelay(t, "b0", f.env))
	}
	rounds := pick(3, 15)
	var takeovers []time.Duration
	var maxRec time.Duration
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	for i := range rounds {
		waitPublished(t, f.adm, published(t, f.adm)+100, time.Minute)
		time.Sleep(500*time.Millisecond + time.Duration(rng.Int64N(int64(1500*time.Millisecond))))
		target := mustSlot(t, f.dsn).current
		gone := time.Now()
		if d == exactlyOnce {
			freezeInTransaction(t, active, f.adm)
			terminateWalsender(t, f.dsn)
		} else {
			active.kill()
		}
		for {
			if code, _ := standby.readyz(); code == 200 {
				break
			}
			if time.Since(gone) > time.Minute {
				t.Fatalf("standby %s not ready a minute after the active one was taken away", standby.name)
			}
			requireRunning(t, standby, "waiting to take over")
			time.Sleep(20 * time.Millisecond)
		}
		takeovers = append(takeovers, time.Since(gone))
		maxRec = max(maxRec, waitConfirmed(t, f.dsn, target, gone, 2*time.Minute))
		if d == exactlyOnce {
			requireFenced(t, active, time.Minute)
			requireRunning(t, standby, "after the zombie was continued")
		}
		next := startRelay(t, fmt.Sprintf("s%d", i+1), f.env)
		waitStandby(t, next)
		active, standby = standby, next
	}
	rep, read := f.verify(t, w)
	if bad := verify.ProducerInterleavings(read.records); len(bad) > 0 {
		t.Errorf("two instances published concurrently: %d interleavings, e.g. %v", len(bad), bad[:min(5, len(bad))])
	}
	// One producer per active instance: at least once a producer id each;
	// exactly once one transactional id, so one producer id, and an epoch
	// per Kafka transaction (KIP-890 bumps it at each), fences included.
	producers, ids := map[verify.Producer]bool{}, map[int64]bool{}
	for _, r := range read.records {
		producers[verify.ProducerOf(r)] = true
		ids[r.ProducerID] = true
	}
	if len(producers) < rounds+1 {
		t.Errorf("records carry %d producers (id/epoch), want at least %d (one per active instance)", len(producers), rounds+1)
	}
	if d == exactlyOnce && len(ids) != 1 {
		t.Errorf("records carry %d producer ids, want 1 (one transactional id)", len(ids))
	}
	stopClean(t, active)
	stopClean(t, standby)
	fill(row, rep, read)
	row.recovery = maxRec
	slices.Sort(takeovers)
	how := "SIGKILL of the active → standby /readyz 200"
	who := fmt.Sprintf("%d producer ids", len(ids))
	if d == exactlyOnce {
		how = "SIGSTOP of the active with a Kafka transaction open, its walsender terminated → standby /readyz 200"
		who = fmt.Sprintf("each zombie, continued once the standby had confirmed the WAL of the freeze, was fenced and started again in-process as a standby; 1 producer id, %d epochs", len(producers))
	}
	row.notes = fmt.Sprintf("%d takeovers (%s): max %s, median %s; %s, never interleaved",
		rounds, how, takeovers[len(takeovers)-1].Round(time.Millisecond), takeovers[len(takeovers)/2].Round(time.Millisecond), who)
}

// waitRoles waits until one relay streams and the other reports the slot
// held by another process; returns (active, standby).
func waitRoles(t *testing.T, a, b *relayProc) (*relayProc, *relayProc) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ca, ba := a.readyz()
		cb, bb := b.readyz()
		switch {
		case ca == 200 && cb == 503 && strings.Contains(bb, "held by another process"):
			return a, b
		case cb == 200 && ca == 503 && strings.Contains(ba, "held by another process"):
			return b, a
		}
		if time.Now().After(deadline) {
			t.Fatalf("no active/standby pair within a minute: %s: %d %q; %s: %d %q", a.name, ca, ba, b.name, cb, bb)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitReady waits until p's /readyz answers 200: it streams.
func waitReady(t *testing.T, p *relayProc) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if code, _ := p.readyz(); code == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("walrelay %s not ready within a minute", p.name)
		}
		requireRunning(t, p, "before it was ready")
	}
}

func waitStandby(t *testing.T, p *relayProc) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		code, body := p.readyz()
		if code == 503 && strings.Contains(body, "held by another process (pid ") {
			return
		}
		if code == 200 {
			t.Fatalf("walrelay %s is ready while another instance should hold the slot", p.name)
		}
		if time.Now().After(deadline) {
			t.Fatalf("walrelay %s never reported the slot held by another process: %d %q", p.name, code, body)
		}
		requireRunning(t, p, "as a standby")
		time.Sleep(50 * time.Millisecond)
	}
}

// testLargeTransaction commits one transaction of many rows and checks it
// drains with the relay's peak RSS bounded by the in-flight caps.
func testLargeTransaction(t *testing.T, row *result, d delivery) {
	const maxRSS = 150 << 20
	f := newFixture(t, d)
	p := startRelay(t, "relay", f.env)
	waitReady(t, p)
	rows := pick(100_000, 1_000_000)
	// A million rows (and their ledger, with the payloads' md5) take
	// longer than testenv.Exec allows on a loaded machine.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	if _, err := testenv.Connect(t, f.dsn).Exec(ctx, `
WITH o AS (INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
      SELECT 'bulk', 'bulk-' || (i % 100), 'Imported', jsonb_build_object('i', i, 'pad', repeat('x', 100))
      FROM generate_series(0, $1::int - 1) i ORDER BY i
      RETURNING id, aggregateid, (payload->>'i')::int AS i, md5(payload::text) AS digest)
INSERT INTO expected SELECT id, 'bulk', aggregateid, i / 100 + 1, digest FROM o`, rows); err != nil {
		t.Fatalf("committing the large transaction: %v", err)
	}
	committed := time.Now()
	drain := recoverAfter(t, f.dsn, committed)
	peak, err := p.peakRSS()
	if err != nil {
		t.Fatalf("reading peak RSS: %v", err)
	}
	spans := ""
	if d == exactlyOnce {
		// Nothing else was committed: every Kafka transaction of the
		// process's holds rows of the one Postgres transaction.
		n, err := p.metricSum(t.Context(), "walrelay_kafka_transactions_total", "result=committed")
		if err != nil {
			t.Fatalf("reading walrelay_kafka_transactions_total: %v", err)
		}
		if n < 2 {
			t.Errorf("the transaction of %d rows went out in %.0f Kafka transactions, want it split by the in-flight caps", rows, n)
		}
		spans = fmt.Sprintf(" in %.0f Kafka transactions", n)
	}
	rep, read := f.verify(t, nil)
	stopClean(t, p)
	if rep.Committed != rows {
		t.Errorf("ledger has %d events, want %d", rep.Committed, rows)
	}
	if peak >= maxRSS {
		t.Errorf("peak RSS %d MiB, want < %d MiB", peak>>20, maxRSS>>20)
	}
	fill(row, rep, read)
	row.recovery = drain
	row.notes = fmt.Sprintf("one transaction of %d rows%s; walrelay peak RSS (VmHWM) %d MiB (bound %d MiB); recovery = COMMIT → confirmed", rows, spans, peak>>20, maxRSS>>20)
}
