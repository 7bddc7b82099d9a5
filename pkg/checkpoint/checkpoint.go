// Package checkpoint decides which WAL position walrelay may confirm to Postgres.
//
// Role: it is the only source of the flush/apply/write positions that the
// replication package sends in standby status updates (GUIDE invariant 1), it
// computes the contiguous watermark over out-of-order Kafka acks (invariant 2),
// lets an idle stream advance to the server's WAL end (invariant 3), and bounds
// the records and bytes in flight (invariant 6).
//
// In: from the replication goroutine, one call per stream event — Begin at a
// transaction's Begin message, Add for every record of it handed to the
// producer, Commit with the Commit message's TransactionEndLSN, Abort when the
// stream broke before the Commit arrived, ObserveWALEnd with a keepalive's
// server WAL end, SetStart with the slot's confirmed_flush_lsn, Reset with
// it when the stream now reads another WAL history. From the producer's ack
// callbacks, on any goroutine, Ack for every record the broker durably
// acked.
//
// Out: Confirmed, the LSN that is safe to confirm; WaitRoom, the backpressure
// gate the replication goroutine passes before it reads more from the slot,
// and WaitRoomFor, which holds a message larger than the byte cap until
// nothing is in flight; WaitDrained for shutdown; InFlight and Pending for
// metrics and logs.
//
// What it does not do: it does not talk to Postgres or Kafka, send status
// updates, retry, log, or register metrics (the caller exports InFlight and
// Pending); it does not know about records that failed to produce — a record
// that is never acked holds the watermark back forever, which is the safe
// failure (the relay must stop or dead-letter it, GUIDE invariant 4); and it
// never blocks in Add: the cap is enforced by the caller through WaitRoom.
//
// # Design
//
// One mutex guards all state. Committed transactions that still wait for
// acks sit in a ring buffer in commit order; each Tx counts its own unacked
// records, so Ack is a decrement plus, when that was the last record of the
// transaction at the front of the queue, popping every finished transaction
// off the front (amortized O(1) per transaction). A transaction whose records
// are all acked by its Commit (including one with no records) never enters
// the queue: with an empty queue it advances Confirmed at once, otherwise it
// is folded into the queue's tail, whose end LSN it raises, so that when the
// tail completes Confirmed jumps straight to the newest finished transaction.
// Tx handles are recycled through a small free list, so the steady state
// allocates nothing per transaction or per record. Confirmed is also stored in
// an atomic so that status updates do not contend for the mutex.
//
// Waiters (WaitRoom, WaitDrained) sleep on a channel created under the mutex
// when they find no room; Ack closes it under the same mutex once the awaited
// condition holds, so no wakeup is lost and no goroutine is started.
//
// # Abort
//
// A transaction whose Commit never arrived has no end LSN, so it confirms
// nothing. It is not part of the commit-order queue and does not hold back
// the watermark: after a stream break the replication package restarts from
// the slot, which is at most Confirmed, and Confirmed is at most the end of
// the last committed transaction before the aborted one. Postgres therefore
// sends the aborted transaction again, and the re-sent copy is tracked as a
// Tx of its own that must be fully acked before any LSN at or past its end is
// confirmed. The aborted copy's records are duplicates (delivery is
// at-least-once) whose loss would lose nothing, so waiting for them before
// confirming later transactions would protect nothing; if they are never
// acked they would instead stall the watermark forever. They do stay counted
// in InFlight until acked — that memory is really in use — which also keeps
// ObserveWALEnd from treating the tracker as idle and keeps WaitDrained
// waiting for them. Committed transactions queued before the aborted one are
// unaffected: they were committed and are confirmed once acked.
//
// # Contract
//
// Begin, Add, Commit, Abort, ObserveWALEnd, SetStart and Reset are called
// from the replication goroutine; Ack from any goroutine; Confirmed,
// InFlight, Pending, WaitRoom, WaitRoomFor and WaitDrained from any
// goroutine. Add must be called before the
// record is handed to the producer, and Ack exactly once per Add with the
// same byte count. A Tx must not be used by the replication goroutine after
// Commit or Abort, nor by anyone after the Ack of its last record once it is
// committed or aborted: the handle is then recycled. Violations that the
// tracker can detect cheaply — more Acks than Adds, Add or Commit on a Tx that
// is not open, byte counts that do not add up, Reset while anything is
// tracked — panic with a message starting
// with "checkpoint:", because continuing could confirm unacked WAL.
package checkpoint

