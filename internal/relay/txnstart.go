// Exactly-once delivery's start: the transactional producer, the fence
// of older producers, the checkpoint topic, and where a session starts
// from (the checkpoint, proven by package resume). txn.go holds the
// transaction loop.

package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/eoscheckpoint"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/replication"
	"github.com/walrelay/walrelay/internal/resume"
)

// connect builds the transactional producer of exactly-once delivery,
// once the server tells what its id is derived from: the database and the
// system identifier (postgres.TransactionalID), so that relays of two
// clusters whose databases and slots have the same names neither fence
// each other nor share a checkpoint key. A producer built already is
// kept.
func (t *transactions) connect(ctx context.Context, conn *pgx.Conn) error {
	if t.pub != nil {
		return nil
	}
	id, err := postgres.TransactionalID(ctx, conn, t.cfg)
	if err != nil {
		return fmt.Errorf("deriving the transactional id: %w", err)
	}
	if err := t.use(id); err != nil {
		return err
	}
	t.log.Info("exactly-once delivery: records go into kafka transactions with a checkpoint", "transactional_id", id.ID, "checkpoint_topic", t.cfg.Relay.CheckpointTopic)
	return nil
}

// use sets the transactional id and what it was derived from, and builds
// the producer with it.
func (t *transactions) use(id postgres.TxnID) error {
	t.key, t.db = []byte(id.ID), id.Database
	pub, err := t.build(id.ID)
	if err != nil {
		return err
	}
	t.pub = pub
	t.idSet.Store(true)
	return nil
}

// prepareKafka creates the checkpoint topic (ensureTopic).
func (t *transactions) prepareKafka(ctx context.Context) error { return t.ensureTopic(ctx) }

// historyChanged, once the first session fenced, queues the new slot's
// position as where checkpoints start from, and has the next session that
// streams read the checkpoint again: a promoted standby's history holds
// the old timeline up to the promotion, and what the last checkpoint
// covers there is on Kafka and in this WAL, and stays skipped once
// proven.
func (t *transactions) historyChanged(s replication.Session) {
	if !t.fenced {
		return
	}
	t.restart(s.SlotConfirmed, s, eoscheckpoint.Last{})
	t.reread = true
}

// streaming starts from the checkpoint at the first session that got the
// slot (startFromCheckpoint), and at the first one after a change of WAL
// history (historyChanged). Other sessions keep this process's own state,
// which is newer than any checkpoint. Only a process holding the slot
// fences: a standby that found the slot free between two sessions of the
// active one, and lost the race for it, never stops the active one.
func (t *transactions) streaming(ctx context.Context, s replication.Session, rs *resume.State) error {
	if t.fenced && !t.reread {
		return nil
	}
	if err := t.startFromCheckpoint(ctx, s, rs); err != nil {
		return err
	}
	t.reread = false
	return nil
}

