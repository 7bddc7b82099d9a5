package checkpoint

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
)

// Limits caps what may be in flight, that is produced and not yet acked.
type Limits struct {
	// MaxRecords caps records in flight; <= 0 means no cap.
	MaxRecords int
	// MaxBytes caps bytes in flight; <= 0 means no cap. A single message
	// larger than MaxBytes is still admitted, alone: WaitRoomFor holds it
	// until nothing is in flight.
	MaxBytes int64
}

// txState is where a Tx is in its life. The zero value is txFree so that a Tx
// not obtained from Begin is rejected.
type txState uint8

const (
	txFree      txState = iota // on the free list, or never issued by Begin
	txOpen                     // between Begin and Commit/Abort
	txCommitted                // Commit seen, waiting in the queue for acks
	txAborted                  // Abort seen, waiting for acks of produced records
)

// Tx is the handle of one transaction in flight, returned by Begin.
type Tx struct {
	pending int           // records added and not yet acked
	bytes   int64         // bytes added and not yet acked
	end     pglogrepl.LSN // TransactionEndLSN (raised by folded transactions)
	covers  int           // transactions this entry stands for: itself + folded ones
	commit  int64         // commit time (BeginAt), unix nanoseconds; 0: unknown
	state   txState
}

// freeListMax bounds how many idle Tx handles are kept for reuse.
const freeListMax = 256

// Tracker tracks transactions from Begin to confirmation. Create it with New.
type Tracker struct {
	limits Limits

	// confirmed is written only with mu held; read lock-free by Confirmed.
	confirmed atomic.Uint64

	mu      sync.Mutex
	records int   // records in flight, over all transactions
	bytes   int64 // bytes in flight, over all transactions
	open    int   // transactions between Begin and Commit/Abort
	txs     int   // transactions tracked and not yet confirmed or dropped
	queue   ring  // committed transactions waiting for acks, commit order
	current *Tx   // the transaction last begun, while open
	free    []*Tx // recycled handles
	roomCh  chan struct{}
	drainCh chan struct{}
}

// New returns a Tracker that enforces limits through WaitRoom. Confirmed
// starts at 0 until SetStart.
func New(limits Limits) *Tracker {
	t := &Tracker{limits: limits}
	t.queue.init(16)
	t.free = make([]*Tx, 0, 16)
	return t
}

// Begin starts tracking a transaction at its Begin message and returns its
// handle. Its commit time is unknown: Oldest does not see it (BeginAt).
func (t *Tracker) Begin() *Tx { return t.BeginAt(time.Time{}) }

// BeginAt is Begin for a transaction committed at commit (the Begin
// message's commit timestamp), which Oldest reports while the transaction
// has records not yet acknowledged.
func (t *Tracker) BeginAt(commit time.Time) *Tx {
	var at int64
	if !commit.IsZero() {
		at = commit.UnixNano()
	}
	t.mu.Lock()
	var tx *Tx
	if n := len(t.free); n > 0 {
		tx = t.free[n-1]
		t.free[n-1] = nil
		t.free = t.free[:n-1]
	} else {
		tx = new(Tx)
	}
	*tx = Tx{state: txOpen, covers: 1, commit: at}
	t.current = tx
	t.open++
	t.txs++
	t.mu.Unlock()
	return tx
}

// Add records that one record of tx, of the given size in bytes, was handed
// to the producer. It never blocks; call WaitRoom before reading more from
// the stream to respect the limits. It panics if tx is not open.
func (t *Tracker) Add(tx *Tx, bytes int) {
	t.mu.Lock()
	if tx.state != txOpen {
		t.mu.Unlock()
		panic("checkpoint: Add on a transaction that is not open (after Commit/Abort, or not from Begin)")
	}
	tx.pending++
	tx.bytes += int64(bytes)
	t.records++
	t.bytes += int64(bytes)
	t.mu.Unlock()
}

// Ack records that one record of tx, of the size given to Add, was durably
// acked by the broker. It may be called from any goroutine, before or after
// Commit. It panics when tx has no unacked record (more Acks than Adds) or
// when the byte counts of a completed transaction do not match its Adds.
func (t *Tracker) Ack(tx *Tx, bytes int) {
	t.mu.Lock()
	if tx.pending <= 0 || tx.state == txFree {
		t.mu.Unlock()
		panic("checkpoint: Ack called more times than Add for a transaction (or on a finished transaction)")
	}
	tx.pending--
	tx.bytes -= int64(bytes)
	t.records--
	t.bytes -= int64(bytes)
	if tx.pending == 0 {
		if tx.bytes != 0 {
			t.mu.Unlock()
			panic("checkpoint: Ack byte counts do not match Add byte counts for a transaction")
		}
		switch tx.state {
		case txCommitted:
			if t.queue.front() == tx {
				t.advanceLocked()
			}
		case txAborted:
			t.txs--
			t.recycleLocked(tx)
		}
	}
	if t.roomCh != nil && t.hasRoomLocked() {
		close(t.roomCh)
		t.roomCh = nil
	}
	if t.drainCh != nil && t.records == 0 {
		close(t.drainCh)
		t.drainCh = nil
	}
	t.mu.Unlock()
}

