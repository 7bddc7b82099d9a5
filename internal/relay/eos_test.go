package relay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/eoscheckpoint"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/testenv"
)

func exactlyOnce(c *config.Config) { c.Relay.Delivery = config.ExactlyOnce }

// readCommitted reads topics as a read_committed consumer until want
// records arrived, then for a moment more, and fails on fewer.
func (f *fixture) readCommitted(t *testing.T, topics []string, want int) []*kgo.Record {
	t.Helper()
	b := f.broker.As(kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	recs := b.ReadAll(t, topics, want, 30*time.Second)
	return append(recs, b.ReadAll(t, topics, 0, 300*time.Millisecond)[len(recs):]...)
}

// readCommittedOnce reads topic as readCommitted does and checks that it
// holds rows records, each event id once; it returns the records.
func (f *fixture) readCommittedOnce(t *testing.T, topic string, rows int) []*kgo.Record {
	t.Helper()
	recs := f.readCommitted(t, []string{topic}, rows)
	all, dup := ids(recs)
	if len(all) != rows || len(dup) > 0 {
		t.Errorf("read_committed consumer got %d records with %d duplicates (first %v), want %d once each", len(all), len(dup), dup[:min(len(dup), 5)], rows)
	}
	return recs
}

// checkpoint reads the relay's last committed checkpoint.
func (f *fixture) checkpoint(t *testing.T) (eoscheckpoint.Checkpoint, bool) {
	t.Helper()
	cp, found, err := eoscheckpoint.Read(t.Context(), f.cfg.Relay.CheckpointTopic, f.txnID(t), kgo.SeedBrokers(f.broker.Addrs()...))
	if errors.Is(err, eoscheckpoint.ErrNoTopic) {
		return eoscheckpoint.Checkpoint{}, false
	}
	if err != nil {
		t.Fatalf("reading checkpoint: %v", err)
	}
	return cp, found
}

// waitOpenCheckpoint waits up to 30s for a committed checkpoint inside a
// Postgres transaction with at least rows of it published, and returns it.
func (f *fixture) waitOpenCheckpoint(t *testing.T, rows int) eoscheckpoint.Checkpoint {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cp, found := f.checkpoint(t)
		if found && cp.Open != nil && cp.Open.Rows >= rows {
			return cp
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint inside the transaction within 30s: %+v", cp)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// resumeInsideTransaction runs stmt, one transaction of rows rows (more
// than the exactly-once fixture's in-flight cap), with produce slowed;
// stops the relay (its shutdown timeout too short to finish) once a Kafka
// transaction checkpointed 300 of its rows, and checks that the slot
// confirmed nothing of it. Then it starts a relay again at full speed,
// waits until the slot confirms the transaction's end, and checks that a
// read_committed consumer of "outbox.event.order" reads each of the rows
// once. It returns those records, the checkpoint the stopped relay left,
// and the running relay.
func (f *fixture) resumeInsideTransaction(t *testing.T, stmt string, rows int) (recs []*kgo.Record, stopped eoscheckpoint.Checkpoint, run *running) {
	t.Helper()
	f.createProbe(t)
	x := execTx(t, f.dsn, stmt)
	end := f.txEnd(t, x)
	slow := f.slowProduce(20 * time.Millisecond)
	run = f.start(t)
	if cp := f.waitOpenCheckpoint(t, 300); cp.Open.Xid != x {
		t.Fatalf("checkpoint open transaction xid %d, want %d", cp.Open.Xid, x)
	}
	if err := run.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if confirmed, _ := f.slot(t); confirmed >= end {
		t.Fatalf("slot confirmed %s, at or past the unfinished transaction's end %s", confirmed, end)
	}
	stopped, _ = f.checkpoint(t)
	t.Logf("stopped with %d of %d rows checkpointed", stopped.Open.Rows, rows)

	slow.Store(false)
	run = f.start(t)
	testenv.WaitConfirmed(t, f.dsn, "walrelay", end, 60*time.Second)
	return f.readCommittedOnce(t, "outbox.event.order", rows), stopped, run
}

// commitLSN is the commit LSN (the Begin message's FinalLSN) of
// transaction xid, read from the probe slot.
func (f *fixture) commitLSN(t *testing.T, xid uint32) pglogrepl.LSN {
	t.Helper()
	hex := testenv.QueryValue[string](t, f.dsn, `
		SELECT encode(substring(data from 2 for 8), 'hex') FROM pg_logical_slot_peek_binary_changes('probe', NULL, NULL,
			'proto_version', '1', 'publication_names', 'walrelay_outbox')
		WHERE xid::text = $1 AND get_byte(data, 0) = 66 -- 'B'egin`, fmt.Sprint(xid))
	v, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		t.Fatalf("begin of %d: %q: %v", xid, hex, err)
	}
	return pglogrepl.LSN(v)
}

// txnID is the transactional id the relay derives from the fixture's
// server (the checkpoint's key).
func (f *fixture) txnID(t *testing.T) string {
	t.Helper()
	return f.cfg.TransactionalID(f.database(t), f.systemID(t))
}

// systemID is the fixture's server's system identifier.
func (f *fixture) systemID(t *testing.T) string {
	t.Helper()
	return testenv.QueryValue[string](t, f.dsn, `SELECT system_identifier::text FROM pg_control_system()`)
}

// timeline is the fixture's server's timeline (of its last checkpoint).
func (f *fixture) timeline(t *testing.T) int32 {
	t.Helper()
	return testenv.QueryValue[int32](t, f.dsn, `SELECT timeline_id FROM pg_control_checkpoint()`)
}

// commitCheckpoint commits cp under the relay's transactional id, as a
// previous process's last Kafka transaction would have.
func (f *fixture) commitCheckpoint(t *testing.T, cp eoscheckpoint.Checkpoint) {
	t.Helper()
	id := f.txnID(t)
	f.broker.CreateTopic(t, f.cfg.Relay.CheckpointTopic, 1)
	prev := f.broker.Client(t, kgo.TransactionalID(id))
	if err := prev.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := prev.ProduceSync(t.Context(), &kgo.Record{Topic: f.cfg.Relay.CheckpointTopic, Key: []byte(id), Value: cp.Marshal()}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := prev.EndTransaction(t.Context(), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) database(t *testing.T) string {
	t.Helper()
	conn := testenv.Connect(t, f.dsn)
	defer conn.Close(context.WithoutCancel(t.Context()))
	var db string
	if err := conn.QueryRow(t.Context(), `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	return db
}

// ids returns the outbox ids (header id) of recs, and those seen twice.
func ids(recs []*kgo.Record) (all, dup []string) {
	seen := map[string]bool{}
	for _, r := range recs {
		id := testenv.Header(r, "id")
		if seen[id] {
			dup = append(dup, id)
		}
		seen[id] = true
		all = append(all, id)
	}
	return all, dup
}

// TestExactlyOnceCommitsEventsWithACheckpoint: in exactly-once mode the
// events reach a read_committed consumer once, the checkpoint topic holds
// the end LSN of the last transaction, the slot is confirmed to it, and
// metrics and /status say so.
func TestExactlyOnceCommitsEventsWithACheckpoint(t *testing.T) {
	f := newFixture(t, exactlyOnce)
	f.createProbe(t)
	run := f.start(t)
	var want []string
	var last uint32
	for i := range 5 {
		id, xid := insertRow(t, f.dsn, "order", fmt.Sprint("o-", i), `{"n": 1}`)
		want, last = append(want, id), xid
	}
	end := f.txEnd(t, last)
	testenv.WaitConfirmed(t, f.dsn, "walrelay", end, 30*time.Second)
	got, dup := ids(f.readCommitted(t, []string{"outbox.event.order"}, len(want)))
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) || len(dup) > 0 {
		t.Errorf("read_committed consumer got %v, want %v once each", got, want)
	}
	cp, found := f.checkpoint(t)
	if !found || cp.LSN != end || cp.Open != nil || cp.Slot != "walrelay" {
		t.Errorf("checkpoint = %+v (found %t), want lsn %s, no open transaction", cp, found, end)
	}
	if n := testenv.MetricValue(t, f.reg, "walrelay_kafka_transactions_total", map[string]string{"result": "committed"}); n < 1 {
		t.Errorf("kafka_transactions_total{committed} = %v", n)
	}
	if v := testenv.MetricValue(t, f.reg, "walrelay_checkpoint_lsn_bytes", nil); pglogrepl.LSN(v) != end {
		t.Errorf("checkpoint_lsn_bytes = %v, want %d", v, end)
	}
	if v := testenv.MetricValue(t, f.reg, "walrelay_delivery_mode", map[string]string{"mode": "exactly_once"}); v != 1 {
		t.Errorf("delivery_mode{exactly_once} = %v", v)
	}
	st := run.relay.Status(t.Context())
	if st.Delivery != "exactly_once" || st.CheckpointLSN != end.String() || st.KafkaTransactionsCommitted == nil || *st.KafkaTransactionsCommitted < 1 {
		t.Errorf("status = %+v", st)
	}
	if err := run.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// TestExactlyOnceSkipsWhatTheCheckpointCovers: a checkpoint ahead of the
// slot (a process killed between its Kafka commit and its next status
// update) is where a new process resumes: transactions before its LSN are
// not published again, nor the rows of the open transaction it counts,
// and the slot is confirmed past them.
func TestExactlyOnceSkipsWhatTheCheckpointCovers(t *testing.T) {
	f := newFixture(t, exactlyOnce)
	f.createProbe(t)
	_, x1 := insertRow(t, f.dsn, "order", "o-1", `{"n": 1}`)
	_, x2 := insertRow(t, f.dsn, "order", "o-2", `{"n": 2}`)
	// One transaction of four rows, of which the checkpoint says two are
	// published.
	x3 := execTx(t, f.dsn, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) SELECT 'order', 'o-3', 'T', jsonb_build_object('n', 3, 'i', i) FROM generate_series(1, 4) i`)
	id4, x4 := insertRow(t, f.dsn, "order", "o-4", `{"n": 4}`)
	_ = x1
	end2, end3 := f.txEnd(t, x2), f.txEnd(t, x3)
	commit3 := f.commitLSN(t, x3)

	// What a previous process committed: a transactional producer with the
	// relay's transactional id, as a relay's last Kafka transaction.
	sys, tli := f.systemID(t), f.timeline(t)
	// It names its last transaction (x2), which the slot sends again: the
	// proof that the checkpoint belongs to this WAL.
	cp := eoscheckpoint.Checkpoint{LSN: end2, SystemID: sys, Timeline: tli,
		Last: &eoscheckpoint.Last{CommitLSN: f.commitLSN(t, x2), Xid: x2},
		Open: &eoscheckpoint.Open{CommitLSN: commit3, Xid: x3, Rows: 2}, Written: time.Now()}
	f.commitCheckpoint(t, cp)

	run := f.start(t)
	testenv.WaitConfirmed(t, f.dsn, "walrelay", f.txEnd(t, x4), 30*time.Second)
	recs := f.readCommitted(t, []string{"outbox.event.order"}, 3)
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Value))
	}
	want := []string{`{"i": 3, "n": 3}`, `{"i": 4, "n": 3}`, `{"n": 4}`}
	if !slices.Equal(got, want) {
		t.Errorf("published %q, want %q: transactions before the checkpoint and the first 2 rows of the open one skipped", got, want)
	}
	if testenv.Header(recs[len(recs)-1], "id") != id4 {
		t.Errorf("last record is not the row inserted after the checkpoint")
	}
	f.logs.waitLog(t, "resuming from the checkpoint: transactions it covers are skipped once the slot proves it belongs to this WAL, and nothing past the slot's position is confirmed before", map[string]string{"checkpoint_lsn": end2.String(), "open_commit_lsn": commit3.String()}, 5*time.Second)
	f.logs.waitLog(t, "the checkpoint is proven on this server's WAL: the slot sent again the transactions it names; what it covers stays skipped", map[string]string{"checkpoint_lsn": end2.String()}, 5*time.Second)
	_ = end3
	if err := run.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// TestExactlyOnceResumesInsideALargeTransaction: a Postgres transaction
// larger than the in-flight cap goes out in several Kafka transactions,
// each checkpointing how many of its rows it holds. A relay stopped in
// the middle (its shutdown timeout too short to finish) confirms nothing
// of it to the slot; the next one continues after the rows the checkpoint
// counts: every row reaches a read_committed consumer once.
func TestExactlyOnceResumesInsideALargeTransaction(t *testing.T) {
	const rows = 3000
	f := newFixture(t, func(c *config.Config) {
		exactlyOnce(c)
		c.Relay.MaxInFlightRecords = 100
		c.Relay.ShutdownTimeout = 0
	})
	_, cp, run := f.resumeInsideTransaction(t, fmt.Sprintf(`INSERT INTO outbox (aggregatetype, aggregateid, type, payload) SELECT 'order', 'o-' || (i %% 7), 'T', jsonb_build_object('i', i) FROM generate_series(1, %d) i`, rows), rows)
	if cp.Open.CommitTime.IsZero() {
		t.Errorf("the checkpoint's open transaction has no commit time to be proven by: %+v", cp.Open)
	}
	// Proven by the open transaction re-sent with its commit LSN, xid and
	// commit time.
	f.logs.waitLog(t, "the checkpoint is proven on this server's WAL: the slot sent again the transactions it names; what it covers stays skipped", nil, 5*time.Second)
	if err := run.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// TestExactlyOnceFencedStartsAgain: a newer producer with the same
// transactional id (another walrelay process taking over, or a broker
// whose restart bumped the epoch) fences this one: at its next Kafka
// transaction it stops its exactly-once pipeline without confirming
// anything more, and starts it again in-process: the new producer fences
// in turn, reads the checkpoint and publishes what the fenced one could
// not, committed with a newer epoch than the fencer's (the fenced producer
// committed nothing). Fenced again within fenceWindow, it stops with
// ErrFenced: two processes are live.
func TestExactlyOnceFencedStartsAgain(t *testing.T) {
	f := newFixture(t, exactlyOnce)
	f.createProbe(t)
	run := f.start(t)
	first, x1 := insertRow(t, f.dsn, "order", "o-1", `{"n": 1}`)
	end1 := f.txEnd(t, x1)
	testenv.WaitConfirmed(t, f.dsn, "walrelay", end1, 30*time.Second)

	txnID := f.txnID(t)
	fence := func() int16 {
		t.Helper()
		newer := f.broker.Client(t, kgo.TransactionalID(txnID))
		if err := newer.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := newer.ProduceSync(t.Context(), &kgo.Record{Topic: f.cfg.Relay.CheckpointTopic, Key: []byte("newer")}).FirstErr(); err != nil {
			t.Fatalf("newer producer: %v", err)
		}
		_, epoch, err := newer.ProducerID(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := newer.EndTransaction(t.Context(), kgo.TryAbort); err != nil {
			t.Fatal(err)
		}
		return epoch
	}
	fencer := fence()
	second, x2 := insertRow(t, f.dsn, "order", "o-2", `{"n": 2}`)
	end2 := f.txEnd(t, x2)
	testenv.WaitConfirmed(t, f.dsn, "walrelay", end2, 30*time.Second)
	f.logs.waitLog(t, "fenced: another walrelay process now produces with this transactional id", nil, time.Second)
	f.logs.waitLog(t, "restarting the exactly-once pipeline in-process", map[string]string{"reason": "fenced"}, time.Second)
	recs := f.readCommitted(t, []string{"outbox.event.order"}, 2)
	if got, dup := ids(recs); !slices.Equal(got, []string{first, second}) || len(dup) > 0 {
		t.Errorf("read_committed consumer got %v, want %s and %s once", got, first, second)
	}
	if r := recs[len(recs)-1]; r.ProducerEpoch <= fencer {
		t.Errorf("the row inserted after the fence was committed with epoch %d, not after the fencer's %d: the fenced producer committed", r.ProducerEpoch, fencer)
	}
	if run.exited() {
		t.Fatalf("Run returned %v after one fence, want a restart", run.err)
	}

	// Fenced again, soon: two processes are live.
	fence()
	_, x3 := insertRow(t, f.dsn, "order", "o-3", `{"n": 3}`)
	err := run.wait(30 * time.Second)
	if !errors.Is(err, relay.ErrFenced) {
		t.Fatalf("Run = %v, want ErrFenced", err)
	}
	if confirmed, _ := f.slot(t); confirmed >= f.txEnd(t, x3) || confirmed < end2 {
		t.Errorf("slot confirmed %s; want %s (the second row's end), nothing of the third", confirmed, end2)
	}
	if got, _ := ids(f.readCommitted(t, []string{"outbox.event.order"}, 2)); !slices.Equal(got, []string{first, second}) {
		t.Errorf("read_committed consumer got %v, want only %s and %s", got, first, second)
	}
	f.logs.waitLog(t, "fenced again soon after the last fence", nil, time.Second)
}

// TestExactlyOnceConfirmsOnlyCommitted: records the broker acknowledged
// in a Kafka transaction whose commit failed (UNKNOWN_SERVER_ERROR, here
// before the broker applied it; the relay cannot know that) are not
// confirmed to the slot; the relay starts its exactly-once pipeline again
// (the new producer's fence aborts the transaction, the checkpoint does
// not cover it) and produces them again, until a commit succeeds, and a
// read_committed consumer sees each once.
func TestExactlyOnceConfirmsOnlyCommitted(t *testing.T) {
	f := newFixture(t, exactlyOnce)
	f.createProbe(t)
	refuse := f.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, Count: -1,
		When: func(req kmsg.Request) bool { return req.(*kmsg.EndTxnRequest).Commit }})
	run := f.start(t)
	id, x := insertRow(t, f.dsn, "order", "o-1", `{"n": 1}`)
	end := f.txEnd(t, x)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := refuse.Wait(ctx, 2); err != nil {
		t.Fatalf("commit refused %d times, want at least 2 (the retry too): %v", refuse.Hits(), err)
	}
	f.logs.waitLog(t, "the outcome of the kafka transaction's commit is unknown", nil, 5*time.Second)
	if confirmed, _ := f.slot(t); confirmed >= end {
		t.Fatalf("slot confirmed %s, past %s, with the transaction never committed", confirmed, end)
	}
	refuse.Remove()
	testenv.WaitConfirmed(t, f.dsn, "walrelay", end, 60*time.Second)
	got, _ := ids(f.readCommitted(t, []string{"outbox.event.order"}, 1))
	if !slices.Equal(got, []string{id}) {
		t.Errorf("read_committed consumer got %v, want %s once", got, id)
	}
	if n := testenv.MetricValue(t, f.reg, "walrelay_kafka_transactions_total", map[string]string{"result": "unknown"}); n < 2 {
		t.Errorf("kafka_transactions_total{unknown} = %v, want the refused commits", n)
	}
	// librdkafka, a client nobody here wrote, sees the same: the record
	// once read_committed, and the copies of the aborted transactions too
	// read_uncommitted (Kafka's default).
	if got := kcatIDs(t, f.broker.Addrs()[0], "outbox.event.order", "read_committed"); !slices.Equal(got, []string{id}) {
		t.Errorf("kcat read_committed got %v, want %s once", got, id)
	}
	if got := kcatIDs(t, f.broker.Addrs()[0], "outbox.event.order", "read_uncommitted"); len(got) < 3 {
		t.Errorf("kcat read_uncommitted got %v, want the committed record and the aborted copies", got)
	}
	if err := run.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// kcatIDs reads topic to its end with kcat (librdkafka) at the given
// isolation level and returns the records' id headers. It skips the test
// when kcat is not installed.
func kcatIDs(t *testing.T, broker, topic, isolation string) []string {
	t.Helper()
	bin, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed (apt-get install -y kcat)")
	}
	cmd := exec.Command(bin, "-b", broker, "-C", "-t", topic, "-e", "-q", "-X", "isolation.level="+isolation, "-f", "%h\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat -C %s: %v\n%s", topic, err, stderr.String())
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		for _, h := range strings.Split(line, ",") {
			if v, ok := strings.CutPrefix(h, "id="); ok {
				got = append(got, v)
			}
		}
	}
	return got
}

// TestExactlyOnceFencedWhileFencing: two processes whose first sessions
// start at the same moment both fence the transactional id. The one whose
// fence is fenced by the other's (another InitProducerID between its own
// and its fence record: the record is refused with INVALID_PRODUCER_EPOCH,
// the abort with PRODUCER_FENCED) stops its pipeline as any fenced
// process does, instead of retrying for ever with a client stuck in the
// transaction it could not abort, and starts again in-process with a new
// client: here the other process fences only once, so the relay's second
// fence holds and it publishes.
func TestExactlyOnceFencedWhileFencing(t *testing.T) {
	f := newFixture(t, exactlyOnce)
	f.createProbe(t)
	id := f.txnID(t)
	other := f.broker.Client(t)
	var fenced atomic.Bool
	f.broker.Cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.broker.Cluster.KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		if pr.TransactionID == nil || *pr.TransactionID != id || fenced.Swap(true) {
			return nil, nil, false
		}
		// The relay's fence record: another process fences the id first.
		f.broker.Cluster.SleepControl(func() {
			init := kmsg.NewPtrInitProducerIDRequest()
			init.TransactionalID = &id
			init.TransactionTimeoutMillis = 60_000
			init.ProducerID, init.ProducerEpoch = -1, -1
			resp, err := init.RequestWith(context.Background(), other)
			if err == nil {
				err = kerr.ErrorForCode(resp.ErrorCode)
			}
			if err != nil {
				t.Errorf("the other process's InitProducerID: %v", err)
			}
		})
		return nil, nil, false
	})
	run := f.start(t)
	f.logs.waitLog(t, "restarting the exactly-once pipeline in-process", map[string]string{"reason": "fenced"}, 20*time.Second)
	if !fenced.Load() {
		t.Fatal("the relay's fence record never reached the broker")
	}
	f.logs.waitLog(t, "fenced: another walrelay process now produces with this transactional id; stopping without confirming anything more", nil, time.Second)
	id, x := insertRow(t, f.dsn, "order", "o-1", `{"n": 1}`)
	testenv.WaitConfirmed(t, f.dsn, "walrelay", f.txEnd(t, x), 30*time.Second)
	if got, _ := ids(f.readCommitted(t, []string{"outbox.event.order"}, 1)); !slices.Equal(got, []string{id}) {
		t.Errorf("read_committed consumer got %v, want %s once", got, id)
	}
	if err := run.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// TestExactlyOnceFenceRetriedAfterAFailedAbort: the fence's transaction is
// aborted; when that abort fails (its answer lost), the next attempt ends
// the transaction franz-go still holds before it begins another, and the
// relay starts streaming.
func TestExactlyOnceFenceRetriedAfterAFailedAbort(t *testing.T) {
	f := newFixture(t, exactlyOnce)
	f.createProbe(t)
	lost := f.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError,
		When: func(req kmsg.Request) bool { return !req.(*kmsg.EndTxnRequest).Commit }})
	run := f.start(t)
	f.logs.waitLog(t, "cannot read the checkpoint yet; retrying", nil, 30*time.Second)
	id, x := insertRow(t, f.dsn, "order", "o-1", `{"n": 1}`)
	testenv.WaitConfirmed(t, f.dsn, "walrelay", f.txEnd(t, x), 30*time.Second)
	if got, _ := ids(f.readCommitted(t, []string{"outbox.event.order"}, 1)); !slices.Equal(got, []string{id}) {
		t.Errorf("read_committed consumer got %v, want %s", got, id)
	}
	if lost.Hits() != 1 {
		t.Errorf("the fence's abort failed %d times, want 1", lost.Hits())
	}
	if err := run.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}
