// Package resume decides, across replication sessions, which messages of
// what Postgres sends after a reconnect were handled already in this
// process and must not be handed to the producer again.
//
// In: the Begin, INSERT and Commit messages of the stream and the
// session's breaks and resets, in order. Out: one decision per message
// (track, resume, skip, pass over, hand on). It only decides: the relay's
// replication handler acts on the decisions (checkpoint calls, logs). It
// holds no lock: the stream's goroutine owns a State.
//
// The rules a State follows:
//
//  1. A transaction is open from its Begin to its Commit. When a session
//     breaks in between, it stays open: Postgres re-sends everything after
//     the slot's confirmed_flush_lsn, so the open transaction comes again,
//     whole, from its Begin and with the same commit LSN (the Begin's
//     FinalLSN). Its Begin then resumes it.
//  2. handled counts the open transaction's INSERTs handed on (produced,
//     dead-lettered or skipped by policy) over all its passes: the most
//     INSERTs any pass reached, never lowered. Each pass counts its own
//     INSERTs from 0, passes over the first handled ones and hands on the
//     rest. However often a session breaks inside the transaction, and
//     wherever the replay had got to, every INSERT is handed on once.
//  3. If a different transaction comes first after a break, the open one
//     was not re-sent as expected: the handler aborts it (it confirms
//     nothing and its records may be published again) and tracks the new
//     one.
//  4. through is the end LSN of the last transaction committed to the
//     tracker. A transaction re-sent with a commit LSN before it was
//     handed on whole in this process: it is in flight or acknowledged,
//     and tracked, so all its messages are skipped (replaying).
//  5. LSNs compare only within one WAL history. When the server's history
//     changes (another system, another timeline, WAL that ends before what
//     this process has seen), Reset forgets everything; the handler aborts
//     the open transaction.
//  6. A checkpoint another process committed (SeedFrom) is trusted only once
//     the stream proves it belongs to the WAL the slot sends: a server
//     restored from a snapshot keeps its system id and timeline, and its
//     new transactions take LSNs the checkpoint covers. Until then
//     (Proving) the skips it orders are provisional and the handler
//     confirms nothing past the slot's position. The proof is the slot
//     sending again the checkpoint's last transaction, with its commit
//     LSN, xid and commit time, ending at the checkpoint's LSN (ProveBegin,
//     ProveCommit), and the transaction it published in part, if any,
//     first after it. Anything else the stream shows first (another
//     transaction at or past that commit LSN, or a WAL end past the
//     checkpoint without it: ProveWALEnd) disproves it: the handler forgets
//     it (Reset) and has the slot send everything again, to be published.
//     Earlier checkpoints (Checkpoint.Earlier) are proven the same way,
//     each by its own last transaction, as the stream goes: after a
//     disproof, what the newest proven one covers (Proven) may still be
//     skipped, as it lies in the WAL the slot's server shares with the
//     one the checkpoints were written on.
package resume

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pglogrepl"
)

// State is the bookkeeping of one replication stream. The zero State is
// ready: no transaction open, nothing handled.
type State struct {
	open      bool          // a transaction is open
	commitLSN pglogrepl.LSN // its commit LSN
	seen      int           // its INSERTs in the current pass
	handled   int           // its INSERTs handed on, over all passes
	replaying bool          // skipping a re-sent transaction, up to its Commit
	through   pglogrepl.LSN // end LSN of the last transaction committed to the tracker
	// A transaction another process published in part (Seed): its commit
	// LSN and the INSERTs of it published.
	seedCommit pglogrepl.LSN
	seedRows   int
	// What of a checkpoint (SeedFrom) the stream has not shown yet.
	proof proof
}

// proof is what the stream must still send for a checkpoint to hold: its
// last transaction (nil once seen, or when not needed), then the one it
// published in part (nil once seen, or when none).
type proof struct {
	through   pglogrepl.LSN
	last      *Mark
	lastBegun bool // last's Begin came; its Commit must end at through
	open      *Mark
	// Earlier checkpoints still to be proven, by Through ascending; the
	// first one's Begin came when begun.
	points []Point
	begun  bool
	proven Point // the newest earlier checkpoint proven; zero: none
}