// startFromCheckpoint, at the first session of exactly-once delivery
// holding the slot, fences older producers of the transactional id and reads the last
// committed checkpoint (transactions.start), then skips what it covers:
// every transaction committed before its LSN, and the INSERTs of the
// transaction it ended inside that were published. The slot may be
// behind it (a process killed between its Kafka commit and its next
// status update). Those skips are provisional until the slot proves the
// checkpoint belongs to this WAL (internal/resume, SeedFrom): a server restored
// from a snapshot keeps its system id and timeline, and its new
// transactions take the LSNs the checkpoint covers. Meanwhile nothing
// past the slot's position is confirmed (the tracker is not raised, idle
// keepalives and heartbeats are held back: WALEnd); once proven the
// tracker is raised to the checkpoint, so it is confirmed too; disproved,
// the checkpoint is forgotten and the session starts again from the slot
// (disprove). A checkpoint of another WAL history (system id, a timeline
// not in the server's history up to the checkpoint's LSN: a promoted
// standby's history holds its old primary's timeline up to the promotion;
// or beyond the server's WAL), or one that would skip something and
// names no last transaction to prove it by, is not used: everything the
// slot sends is published, duplicates rather than a loss. Kafka being
// unreachable, or another producer's transaction holding the checkpoint
// topic's end, is retried, reading nothing from the slot meanwhile; a
// checkpoint that does not parse (eoscheckpoint.ErrUnreadable) stops the
// relay.
func (t *transactions) startFromCheckpoint(ctx context.Context, s replication.Session, rs *resume.State) error {
	var cp eoscheckpoint.Checkpoint
	var found bool
	for attempt := 0; ; attempt++ {
		var err error
		if cp, found, err = t.start(ctx); err == nil {
			break
		} else if isFenced(err) || ctx.Err() != nil || errors.Is(err, eoscheckpoint.ErrUnreadable) {
			return err
		}
		wait := retryBackoff(attempt)
		attrs := []any{"topic", t.topic, "retry_in", wait.String(), "err", err}
		if errors.Is(err, eoscheckpoint.ErrHeld) {
			attrs = append(attrs, "why", "a transaction another producer left open on the checkpoint topic may hide newer checkpoints of this relay; nothing is read from the slot until it ends")
		}
		t.log.Warn("cannot read the checkpoint yet; retrying", attrs...)
		if err := t.sleep(ctx, wait); err != nil {
			return err
		}
	}
	at := s.SlotConfirmed
	var last *eoscheckpoint.Last // the transaction ending at at, when known
	attrs := []any{"checkpoint_lsn", cp.LSN.String(), "checkpoint_system_id", cp.SystemID, "checkpoint_timeline", cp.Timeline, "server", s.String()}
	switch {
	case !found:
		t.log.Info("no checkpoint yet: publishing from the slot's position", "slot_confirmed_flush_lsn", at.String(), "transactional_id", string(t.key))
	case cp.SystemID != s.SystemID, !s.HasWAL(cp.Timeline, cp.LSN):
		t.log.Warn("the checkpoint belongs to another WAL history; not using it: everything the slot sends is published, and events already on Kafka may be published again", attrs...)
	default:
		rc := resume.Checkpoint{Through: cp.LSN}
		if l := cp.Last; l != nil {
			rc.Last = &resume.Mark{CommitLSN: l.CommitLSN, Xid: l.Xid, CommitTime: l.CommitTime}
			attrs = append(attrs, "last_commit_lsn", l.CommitLSN.String(), "last_xid", l.Xid)
		}
		if o := cp.Open; o != nil {
			rc.Open, rc.Rows = &resume.Mark{CommitLSN: o.CommitLSN, Xid: o.Xid, CommitTime: o.CommitTime}, o.Rows
			attrs = append(attrs, "open_commit_lsn", o.CommitLSN.String(), "open_xid", o.Xid, "open_rows", o.Rows)
		}
		attrs = append(attrs, "slot_confirmed_flush_lsn", s.SlotConfirmed.String())
		if cp.LSN > s.SlotConfirmed && cp.Last != nil {
			rc.Earlier = t.earlierCheckpoints(ctx, cp)
		}
		if why := rs.SeedFrom(rc, s.SlotConfirmed); why != "" {
			t.log.Warn("the checkpoint is not proven on this server's WAL: "+why+"; publishing everything the slot sends, and events already on Kafka may be published again", attrs...)
			break
		}
		if !rs.Proving() {
			t.log.Info("the checkpoint skips nothing the slot sends: publishing from the slot's position", attrs...)
			if cp.LSN == at {
				last = cp.Last
			}
			break
		}
		// The txn loop's position: no checkpoint is written before the
		// proof (everything before it is skipped), none after a disproof
		// (disprove restarts it from the slot).
		if cp.LSN >= at {
			at, last = cp.LSN, cp.Last
		}
		t.log.Info("resuming from the checkpoint: transactions it covers are skipped once the slot proves it belongs to this WAL, and nothing past the slot's position is confirmed before", attrs...)
	}
	var lastTx eoscheckpoint.Last
	if last != nil {
		lastTx = *last
	}
	t.restart(at, s, lastTx)
	return nil
}

// earlierCheckpoints reads the checkpoints of the transactional id written
// before cp that the topic still holds (eoscheckpoint.History), as points
// the stream may prove on the way to cp: if cp is disproved (a restored
// server), the newest of them proven still says what was published. Best
// effort: without them, a disproof publishes everything the slot sends.
func (t *transactions) earlierCheckpoints(ctx context.Context, cp eoscheckpoint.Checkpoint) []resume.Point {
	all, err := eoscheckpoint.History(ctx, t.topic, string(t.key), t.opts...)
	if err != nil {
		t.log.Warn("cannot read the earlier checkpoints; should the last one not be proven, everything the slot sends is published", "topic", t.topic, "err", err)
		return nil
	}
	var points []resume.Point
	for _, c := range all {
		if c.Last != nil && c.SystemID == cp.SystemID && c.Timeline == cp.Timeline && c.LSN < cp.LSN {
			points = append(points, resume.Point{Through: c.LSN, Last: resume.Mark{CommitLSN: c.Last.CommitLSN, Xid: c.Last.Xid, CommitTime: c.Last.CommitTime}})
		}
	}
	return points
}

// fenceOlder fences older producers of the transactional id (fence),
// naming a fence of this one as such.
func (t *transactions) fenceOlder(ctx context.Context) error {
	if err := t.fence(ctx); err != nil {
		return t.fatal(err)
	}
	return nil
}

