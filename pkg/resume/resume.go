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
package resume

import "github.com/jackc/pglogrepl"

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
// rest is not coming); an open one stays open.
func (r *State) Lost() { r.replaying = false }

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