// Point is what an earlier checkpoint covers: every transaction
// committed before Through, the end LSN of its last transaction Last.
type Point struct {
	Through pglogrepl.LSN
	Last    Mark
}

// Mark names a Postgres transaction as its Begin message does.
type Mark struct {
	CommitLSN pglogrepl.LSN // the Begin's FinalLSN
	Xid       uint32
	// CommitTime is its commit timestamp; zero when unknown, and then not
	// compared.
	CommitTime time.Time
}

func (m Mark) same(o Mark) bool {
	return m.CommitLSN == o.CommitLSN && m.Xid == o.Xid &&
		(m.CommitTime.IsZero() || o.CommitTime.IsZero() || m.CommitTime.Equal(o.CommitTime))
}

func (m Mark) String() string {
	s := fmt.Sprintf("commit LSN %s, xid %d", m.CommitLSN, m.Xid)
	if !m.CommitTime.IsZero() {
		s += ", committed at " + m.CommitTime.UTC().Format(time.RFC3339Nano)
	}
	return s
}

// Checkpoint is where another process left off, as SeedFrom takes it.
type Checkpoint struct {
	// Through is the end LSN of the last transaction published whole.
	Through pglogrepl.LSN
	// Last is that transaction; nil when unknown.
	Last *Mark
	// Open is the transaction after Through published in part, of which
	// Rows events are published; nil when none.
	Open *Mark
	Rows int
	// Earlier are checkpoints written before it (any order); those the
	// stream proves on the way to proving it still hold if it is
	// disproved (Proven).
	Earlier []Point
}

// BeginAction is what the handler does with a Begin.
type BeginAction uint8

const (
	BeginNew     BeginAction = iota // track a new transaction
	BeginResume                     // continue the open transaction, re-sent after a break
	BeginReplay                     // skip a re-sent transaction handed on whole already
	BeginReplace                    // abort the open transaction (not re-sent first), then track this one
)

func (a BeginAction) String() string {
	return [...]string{"new", "resume", "replay", "replace"}[a]
}

// Begin decides on the Begin of a transaction with commit LSN final, and
// records it: open with nothing handled (new, replace), a new pass
// (resume) or replaying (replay).
func (r *State) Begin(final pglogrepl.LSN) BeginAction {
	if final < r.through {
		r.replaying = true
		return BeginReplay
	}
	act := BeginNew
	if r.open {
		if final == r.commitLSN {
			r.seen = 0
			return BeginResume
		}
		act = BeginReplace
	}
	r.open, r.commitLSN, r.seen, r.handled = true, final, 0, 0
	if r.seedRows > 0 && final == r.seedCommit {
		r.handled = r.seedRows
	}
	r.seedRows = 0 // the seeded transaction comes first or not at all
	return act
}

// Seed starts a State where a checkpoint another process committed left
// off (exactly-once delivery): every transaction whose commit LSN is
// before through was published and is skipped whole, as a replay; of the
// transaction with commit LSN openCommit, the first rows INSERTs were
// published and are passed over (rows 0: none). Call it before the first
// Begin.
func (r *State) Seed(through, openCommit pglogrepl.LSN, rows int) {
	r.through = max(r.through, through)
	r.seedCommit, r.seedRows = openCommit, rows
}