// failed: a record Kafka failed for no reason of its own is produced again
// in the next Kafka transaction (this one is aborted), unless this
// producer was fenced: the relay then stops as fenced, or, for a dead
// letter, as for any dead letter Kafka refused (false).
func (t *transactions) failed(out *outRecord, err error) bool {
	switch {
	case isFenced(err) && out.dead != nil:
		return false
	case isFenced(err):
		t.fail.set(t.fatal(err))
	case out.dead != nil:
		o := out.dead.letter.Origin
		t.log.Warn("kafka failed a dead letter of a transaction; the transaction is retried", "topic", out.rec.Topic, "lsn", o.LSN.String(), "outbox_id", o.ID, "err", err)
	default:
		// Not about the record: its Kafka transaction is aborted and
		// the record produced again in the next one.
		o := out.origin()
		t.log.Warn("kafka failed a record of a transaction; the transaction is retried", "topic", out.rec.Topic, "lsn", o.LSN.String(), "outbox_id", o.ID, "err", err)
	}
	return true
}

// noDuplicates: read_committed consumers see each event once.
func (t *transactions) noDuplicates() bool { return true }

// report fills /status's Kafka transaction counts, checkpoint position
// and, once the startup derived it, transactional id.
func (t *transactions) report(st *Status) {
	c, a := t.counts.committed.Load(), t.counts.aborted.Load()
	st.KafkaTransactionsCommitted, st.KafkaTransactionsAborted = &c, &a
	st.CheckpointLSN = pglogrepl.LSN(t.counts.lastLSN.Load()).String()
	if t.idSet.Load() {
		st.TransactionalID = string(t.key)
	}
}

// fatal wraps an error that stops the relay, naming a fence as such.
func (t *transactions) fatal(err error) error {
	if isFenced(err) && !errors.Is(err, ErrFenced) {
		if t.fenceLogged.Swap(true) {
			return fmt.Errorf("%w: transactional id %q: %w", ErrFenced, t.key, err)
		}
		t.log.Error("fenced: another walrelay process now produces with this transactional id; stopping without confirming anything more",
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
	rctx, cancel := context.WithTimeout(ctx, t.cfg.Kafka.TransactionTimeout)
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
		if err := t.pub.EndTransaction(ctx, false); err != nil {
			return fmt.Errorf("fencing older producers of transactional id %q: %w", t.key, err)
		}
		t.fenceOpen = false
	}
	if err := t.pub.BeginTransaction(); err != nil {
		return err
	}
	t.fenceOpen = true
	rec := &kgo.Record{Topic: t.topic, Key: append(append([]byte(nil), t.key...), ".fence"...)}
	if err := t.pub.ProduceSync(ctx, rec); err != nil {
		// The abort's error is returned too: PRODUCER_FENCED there means
		// another process fenced this one while it was fencing (their
		// first sessions started at the same moment, the record came
		// back INVALID_PRODUCER_EPOCH), and this one must stop as any
		// fenced process does, not retry with a client left inside the
		// transaction it could not abort.
		if aerr := t.pub.EndTransaction(context.WithoutCancel(ctx), false); aerr != nil {
			return fmt.Errorf("fencing older producers of transactional id %q: %w (%w)", t.key, err, aerr)
		}
		t.fenceOpen = false
		return fmt.Errorf("fencing older producers of transactional id %q: %w", t.key, err)
	}
	if err := t.pub.EndTransaction(ctx, false); err != nil {
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
	for attempt := 0; ; attempt++ {
		err := t.pub.CreateTopic(ctx, t.topic, 1, t.cfg.Kafka.TopicReplicationFactor, map[string]*string{"cleanup.policy": ptr("compact")})
		switch {
		case err == nil:
			t.log.Info("created the checkpoint topic", "topic", t.topic)
		case errors.Is(err, kerr.TopicAlreadyExists):
		case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed):
			// As for routed topics: it may exist; preparing it says.
			t.log.Warn("not allowed to create the checkpoint topic; it must exist", "topic", t.topic, "err", err)
		case ctx.Err() != nil:
			return fmt.Errorf("creating checkpoint topic %q: %w", t.topic, ctx.Err())
		default:
			var ke *kerr.Error
			if errors.As(err, &ke) && !ke.Retriable {
				return fmt.Errorf("creating checkpoint topic %q: %w", t.topic, err)
			}
			wait := retryBackoff(attempt)
			t.log.Warn("cannot create the checkpoint topic yet; retrying", "topic", t.topic, "retry_in", wait.String(), "err", err)
			if err := t.sleep(ctx, wait); err != nil {
				return fmt.Errorf("creating checkpoint topic %q: %w", t.topic, err)
			}
			continue
		}
		if err := t.pub.Prepare(ctx, t.topic); err != nil {
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
