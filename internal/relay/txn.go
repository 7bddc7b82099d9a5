// Exactly-once delivery (relay.delivery=exactly_once): records go into
// Kafka transactions with a checkpoint record, and the tracker hears of a
// record only once its transaction committed.

package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/eoscheckpoint"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/replication"
)

// disposition is what a record produced in a Kafka transaction comes to
// when the transaction commits.
type disposition uint8

const (
	dispPending  disposition = iota // no outcome yet
	dispOK                          // the broker appended it: acked to the tracker at commit
	dispReplaced                    // refused; its dead letter stands for it
	dispSkipped                     // refused and skipped by policy log: acked at commit
	dispRetry                       // failed for no reason of its own: produced again after an abort
)

// txItem is what the stream hands the transaction loop, in WAL order: a
// record, or (out nil) the end of a Postgres transaction, or (reset) the
// position checkpoints start from and the session (WAL history) they
// belong to. last names the transaction that ends at end, for the
// checkpoint (zero: unknown).
type txItem struct {
	out     *outRecord
	end     pglogrepl.LSN
	last    eoscheckpoint.Last
	reset   bool
	session replication.Session // with reset
	// synced, when set, is closed once everything queued before it is
	// committed (or found nothing to commit): drained.
	synced chan struct{}
}

// transactions owns the Kafka transactions of exactly-once delivery. The
// stream's goroutine queues records and Postgres commits (add, commit);
// its loop goroutine (run) takes everything queued, produces it in one
// Kafka transaction together with a checkpoint record, waits until every
// record has its outcome (dead letters of refused ones included), commits,
// and only then acks the records to the tracker, which confirms their
// Postgres transactions to the slot. A transaction is as large as what
// queued while the previous one committed, so at most the in-flight caps
// (records count in flight until their transaction commits): under load
// transactions are large and few, idle each row commits at once.
//
// The checkpoint says how far the committed events go: the end LSN of the
// last whole Postgres transaction in them, which transaction that is
// (commit LSN, xid, commit time: a new process proves with them that the
// position belongs to the WAL it streams) and, when the Kafka transaction
// ended inside a Postgres transaction (one larger than the caps), that
// transaction's commit LSN, xid and the events of it handed on (INSERTs
// and table-less outbox messages, in WAL order). On start
// the relay reads it (after fencing older producers) and skips what it
// covers (Handler.SessionStart).
type transactions struct {
	r     *Relay
	topic string    // relay.checkpoint_topic
	opts  []kgo.Opt // to read the checkpoint topic
	// Set at startup (setID), before anything else uses them.
	key []byte // the transactional id
	db  string

	// Queued by the stream, taken by the loop.
	qmu   sync.Mutex
	queue []txItem
	wake  chan struct{}

	// The open Kafka transaction: cur are its records (the stream's and
	// their dead letters), pending those without a final outcome.
	mu      sync.Mutex
	cur     []*outRecord
	pending int
	settled chan struct{} // closed when pending drops to 0; nil when not waited on
	retry   error         // a record failed for no reason of its own: abort and produce again

	// Owned by the loop: the position the next checkpoint records, and the
	// WAL history it belongs to (set at the first session). Both come
	// from the queue, in WAL order: a checkpoint of the old history still
	// being committed when the stream moved to a new one keeps the old
	// history's label.
	last    pglogrepl.LSN
	lastTx  eoscheckpoint.Last // the transaction ending at last; zero: unknown
	open    *eoscheckpoint.Open
	session replication.Session
	inTxn   bool
	// openCommitted: the last committed checkpoint ended inside a
	// Postgres transaction.
	openCommitted bool

	// Read at scrape time and by /status.
	committed, aborted, lastLSN atomic.Uint64
	// fenced is set once the first session fenced older producers (stream
	// goroutine); fenceLogged once this process was fenced and said so.
	fenced      bool
	fenceLogged atomic.Bool
	// fenceOpen: a fence attempt left its transaction open (stream
	// goroutine).
	fenceOpen bool
	// syncs are the drained waiters the loop releases once it has no
	// Kafka transaction open (loop goroutine).
	syncs []chan struct{}
}