// SeedFrom seeds a State (Seed) with a checkpoint cp for a stream that
// starts at slot, the slot's confirmed_flush_lsn, provisionally: Proving
// reports true until the stream proves cp (see the package doc, rule 6).
// A checkpoint that skips nothing the slot sends (Through at or before
// slot, and no open transaction the slot sends again) needs no proof and
// seeds nothing. It returns why cp cannot be used at all ("" when it can):
// it would skip transactions and names no last transaction to prove
// them by (written by a walrelay older than the field, or at a slot's
// position); the State is then left as it was.
func (r *State) SeedFrom(cp Checkpoint, slot pglogrepl.LSN) (why string) {
	needLast := cp.Through > slot
	needOpen := cp.Open != nil && cp.Open.CommitLSN >= slot && cp.Rows > 0
	switch {
	case !needLast && !needOpen:
		return ""
	case needLast && cp.Last == nil:
		return fmt.Sprintf("it names no last transaction to prove it by (written by an older walrelay, or at a slot's position) and would skip what the slot sends from %s to %s", slot, cp.Through)
	}
	p := proof{through: cp.Through}
	open, rows := pglogrepl.LSN(0), 0
	if needLast {
		last := *cp.Last
		p.last = &last
		for _, e := range cp.Earlier {
			if e.Through > slot && e.Through < cp.Through && e.Last.CommitLSN < e.Through {
				p.points = append(p.points, e)
			}
		}
		slices.SortFunc(p.points, func(a, b Point) int { return cmp.Compare(a.Through, b.Through) })
		p.points = slices.CompactFunc(p.points, func(a, b Point) bool { return a.Through == b.Through })
	}
	if needOpen {
		o := *cp.Open
		p.open = &o
		open, rows = o.CommitLSN, cp.Rows
	}
	r.Seed(cp.Through, open, rows)
	r.proof = p
	return ""
}

// Proving reports whether a checkpoint seeded by SeedFrom is not proven
// yet: the handler confirms nothing past the slot's position meanwhile.
func (r *State) Proving() bool { return r.proof.last != nil || r.proof.open != nil }

// ProveBegin checks a Begin against the checkpoint being proven, before
// Begin decides on it. It returns proved when this Begin completes the
// proof, and why when it disproves the checkpoint: a transaction at or
// past the last transaction's commit LSN that is not it, or, after it,
// one that is not the transaction published in part.
func (r *State) ProveBegin(m Mark) (proved bool, why string) {
	p := &r.proof
	p.beginPoint(m)
	if last := p.last; last != nil {
		switch {
		case m.CommitLSN < last.CommitLSN:
			return false, ""
		case last.same(m):
			p.lastBegun = true
			return false, ""
		case m.CommitLSN == last.CommitLSN:
			return false, fmt.Sprintf("the slot sent a transaction with %s where the checkpoint's last transaction has %s", m, last)
		}
		return false, fmt.Sprintf("the slot sent a transaction with %s, past the checkpoint's last transaction (%s), without that one", m, last)
	}
	if open := p.open; open != nil {
		if !open.same(m) {
			return false, fmt.Sprintf("the slot sent a transaction with %s first after the checkpoint, not the one the checkpoint published in part (%s)", m, open)
		}
		p.open = nil
		return true, ""
	}
	return false, ""
}

// ProveCommit checks a Commit with end LSN end against the checkpoint
// being proven, before Commit decides on it. It returns proved when this
// Commit ends the checkpoint's last transaction at the checkpoint's LSN
// (what the checkpoint covers is then proven; the transaction it
// published in part may be left), and why when the last transaction ends
// elsewhere.
func (r *State) ProveCommit(end pglogrepl.LSN) (proved bool, why string) {
	p := &r.proof
	p.commitPoint(end)
	if p.last == nil || !p.lastBegun {
		return false, ""
	}
	p.lastBegun = false
	if end != p.through {
		return false, fmt.Sprintf("the checkpoint's last transaction (%s) ends at %s in the slot's stream, at %s in the checkpoint", p.last, end, p.through)
	}
	p.last = nil
	return true, ""
}

// ProveWALEnd checks a server WAL end the stream reported (a keepalive's,
// or a heartbeat's position: how far the walsender has decoded and sent)
// against the checkpoint being proven. It returns why when the stream
// passed a transaction of the proof without sending it.
func (r *State) ProveWALEnd(lsn pglogrepl.LSN) (why string) {
	p := &r.proof
	if len(p.points) > 0 && !p.begun && lsn >= p.points[0].Through {
		p.points = nil // passed without its last transaction
	}
	switch {
	case p.last != nil && !p.lastBegun && lsn >= p.through:
		return fmt.Sprintf("the slot's stream reached %s, at or past the checkpoint's LSN %s, without sending the checkpoint's last transaction (%s)", lsn, p.through, p.last)
	case p.last == nil && p.open != nil && lsn > p.open.CommitLSN:
		return fmt.Sprintf("the slot's stream reached %s, past the commit LSN of the transaction the checkpoint published in part (%s), without sending it", lsn, p.open)
	}
	return ""
}

