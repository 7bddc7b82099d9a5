package relay

import "github.com/jackc/pglogrepl"

// resume is the handler's bookkeeping across replication sessions: which
// messages of what Postgres sends after a reconnect were handled already
// in this process and must not be handed to the producer again. It only
// decides; the handler acts (tracker calls, logs).
//
// Its rules:
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
//     this process has seen), reset forgets everything; the handler aborts
//     the open transaction.
type resume struct {
	open      bool          // a transaction is open
	commitLSN pglogrepl.LSN // its commit LSN
	seen      int           // its INSERTs in the current pass
	handled   int           // its INSERTs handed on, over all passes
	replaying bool          // skipping a re-sent transaction, up to its Commit
	through   pglogrepl.LSN // end LSN of the last transaction committed to the tracker
}

// beginAction is what the handler does with a Begin.
type beginAction uint8

const (
	beginNew     beginAction = iota // track a new transaction
	beginResume                     // continue the open transaction, re-sent after a break
	beginReplay                     // skip a re-sent transaction handed on whole already
	beginReplace                    // abort the open transaction (not re-sent first), then track this one
)

func (a beginAction) String() string {
	return [...]string{"new", "resume", "replay", "replace"}[a]
}

// begin decides on the Begin of a transaction with commit LSN final, and
// records it: open with nothing handled (new, replace), a new pass
// (resume) or replaying (replay).
func (r *resume) begin(final pglogrepl.LSN) beginAction {
	if final < r.through {
		r.replaying = true
		return beginReplay
	}
	act := beginNew
	if r.open {
		if final == r.commitLSN {
			r.seen = 0
			return beginResume
		}
		act = beginReplace
	}
	r.open, r.commitLSN, r.seen, r.handled = true, final, 0, 0
	return act
}

// skipping reports whether the messages now are those of a replayed
// transaction.
func (r *resume) skipping() bool { return r.replaying }

// insert counts an INSERT of the open transaction and reports whether to
// hand it on: false for one an earlier pass handed on. Call it only when
// a transaction is open and not skipping.
func (r *resume) insert() bool {
	r.seen++
	if r.seen <= r.handled {
		return false
	}
	r.handled = r.seen
	return true
}

// commitAction is what the handler does with a Commit.
type commitAction uint8

const (
	commitOpen     commitAction = iota // commit the open transaction to the tracker
	commitReplayed                     // end of a replayed transaction: nothing to do
	commitNone                         // no transaction is open: a protocol error
)

func (a commitAction) String() string {
	return [...]string{"open", "replayed", "none"}[a]
}

// commit decides on a Commit with end LSN end and records it.
func (r *resume) commit(end pglogrepl.LSN) commitAction {
	switch {
	case r.replaying:
		r.replaying = false
		return commitReplayed
	case !r.open:
		return commitNone
	}
	r.open, r.seen, r.handled = false, 0, 0
	r.through = end
	return commitOpen
}

// lost records that the session broke. A replayed transaction is over (its
// rest is not coming); an open one stays open.
func (r *resume) lost() { r.replaying = false }

// reset forgets everything, for a server with another WAL history, and
// reports whether a transaction was open (the handler aborts it).
func (r *resume) reset() (wasOpen bool) {
	wasOpen = r.open
	*r = resume{}
	return wasOpen
}