func newTransactions(r *Relay, opts []kgo.Opt) *transactions {
	return &transactions{r: r, topic: r.cfg.Relay.CheckpointTopic, opts: opts, wake: make(chan struct{}, 1)}
}

// setID sets the transactional id and what it was derived from (prepare,
// before the producer is built).
func (t *transactions) setID(id postgres.TxnID) {
	t.key, t.db = []byte(id.ID), id.Database
}

// add queues a record of the transaction being read (stream goroutine).
func (t *transactions) add(out *outRecord) { t.push(txItem{out: out}) }

// commit queues the end of a Postgres transaction, named by tx (stream
// goroutine).
func (t *transactions) commit(end pglogrepl.LSN, tx eoscheckpoint.Last) {
	t.push(txItem{end: end, last: tx})
}

// restart queues the position the next checkpoints start from, and the
// session (WAL history) they belong to: the checkpoint read at start or,
// after a change of WAL history, the new slot's position (stream
// goroutine, nothing of the old history in flight). The session travels
// with the position: the loop may still be committing a checkpoint-only
// transaction of the old history (the Commit of a Postgres transaction
// the last checkpoint ended inside), which must say the old history. last
// names the transaction ending at at when it is known (the checkpoint's
// own), zero when not (a slot's position).
func (t *transactions) restart(at pglogrepl.LSN, s replication.Session, last eoscheckpoint.Last) {
	t.push(txItem{end: at, last: last, reset: true, session: s})
}

