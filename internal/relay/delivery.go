// The delivery mode (relay.delivery), as a type: how a record reaches
// Kafka and when the tracker hears of it. New chooses one, once.

package relay

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/checkpoint"
	"github.com/walrelay/walrelay/internal/eoscheckpoint"
	"github.com/walrelay/walrelay/internal/publisher"
	"github.com/walrelay/walrelay/internal/replication"
	"github.com/walrelay/walrelay/internal/resume"
)

// delivery is relay.delivery: atLeastOnce acks a record to the tracker
// when the broker acknowledges it; transactions (exactly_once, txn.go)
// produces records in Kafka transactions with a checkpoint and acks them
// when their transaction commits. Everything in the relay that differs
// by mode is one of these methods.
type delivery interface {
	// send hands on a record of the Postgres transaction being read
	// (stream goroutine), tracked already; pos is where it is in the WAL.
	send(out *outRecord, pos rowPos)
	// replace produces the dead letter that stands for a refused record,
	// in its place in the tracker (dead-letter worker).
	replace(out *outRecord)
	// settle is a record's outcome, on the promise's goroutine: disp is
	// what refused made of err (dispOK: acknowledged).
	settle(out *outRecord, disp disposition, err error)
	// failed handles a record (or a dead letter) Kafka failed with err,
	// which is no verdict on the record itself (it has no relay.on_error
	// class), and reports whether it did: exactly-once produces it again
	// in a new Kafka transaction, or stops the relay when this producer
	// was fenced. False: the caller stops the relay (franz-go gave up).
	failed(out *outRecord, err error) bool
	// commit is the end of a Postgres transaction (its Commit message, or
	// the snapshot's rows), named by last for the checkpoint (stream
	// goroutine).
	commit(end pglogrepl.LSN, last eoscheckpoint.Last)

	// connect, at startup once connected to the server (prepare, Heal),
	// builds what the mode needs of it: exactly-once derives the
	// transactional id and builds the producer.
	connect(ctx context.Context, conn *pgx.Conn) error
	// prepareKafka, at startup once the brokers are known to let walrelay
	// in, creates what the mode keeps on Kafka: the checkpoint topic.
	prepareKafka(ctx context.Context) error
	// run is the mode's own goroutine, until ctx ends (after the stream
	// stopped) or the relay fails: exactly-once's transaction loop.
	run(ctx context.Context)

	// historyChanged is a session on another WAL history than the last
	// one's (SessionStart), whose slot is at s.SlotConfirmed.
	historyChanged(s replication.Session)
	// streaming is a session that got the slot (SessionStreaming):
	// exactly-once, at the first one and the first after a change of WAL
	// history, fences older producers and reads the checkpoint, and seeds
	// rs with what it covers.
	streaming(ctx context.Context, s replication.Session, rs *resume.State) error
	// restart says where the next checkpoints start from (at, ending the
	// transaction last when it is known) and the session they belong to:
	// a disproved checkpoint, a heal's slot.
	restart(at pglogrepl.LSN, s replication.Session, last eoscheckpoint.Last)
	// fenceOlder fences older producers of the transactional id (a heal,
	// before it reads what is on Kafka).
	fenceOlder(ctx context.Context) error
	// drained waits until everything committed before the call is on
	// Kafka for good, checkpoint included (a heal, before it records).
	drained(ctx context.Context) error

	// noDuplicates reports whether the mode promises consumers no
	// duplicates (exactly-once, to read_committed consumers): what would
	// publish some knowingly (a backfill, a heal in place of a slot
	// promoted past walrelay's record) is refused.
	noDuplicates() bool
	// report fills the mode's part of /status.
	report(st *Status)
}

// txnCounts are the Kafka transactions of exactly-once delivery, read at
// scrape time and by /status; an in-process restart carries them on. They
// stay 0 with at-least-once delivery.
type txnCounts struct {
	committed, aborted atomic.Uint64
	// lastLSN is the position the last committed checkpoint recorded.
	lastLSN atomic.Uint64
}

// carryOn takes prev's counts (restart).
func (c *txnCounts) carryOn(prev *txnCounts) {
	c.committed.Store(prev.committed.Load())
	c.aborted.Store(prev.aborted.Load())
	c.lastLSN.Store(prev.lastLSN.Load()) // walrelay_checkpoint_lsn_bytes until the next commit
}

// atLeastOnce is relay.delivery=at_least_once: a record is produced as it
// is read and acked to the tracker once the broker acknowledged it;
// consumers dedupe on the event id.
type atLeastOnce struct {
	pub     *publisher.Publisher
	clock   monoClock
	tracker *checkpoint.Tracker
	// ack is a record on Kafka for good (Relay.acked).
	ack func(*outRecord)
}

func newAtLeastOnce(r *Relay, pub *publisher.Publisher) *atLeastOnce {
	return &atLeastOnce{pub: pub, clock: r.clock, tracker: r.tracker, ack: r.acked}
}

func (d *atLeastOnce) send(out *outRecord, _ rowPos) {
	out.produced = d.clock.now()
	d.pub.Produce(&out.rec)
}

func (d *atLeastOnce) replace(out *outRecord) {
	out.produced = d.clock.now()
	d.pub.Produce(&out.rec)
}

// settle acks an acknowledged record, and a refused one skipped by policy
// log; the others stay unacked (their dead letter is, or the relay
// stops). refused keeps nothing of a record's bytes (a dead letter is a
// copy), so the receive buffer they are in can go.
func (d *atLeastOnce) settle(out *outRecord, disp disposition, _ error) {
	switch disp {
	case dispOK:
		d.ack(out)
	case dispSkipped:
		d.tracker.Ack(out.tx, out.size)
		out.release()
	default:
		out.release()
	}
}

func (d *atLeastOnce) failed(*outRecord, error) bool { return false }

func (d *atLeastOnce) commit(pglogrepl.LSN, eoscheckpoint.Last) {}

// connect has nothing to do: New built the producer.
func (d *atLeastOnce) connect(context.Context, *pgx.Conn) error { return nil }

func (d *atLeastOnce) prepareKafka(context.Context) error { return nil }

// run returns at once: records are acked from their promises.
func (d *atLeastOnce) run(context.Context) {}

func (d *atLeastOnce) historyChanged(replication.Session) {}

// streaming has nothing to read: the slot's position is where the
// session starts.
func (d *atLeastOnce) streaming(context.Context, replication.Session, *resume.State) error {
	return nil
}

func (d *atLeastOnce) restart(pglogrepl.LSN, replication.Session, eoscheckpoint.Last) {}

func (d *atLeastOnce) fenceOlder(context.Context) error { return nil }

// drained has nothing to wait for beyond the tracker's acks.
func (d *atLeastOnce) drained(context.Context) error { return nil }

func (d *atLeastOnce) noDuplicates() bool { return false }

func (d *atLeastOnce) report(*Status) {}