// Proven is the newest earlier checkpoint (Checkpoint.Earlier) the stream
// proved so far, and false when none: every transaction committed before
// its Through lies in the WAL the checkpoints were written on, and was
// published. Read it before Reset.
func (r *State) Proven() (Point, bool) {
	return r.proof.proven, r.proof.proven.Through != 0
}

// beginPoint checks a Begin against the next earlier checkpoint: its last
// transaction begun, or passed (the WAL diverged before it: none of the
// rest can be proven).
func (p *proof) beginPoint(m Mark) {
	if len(p.points) == 0 {
		return
	}
	next := p.points[0].Last
	switch {
	case m.CommitLSN < next.CommitLSN:
	case next.same(m):
		p.begun = true
	default:
		p.points, p.begun = nil, false
	}
}

// commitPoint checks a Commit against the next earlier checkpoint whose
// last transaction begun: ending at its Through proves it.
func (p *proof) commitPoint(end pglogrepl.LSN) {
	if !p.begun {
		return
	}
	p.begun = false
	if end != p.points[0].Through {
		p.points = nil
		return
	}
	p.proven = p.points[0]
	p.points = p.points[1:]
}

// Skipping reports whether the messages now are those of a replayed
// transaction.
func (r *State) Skipping() bool { return r.replaying }

// Insert counts an INSERT of the open transaction and reports whether to
// hand it on: false for one an earlier pass handed on. Call it only when
// a transaction is open and not skipping. A table-less outbox message
// (outbox.message_prefix) is an event of its transaction like an INSERT:
// the handler counts it with Insert too, so rows and messages share one
// count in WAL order.
func (r *State) Insert() bool {
	r.seen++
	if r.seen <= r.handled {
		return false
	}
	r.handled = r.seen
	return true
}

// CommitAction is what the handler does with a Commit.
type CommitAction uint8

const (
	CommitOpen     CommitAction = iota // commit the open transaction to the tracker
	CommitReplayed                     // end of a replayed transaction: nothing to do
	CommitNone                         // no transaction is open: a protocol error
)

func (a CommitAction) String() string {
	return [...]string{"open", "replayed", "none"}[a]
}

// Commit decides on a Commit with end LSN end and records it.
func (r *State) Commit(end pglogrepl.LSN) CommitAction {
	switch {
	case r.replaying:
		r.replaying = false
		return CommitReplayed
	case !r.open:
		return CommitNone
	}
	r.open, r.seen, r.handled = false, 0, 0
	r.through = end
	return CommitOpen
}

// Lost records that the session broke. A replayed transaction is over (its
// rest is not coming); an open one stays open. A checkpoint's last
// transaction being proven comes again from its Begin.
func (r *State) Lost() { r.replaying, r.proof.lastBegun, r.proof.begun = false, false, false }

// Reset forgets everything, for a server with another WAL history, and
// reports whether a transaction was open (the handler aborts it).
func (r *State) Reset() (wasOpen bool) {
	wasOpen = r.open
	*r = State{}
	return wasOpen
}

// Open reports whether a transaction is open, and its commit LSN.
func (r *State) Open() (commitLSN pglogrepl.LSN, open bool) { return r.commitLSN, r.open }

// Handled is how many INSERTs of the open transaction were handed on, over
// all its passes.
func (r *State) Handled() int { return r.handled }

// Seen is how many INSERTs of the open transaction the current pass has
// read.
func (r *State) Seen() int { return r.seen }

// Through is the end LSN of the last transaction committed to the
// tracker: the newest position this process handled whole.
func (r *State) Through() pglogrepl.LSN { return r.through }