// drained waits until the loop committed everything queued before the
// call, checkpoint included, and has no Kafka transaction open: the heal
// waits for it before the stream's first session fences and reads the
// checkpoint with the same producer.
func (t *transactions) drained(ctx context.Context) error {
	ch := make(chan struct{})
	t.push(txItem{synced: ch})
	select {
	case <-ch:
		return nil
	case <-t.r.fail.done:
		return t.r.fail.err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release closes the drained waiters (loop goroutine, no transaction
// open).
func (t *transactions) release() {
	for _, ch := range t.syncs {
		close(ch)
	}
	t.syncs = t.syncs[:0]
}

func (t *transactions) push(it txItem) {
	t.qmu.Lock()
	t.queue = append(t.queue, it)
	t.qmu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// take waits for queued items and returns them all, or nil when ctx ends
// or, with a timeout (non-nil), when it fires first.
func (t *transactions) take(ctx context.Context, buf []txItem, timeout <-chan time.Time) []txItem {
	for {
		t.qmu.Lock()
		if len(t.queue) > 0 {
			items := append(buf[:0], t.queue...)
			clear(t.queue)
			t.queue = t.queue[:0]
			t.qmu.Unlock()
			return items
		}
		t.qmu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case <-timeout:
			return nil
		case <-t.wake:
		}
	}
}

// endLinger bounds how long a Kafka transaction that has reached the end
// of what is queued in the middle of a Postgres transaction waits for the
// rest of it (its Commit message is usually a moment behind its last
// row): a checkpoint on a transaction boundary is what the slot confirms.
// It does not wait when the in-flight caps are reached: the rest cannot
// come before this transaction commits.
const endLinger = 5 * time.Millisecond

// produce hands a record of the open Kafka transaction to the publisher.
// The loop calls it for the stream's records, the dead-letter worker for
// dead letters (queued while pending counts their refused originals, so
// the transaction cannot end before they are produced).
func (t *transactions) produce(out *outRecord, counted bool) {
	t.mu.Lock()
	t.cur = append(t.cur, out)
	if !counted {
		t.pending++
	}
	t.mu.Unlock()
	out.disp = dispPending
	out.produced = t.r.clock.now()
	t.r.pub.Produce(&out.rec)
}

// settle records a record's outcome: disp, and whether a dead letter now
// stands for it (replaced: pending stays counted for the dead letter).
func (t *transactions) settle(out *outRecord, disp disposition, err error) {
	t.mu.Lock()
	out.disp = disp
	if disp == dispRetry && t.retry == nil {
		t.retry = err
	}
	if disp != dispReplaced {
		t.pending--
		if t.pending == 0 && t.settled != nil {
			close(t.settled)
			t.settled = nil
		}
	}
	t.mu.Unlock()
}

// waitSettled waits until every record of the open transaction has its
// outcome, the relay failed, or ctx ends.
func (t *transactions) waitSettled(ctx context.Context) error {
	t.mu.Lock()
	if t.pending == 0 {
		t.mu.Unlock()
		return nil
	}
	if t.settled == nil {
		t.settled = make(chan struct{})
	}
	ch := t.settled
	t.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-t.r.fail.done:
		return t.r.fail.err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run is the loop: one Kafka transaction at a time until ctx ends (after
// the stream stopped) or the relay fails. A transaction still open then
// is aborted: its records were never acked, so nothing of it is
// confirmed, and Postgres sends it again to the next session.
func (t *transactions) run(ctx context.Context) {
	defer t.abortOpen()
	var items []txItem
	for {
		if items = t.take(ctx, items, nil); items == nil {
			return
		}
		if !t.produceItems(items) {
			return
		}
		for linger := time.After(endLinger); t.open != nil && t.r.tracker.HasRoom(); {
			more := t.take(ctx, items, linger)
			if more == nil {
				break
			}
			if !t.produceItems(more) {
				return
			}
		}
		if !t.inTxn && t.openCommitted {
			// The Commit of a Postgres transaction the last checkpoint
			// ended inside: a transaction of the checkpoint alone says
			// so (the slot confirms it anyway; the checkpoint follows).
			if err := t.r.pub.BeginTransaction(); err != nil {
				t.r.fail.set(t.fatal(err))
				return
			}
			t.inTxn = true
		}
		if !t.inTxn {
			t.release()
			continue // only Postgres transactions without outbox rows: nothing to commit
		}
		if err := t.finish(ctx); err != nil {
			if ctx.Err() == nil && t.r.fail.err() == nil {
				t.r.fail.set(err)
			}
			return
		}
		if !t.openCommitted {
			t.release()
		}
	}
}

// produceItems produces items into the open Kafka transaction, beginning one at
// the first record; false when the relay must stop.
func (t *transactions) produceItems(items []txItem) bool {
	for _, it := range items {
		switch {
		case it.synced != nil:
			t.syncs = append(t.syncs, it.synced)
			continue
		case it.reset:
			t.last, t.lastTx, t.open, t.session = it.end, it.last, nil, it.session
			continue
		case it.out == nil:
			if it.end >= t.last {
				t.last, t.lastTx = it.end, it.last
			}
			t.open = nil
			continue
		}
		if !t.inTxn {
			if err := t.r.pub.BeginTransaction(); err != nil {
				t.r.fail.set(t.fatal(err))
				return false
			}
			t.inTxn = true
		}
		out := it.out
		t.open = &eoscheckpoint.Open{CommitLSN: out.pos.final, Xid: out.pos.xid, Rows: out.pos.row, CommitTime: out.pos.at}
		t.produce(out, false)
	}
	return true
}

// finish commits the open Kafka transaction with a checkpoint, aborting
// and producing its records again in a new one for as long as the broker
// fails it before the commit was asked for (a record it failed, the
// checkpoint record it refused: the transaction provably did not commit),
// and then acks its records to the tracker. It returns an error only when
// the relay must stop: fenced by a newer process, a failure elsewhere, ctx
// done, or a commit whose outcome is unknown (errCommitUnknown: the
// broker may have applied it, so neither acking its records nor producing
// them again is safe; Relay.Run starts the pipeline again, and the new
// producer's fence and checkpoint read resolve it).
func (t *transactions) finish(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		err := t.waitSettled(ctx)
		if err == nil {
			t.mu.Lock()
			err = t.retry
			t.mu.Unlock()
		}
		if err == nil {
			err = t.commitCheckpoint(ctx)
		}
		if err == nil {
			t.acked()
			return nil
		}
		if errors.Is(err, errCommitUnknown) {
			// Not aborted here: an abort cannot undo a commit the broker
			// applied, and the next producer's InitProducerID completes
			// or aborts whatever this one left (abortOpen skips it).
			t.inTxn = false
			t.r.metrics.KafkaTransactions.WithLabelValues("unknown").Inc()
			t.r.log.Warn("the outcome of the kafka transaction's commit is unknown; acknowledging none of its records and producing none of them again with this producer: the exactly-once pipeline starts again and reads the checkpoint to learn whether it committed",
				"records", len(t.cur), "checkpoint_lsn", t.last.String(), "err", err)
			return err
		}
		if ctx.Err() != nil || t.r.fail.err() != nil || isFenced(err) {
			return t.fatal(err)
		}
		t.aborted.Add(1)
		t.r.metrics.KafkaTransactions.WithLabelValues("aborted").Inc()
		wait := retryBackoff(attempt)
		t.r.log.Warn("kafka transaction failed; aborting it and producing its records again in a new one",
			"records", len(t.cur), "checkpoint_lsn", t.last.String(), "attempt", attempt+1, "retry_in", wait.String(), "err", err)
		if err := t.abort(ctx); err != nil {
			return err
		}
		if err := t.sleep(ctx, wait); err != nil {
			return err
		}
		if err := t.r.pub.BeginTransaction(); err != nil {
			// franz-go made the producer id unusable (the failed commit's
			// answer was final): only a new process, fencing this one and
			// resuming from the checkpoint, can go on.
			return t.fatal(fmt.Errorf("after an aborted kafka transaction the producer cannot go on; stopping, the next start resumes from the checkpoint: %w", err))
		}
		t.inTxn = true
		t.mu.Lock()
		again := t.cur
		t.cur, t.retry = nil, nil
		t.mu.Unlock()
		for _, out := range again {
			switch out.disp {
			case dispOK, dispRetry:
				out.rec.Partition, out.rec.Offset = partitionOf(out), 0
				t.produce(out, false)
			case dispSkipped, dispReplaced:
				t.mu.Lock()
				t.cur = append(t.cur, out) // settled already: its ack (or its dead letter's) comes at commit
				t.mu.Unlock()
			}
		}
	}
}

// abort aborts the open Kafka transaction, trying again (with backoff)
// while the broker cannot be reached: franz-go stays in a transaction it
// could not end, and nothing can begin before it is.
func (t *transactions) abort(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		err := t.r.pub.EndTransaction(context.WithoutCancel(ctx), false)
		if err == nil {
			t.inTxn = false
			return nil
		}
		if isFenced(err) {
			return t.fatal(err)
		}
		wait := retryBackoff(attempt)
		t.r.log.Warn("cannot abort the kafka transaction yet; retrying", "retry_in", wait.String(), "err", err)
		if err := t.sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// sleep waits d before a retry, unless ctx ends or the relay fails first
// (their error).
func (t *transactions) sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return t.fatal(ctx.Err())
	case <-t.r.fail.done:
		return t.r.fail.err()
	case <-time.After(d):
		return nil
	}
}

// partitionOf is the partition to produce a record to again: its own when
// the router placed it, else franz-go's partitioner decides again (the
// same, from the key).
func partitionOf(out *outRecord) int32 {
	if out.manual {
		return out.rec.Partition
	}
	return 0
}

// commitCheckpoint produces the checkpoint record and commits.
func (t *transactions) commitCheckpoint(ctx context.Context) error {
	s := t.session
	cp := eoscheckpoint.Checkpoint{LSN: t.last, SystemID: s.SystemID, Timeline: s.Timeline,
		Database: t.db, Slot: t.r.cfg.Postgres.Slot, Open: t.open, Written: time.Now()}
	if last := t.lastTx; last.CommitLSN != 0 {
		cp.Last = &last
	}
	rec := &kgo.Record{Topic: t.topic, Key: t.key, Value: cp.Marshal()}
	var perr error
	done := make(chan struct{})
	t.r.pub.Client().Produce(context.WithoutCancel(ctx), rec, func(_ *kgo.Record, err error) {
		perr = err
		close(done)
	})
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if perr != nil {
		return fmt.Errorf("producing the checkpoint to %q: %w", t.topic, perr)
	}
	if err := t.r.pub.EndTransaction(context.WithoutCancel(ctx), true); err != nil {
		// Whatever the error, the broker may have applied the commit (an
		// answer lost with its connection, UNKNOWN_SERVER_ERROR after the
		// markers were written, a retry franz-go gave up on): only a
		// fence says for sure that this producer may not go on, and the
		// outcome is then as unknown as here.
		if isFenced(err) {
			return err
		}
		return fmt.Errorf("%w: committing the kafka transaction with the checkpoint at %s: %w", errCommitUnknown, t.last, err)
	}
	t.inTxn = false
	t.openCommitted = cp.Open != nil
	t.committed.Add(1)
	t.lastLSN.Store(uint64(cp.LSN))
	t.r.metrics.KafkaTransactions.WithLabelValues("committed").Inc()
	return nil
}

// acked tells the tracker about every record of the committed
// transaction, as the at-least-once promise does on a broker's ack.
func (t *transactions) acked() {
	t.mu.Lock()
	cur := t.cur
	t.cur = nil
	t.mu.Unlock()
	for _, out := range cur {
		switch out.disp {
		case dispOK:
			t.r.acked(out)
		case dispSkipped:
			t.r.tracker.Ack(out.tx, out.size)
		}
	}
}

// abortOpen aborts a Kafka transaction left open when the loop ends.
func (t *transactions) abortOpen() {
	if !t.inTxn {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = t.r.pub.Client().AbortBufferedRecords(ctx)
	if err := t.r.pub.EndTransaction(ctx, false); err != nil {
		t.r.log.Warn("could not abort the open kafka transaction; the broker aborts it after kafka.transaction_timeout", "err", err)
	} else {
		t.aborted.Add(1)
		t.r.metrics.KafkaTransactions.WithLabelValues("aborted").Inc()
	}
	t.inTxn = false
}

// fatal wraps an error that stops the relay, naming a fence as such.
func (t *transactions) fatal(err error) error {
	if isFenced(err) && !errors.Is(err, ErrFenced) {
		if t.fenceLogged.Swap(true) {
			return fmt.Errorf("%w: transactional id %q: %w", ErrFenced, t.key, err)
		}
		t.r.log.Error("fenced: another walrelay process now produces with this transactional id; stopping without confirming anything more",
			"transactional_id", string(t.key), "err", err)
		return fmt.Errorf("%w: transactional id %q: %w", ErrFenced, t.key, err)
	}
	return err
}

// ErrFenced is returned (wrapped) by Run when a newer process took over
// the transactional id twice within fenceWindow: two processes are live
// and this one may never commit again. A first fence starts the
// exactly-once pipeline again in-process (see Run).
var ErrFenced = errors.New("fenced by a newer walrelay process")

// errCommitUnknown is returned (wrapped) by the transaction loop when
// EndTxn(commit) failed: the broker may or may not have applied it. Run
// never returns it: it starts the exactly-once pipeline again in-process,
// whose fence and checkpoint read resolve the outcome.
var errCommitUnknown = errors.New("kafka transaction commit outcome unknown")

// isFenced reports whether err means the producer may never commit again.
func isFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || errors.Is(err, ErrFenced)
}

// start runs at the first session (stream goroutine, before anything is
// read): it fences older producers with the transactional id (their open
// transaction is aborted; they can commit nothing after this), then reads
// the last committed checkpoint. Fencing first makes the checkpoint final:
// nobody else can commit after it is read.
//
// The read (eoscheckpoint.Read) waits until every transaction with records
// on the checkpoint topic when it began has ended, because another
// deployment's transaction left open there (a process killed or frozen
// before its commit, on a topic deployments share) would otherwise hide
// this relay's newer checkpoints. It waits at most kafka.transaction_timeout:
// a walrelay transaction ends within its transaction timeout, aborted by
// the broker at the latest, so a longer wait is a producer with a longer
// timeout or a hanging transaction, which the error names (the caller
// logs it and reads again).
func (t *transactions) start(ctx context.Context) (eoscheckpoint.Checkpoint, bool, error) {
	if !t.fenced {
		if err := t.fence(ctx); err != nil {
			return eoscheckpoint.Checkpoint{}, false, t.fatal(err)
		}
		t.fenced = true
	}
	rctx, cancel := context.WithTimeout(ctx, t.r.cfg.Kafka.TransactionTimeout)
	defer cancel()
	cp, found, err := eoscheckpoint.Read(rctx, t.topic, string(t.key), t.opts...)
	if err != nil {
		return eoscheckpoint.Checkpoint{}, false, err
	}
	return cp, found, nil
}

// fence initializes the producer id (InitProducerID bumps the epoch of the
// transactional id, which aborts what an older process left open and
// fences it) with a transaction that is aborted: its one record, keyed
// apart from the checkpoints, is never visible.
func (t *transactions) fence(ctx context.Context) error {
	if t.fenceOpen {
		// An earlier attempt could not end its transaction (the broker
		// went away): franz-go is still in it, so end it first.
		if err := t.r.pub.EndTransaction(ctx, false); err != nil {
			return fmt.Errorf("fencing older producers of transactional id %q: %w", t.key, err)
		}
		t.fenceOpen = false
	}
	if err := t.r.pub.BeginTransaction(); err != nil {
		return err
	}
	t.fenceOpen = true
	rec := &kgo.Record{Topic: t.topic, Key: append(append([]byte(nil), t.key...), ".fence"...)}
	if err := t.r.pub.Client().ProduceSync(ctx, rec).FirstErr(); err != nil {
		// The abort's error is returned too: PRODUCER_FENCED there means
		// another process fenced this one while it was fencing (their
		// first sessions started at the same moment, the record came
		// back INVALID_PRODUCER_EPOCH), and this one must stop as any
		// fenced process does, not retry with a client left inside the
		// transaction it could not abort.
		if aerr := t.r.pub.EndTransaction(context.WithoutCancel(ctx), false); aerr != nil {
			return fmt.Errorf("fencing older producers of transactional id %q: %w (%w)", t.key, err, aerr)
		}
		t.fenceOpen = false
		return fmt.Errorf("fencing older producers of transactional id %q: %w", t.key, err)
	}
	if err := t.r.pub.EndTransaction(ctx, false); err != nil {
		return err
	}
	t.fenceOpen = false
	return nil
}

// ensureTopic creates the checkpoint topic when missing (whatever
// kafka.create_topics says: it is walrelay's own, as Connect's internal
// topics are Connect's): one partition, compacted, since only the last
// checkpoint of each key matters. A broker not reachable yet is waited
// for; a refusal fails.
func (t *transactions) ensureTopic(ctx context.Context) error {
	adm := kadm.NewClient(t.r.pub.Client())
	for attempt := 0; ; attempt++ {
		resp, err := adm.CreateTopic(ctx, 1, t.r.cfg.Kafka.TopicReplicationFactor, map[string]*string{"cleanup.policy": ptr("compact")}, t.topic)
		if err == nil {
			err = resp.Err
		}
		switch {
		case err == nil:
			t.r.log.Info("created the checkpoint topic", "topic", t.topic)
		case errors.Is(err, kerr.TopicAlreadyExists):
		case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed):
			// As for routed topics: it may exist; preparing it says.
			t.r.log.Warn("not allowed to create the checkpoint topic; it must exist", "topic", t.topic, "err", err)
		case ctx.Err() != nil:
			return fmt.Errorf("creating checkpoint topic %q: %w", t.topic, ctx.Err())
		default:
			var ke *kerr.Error
			if errors.As(err, &ke) && !ke.Retriable {
				return fmt.Errorf("creating checkpoint topic %q: %w", t.topic, err)
			}
			wait := retryBackoff(attempt)
			t.r.log.Warn("cannot create the checkpoint topic yet; retrying", "topic", t.topic, "retry_in", wait.String(), "err", err)
			if err := t.sleep(ctx, wait); err != nil {
				return fmt.Errorf("creating checkpoint topic %q: %w", t.topic, err)
			}
			continue
		}
		if err := t.r.pub.Prepare(ctx, t.topic); err != nil {
			return fmt.Errorf("checkpoint topic: %w", err)
		}
		return nil
	}
}

func ptr[T any](v T) *T { return &v }

// retryBackoff is the wait before attempt (0-based) of something
// exactly-once delivery retries against Kafka: 250ms, doubling to 30s.
func retryBackoff(attempt int) time.Duration {
	return min(250*time.Millisecond<<min(attempt, 7), 30*time.Second)
}