// Commit records tx's Commit message; end is its TransactionEndLSN. Once
// every record of tx and every earlier transaction is acked, Confirmed
// reaches end. It panics if tx is not open.
func (t *Tracker) Commit(tx *Tx, end pglogrepl.LSN) {
	t.mu.Lock()
	if tx.state != txOpen {
		t.mu.Unlock()
		panic("checkpoint: Commit on a transaction that is not open (double Commit, Commit after Abort, or not from Begin)")
	}
	t.open--
	if t.current == tx {
		t.current = nil
	}
	tx.end = end
	switch {
	case tx.pending > 0:
		tx.state = txCommitted
		t.queue.push(tx)
	case t.queue.len() == 0:
		// Nothing ahead and nothing of its own in flight: done now. This is
		// the hot path of a busy database; it allocates nothing.
		t.raiseLocked(end)
		t.txs--
		t.recycleLocked(tx)
	default:
		// Done, but behind a transaction still waiting for acks: fold it into
		// the tail so it costs no queue slot and Confirmed jumps to end as
		// soon as everything ahead of it is acked.
		tail := t.queue.back()
		if end > tail.end {
			tail.end = end
		}
		tail.covers++
		t.recycleLocked(tx)
	}
	t.mu.Unlock()
}

// Abort records that the stream broke before tx's Commit arrived. tx will
// confirm nothing and does not hold back later transactions; its produced
// records stay in flight until acked (see the package doc for why this is
// safe). Abort(nil) is a no-op, so a caller may abort "the open transaction,
// if any". It panics if tx is neither nil nor open.
func (t *Tracker) Abort(tx *Tx) {
	if tx == nil {
		return
	}
	t.mu.Lock()
	if tx.state != txOpen {
		t.mu.Unlock()
		panic("checkpoint: Abort on a transaction that is not open (after Commit/Abort, or not from Begin)")
	}
	t.open--
	if t.current == tx {
		t.current = nil
	}
	if tx.pending == 0 {
		t.txs--
		t.recycleLocked(tx)
	} else {
		tx.state = txAborted
	}
	t.mu.Unlock()
}

// Confirmed returns the LSN safe to confirm to Postgres: the end LSN of the
// newest committed transaction such that it and every earlier one are fully
// acked, or the start/idle position if higher. It never decreases, except
// by Reset.
func (t *Tracker) Confirmed() pglogrepl.LSN {
	return pglogrepl.LSN(t.confirmed.Load())
}

// ObserveWALEnd takes a keepalive's server WAL end. When the tracker is idle —
// no record in flight, no transaction open, none committed and waiting —
// Confirmed becomes max(Confirmed, lsn); otherwise the call is ignored. The
// caller must pass only WAL ends of the current stream, after handling every
// message received before the keepalive.
func (t *Tracker) ObserveWALEnd(lsn pglogrepl.LSN) {
	t.mu.Lock()
	if t.records == 0 && t.open == 0 && t.queue.len() == 0 {
		t.raiseLocked(lsn)
	}
	t.mu.Unlock()
}

// SetStart sets the initial confirmed position, normally the slot's
// confirmed_flush_lsn, and raises it when the slot is found further at a
// session's start (another process confirmed more). It only raises
// Confirmed.
func (t *Tracker) SetStart(lsn pglogrepl.LSN) {
	t.mu.Lock()
	t.raiseLocked(lsn)
	t.mu.Unlock()
}

// Reset sets Confirmed to lsn, lower or higher, for a stream that now
// reads another WAL history (another system or timeline), where the LSNs
// tracked so far mean nothing: lsn is the new server's slot position. It
// is legal only when the tracker is idle: no transaction open, no record
// in flight, no transaction waiting for acks. Anything still tracked
// would later raise Confirmed to a position of the old history, so Reset
// panics instead.
func (t *Tracker) Reset(lsn pglogrepl.LSN) {
	t.mu.Lock()
	if t.records != 0 || t.open != 0 || t.txs != 0 {
		records, open, txs := t.records, t.open, t.txs
		t.mu.Unlock()
		panic(fmt.Sprintf("checkpoint: Reset while %d records are in flight, %d transactions open and %d tracked", records, open, txs))
	}
	t.confirmed.Store(uint64(lsn))
	t.mu.Unlock()
}

// InFlight returns the records and bytes added and not yet acked, including
// those of aborted transactions.
func (t *Tracker) InFlight() (records int, bytes int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.records, t.bytes
}

// Pending returns how many transactions are tracked and not yet confirmed:
// open ones, committed ones waiting for their acks or for earlier ones, and
// aborted ones whose records are still in flight.
func (t *Tracker) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.txs
}

// Oldest returns the commit time of the oldest transaction with a record
// added and not yet acknowledged, and false when there is none: the age of
// the oldest event handed on and not yet on Kafka (the unpublished-event
// alarm). Committed transactions wait in commit order and the one at the
// front always has a record unacknowledged, so it is the oldest; with none
// waiting, it is the open transaction if it has one. A transaction begun
// without a commit time (Begin) and an aborted one (Postgres sends it
// again, tracked anew) are not reported. Called at scrape time, not on
// the stream's path.
func (t *Tracker) Oldest() (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var at int64
	if front := t.queue.front(); front != nil {
		at = front.commit
	} else if tx := t.current; tx != nil && tx.pending > 0 && tx.commit != 0 {
		at = tx.commit
	}
	if at == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, at), true
}

// advanceLocked pops every finished transaction off the queue's front and
// raises Confirmed to the newest one's end.
func (t *Tracker) advanceLocked() {
	for t.queue.len() > 0 {
		tx := t.queue.front()
		if tx.pending > 0 {
			return
		}
		t.queue.pop()
		t.raiseLocked(tx.end)
		t.txs -= tx.covers
		t.recycleLocked(tx)
	}
}

func (t *Tracker) raiseLocked(lsn pglogrepl.LSN) {
	if uint64(lsn) > t.confirmed.Load() {
		t.confirmed.Store(uint64(lsn))
	}
}

func (t *Tracker) recycleLocked(tx *Tx) {
	*tx = Tx{}
	if len(t.free) < freeListMax {
		t.free = append(t.free, tx)
	}
}
