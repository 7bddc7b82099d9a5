package relay

import (
	"log/slog"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/dbzoffset"
)

// SkipPublished has the relay pass over, in the transaction p.Xid, the
// rows another relay had already published (its changes before p.LSN and
// the first p.Events at p.LSN; several rows share the LSN of a COPY's
// multi-insert), as `walrelay debezium takeover` reads them from a
// Debezium connector's offset, when that transaction is the
// first the relay reads; from its next row on the relay publishes as
// usual. Whole transactions the other relay had published are skipped by
// moving the slot past them before Run (pg_replication_slot_advance): this
// handles only the transaction left open. If the first transaction read
// is another one (the slot was already past p's transaction: a takeover
// run again after this relay had confirmed it), nothing is passed over.
//
// The rows passed over are logged with their LSN and outbox id and never
// produced; the transaction is confirmed as usual once its other rows are
// acknowledged. The decision is made again on each pass over the
// transaction (Postgres re-sends it whole after a lost session), before
// the resume bookkeeping counts the rows handed on, so a reconnect inside
// it neither publishes a passed-over row nor passes over another.
func SkipPublished(p dbzoffset.Open) Option {
	return func(o *options) { o.published = &p }
}

// skipState is where a SkipPublished skip is.
type skipState uint8

const (
	skipPending skipState = iota // no transaction read yet
	skipActive                   // reading p's transaction
	skipDone                     // p's transaction committed, or the first transaction was another
)

// publishedSkip applies SkipPublished on the handler's goroutine.
type publishedSkip struct {
	p       *dbzoffset.Open // nil: no skip
	state   skipState
	atLSN   int // rows at p.LSN seen in this pass
	skipped int // rows passed over in this pass
}

// begin starts a pass over a transaction, new or re-sent.
func (s *publishedSkip) begin(log *slog.Logger, xid uint32, final pglogrepl.LSN) {
	if s.p == nil || s.state == skipDone {
		return
	}
	if xid != s.p.Xid || final <= s.p.LSN {
		if s.state == skipPending {
			log.Info("the first transaction is not the one the previous relay left open; nothing to pass over",
				"xid", xid, "commit_lsn", final.String(), "open_xid", s.p.Xid, "open_lsn", s.p.LSN.String())
		}
		s.state = skipDone
		return
	}
	if s.state == skipPending {
		log.Info("taking over inside the transaction the previous relay left open; passing over the rows it had published",
			"xid", xid, "commit_lsn", final.String(), "through_lsn", s.p.LSN.String(), "rows_at_lsn", s.p.Events)
	}
	s.state, s.atLSN, s.skipped = skipActive, 0, 0
}

// insert reports whether the row at lsn was published by the previous
// relay.
func (s *publishedSkip) insert(lsn pglogrepl.LSN) bool {
	if s.state != skipActive || lsn > s.p.LSN {
		return false
	}
	if lsn == s.p.LSN {
		if s.atLSN++; s.atLSN > s.p.Events {
			return false
		}
	}
	s.skipped++
	return true
}

// commit ends the skip at the commit of its transaction.
func (s *publishedSkip) commit(log *slog.Logger) {
	if s.state != skipActive {
		return
	}
	log.Info("took over the transaction the previous relay left open", "xid", s.p.Xid, "rows_passed_over", s.skipped)
	s.state = skipDone
}

// reset ends the skip: the server has another WAL history, where p means
// nothing.
func (s *publishedSkip) reset() { s.state = skipDone }