import (
	"context"
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
// handle.
func (t *Tracker) Begin() *Tx {
	t.mu.Lock()
	var tx *Tx
	if n := len(t.free); n > 0 {
		tx = t.free[n-1]
		t.free[n-1] = nil
		t.free = t.free[:n-1]
	} else {
		tx = new(Tx)
	}
	*tx = Tx{state: txOpen, covers: 1}
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

// WaitRoom reports whether there is room for another record: fewer records
// in flight than Limits.MaxRecords and fewer bytes than Limits.MaxBytes, or
// nothing in flight at all. It returns true at once when there is room;
// otherwise it blocks until an Ack makes room, ctx is done or until passes
// (a zero until means no deadline), and returns whether there is room then.
func (t *Tracker) WaitRoom(ctx context.Context, until time.Time) bool {
	return t.wait(ctx, until, false)
}

// WaitRoomFor reports whether a message of n bytes, read once WaitRoom
// found room, may be handed on. One of at most Limits.MaxBytes may: it
// adds at most its own size to what WaitRoom let in. A larger one may only
// when nothing is in flight, so that it is in flight alone (the promise of
// Limits.MaxBytes); it waits for that like WaitRoom waits for room, until
// ctx is done or until passes. Without a byte cap every message may. The
// answer for a message of at most Limits.MaxBytes costs no lock.
func (t *Tracker) WaitRoomFor(ctx context.Context, until time.Time, n int) bool {
	if t.limits.MaxBytes <= 0 || int64(n) <= t.limits.MaxBytes {
		return true
	}
	return t.wait(ctx, until, true)
}

// wait blocks until there is room for another record, or, when alone,
// until nothing is in flight; or until ctx is done or until passes. It
// reports whether the condition holds when it returns.
func (t *Tracker) wait(ctx context.Context, until time.Time, alone bool) bool {
	var timer *time.Timer
	var deadline <-chan time.Time // nil (never ready) without until
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		t.mu.Lock()
		if t.readyLocked(alone) {
			t.mu.Unlock()
			return true
		}
		if timer == nil && !until.IsZero() {
			d := time.Until(until)
			if d <= 0 {
				t.mu.Unlock()
				return false
			}
			timer = time.NewTimer(d)
			deadline = timer.C
		}
		// Ack closes roomCh when there is room and drainCh when nothing
		// is in flight.
		wake := &t.roomCh
		if alone {
			wake = &t.drainCh
		}
		if *wake == nil {
			*wake = make(chan struct{})
		}
		ch := *wake
		t.mu.Unlock()

		select {
		case <-ch:
		case <-ctx.Done():
			return t.ready(alone)
		case <-deadline:
			return t.ready(alone)
		}
	}
}

// WaitDrained blocks until no record is in flight, or ctx is done; then it
// returns ctx's error wrapped with how much is still in flight.
func (t *Tracker) WaitDrained(ctx context.Context) error {
	for {
		t.mu.Lock()
		if t.records == 0 {
			t.mu.Unlock()
			return nil
		}
		if t.drainCh == nil {
			t.drainCh = make(chan struct{})
		}
		ch := t.drainCh
		t.mu.Unlock()

		select {
		case <-ch:
		case <-ctx.Done():
			records, bytes := t.InFlight()
			if records == 0 {
				return nil
			}
			return fmt.Errorf("waiting for %d in-flight records (%d bytes) to be acked: %w", records, bytes, ctx.Err())
		}
	}
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

func (t *Tracker) hasRoomLocked() bool {
	if t.records == 0 {
		return true
	}
	if t.limits.MaxRecords > 0 && t.records >= t.limits.MaxRecords {
		return false
	}
	if t.limits.MaxBytes > 0 && t.bytes >= t.limits.MaxBytes {
		return false
	}
	return true
}

// readyLocked is what wait waits for: room for a record, or, when alone,
// nothing in flight.
func (t *Tracker) readyLocked(alone bool) bool {
	if alone {
		return t.records == 0
	}
	return t.hasRoomLocked()
}

func (t *Tracker) ready(alone bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.readyLocked(alone)
}

// ring is a FIFO of *Tx on a power-of-two circular buffer.
type ring struct {
	buf  []*Tx
	head int
	n    int
}

func (r *ring) init(size int) { r.buf = make([]*Tx, size) }

func (r *ring) len() int { return r.n }

func (r *ring) front() *Tx {
	if r.n == 0 {
		return nil
	}
	return r.buf[r.head]
}

func (r *ring) back() *Tx { return r.buf[(r.head+r.n-1)&(len(r.buf)-1)] }

func (r *ring) push(tx *Tx) {
	if r.n == len(r.buf) {
		grown := make([]*Tx, 2*len(r.buf))
		for i := 0; i < r.n; i++ {
			grown[i] = r.buf[(r.head+i)&(len(r.buf)-1)]
		}
		r.buf, r.head = grown, 0
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = tx
	r.n++
}

func (r *ring) pop() {
	r.buf[r.head] = nil
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
}
