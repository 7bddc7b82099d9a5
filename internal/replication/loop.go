package replication

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/pgwire"
)

// clockEvery is how many messages the stream's loop handles per clock read.
const clockEvery = 64

// confirmEvery is the shortest time between two status updates sent for a
// confirmed position that moved. A position reported late is work done
// again after a crash: Postgres re-sends everything after the slot's
// confirmed_flush_lsn.
const confirmEvery = 100 * time.Millisecond

// reporter decides when the stream sends a standby status update: soon
// after the Checkpointer's confirmed position moves, at most every
// confirmEvery, and every StatusInterval whatever happens (the walsender
// ends a session silent for wal_sender_timeout), or at once when a
// keepalive asks for a reply. What it reports is always Confirmed.
type reporter struct {
	interval time.Duration
	next     time.Time     // the update due anyway; zero: now
	sentAt   time.Time     // when the last update was sent
	sent     pglogrepl.LSN // what it reported
	// due is when the loop must look again: next, or sooner when the
	// position moved (sentAt+confirmEvery) or may move on an ack while
	// records are in flight (now+confirmEvery). Waits end at due.
	due time.Time
}

// plan sets due from what the Checkpointer says now.
func (r *reporter) plan(now time.Time, cp Checkpointer) {
	r.due = r.next
	var look time.Time
	if cp.Confirmed() != r.sent {
		look = r.sentAt.Add(confirmEvery)
	} else if n, _ := cp.InFlight(); n > 0 {
		look = now.Add(confirmEvery)
	} else {
		return
	}
	if look.Before(r.due) {
		r.due = look
	}
}

// loop reads messages until ctx is done (returns nil) or an error.
func (s *Stream) loop(ctx context.Context, w *pgwire.Conn) error {
	rep := reporter{interval: s.cfg.StatusInterval}
	// The Handler may keep the session alive while it waits (KeepAlive).
	ctx = withKeeper(ctx, &keeper{s: s, w: w, rep: &rep})
	// The clock is read every clockEvery messages, not for each: a clock
	// read costs a good part of handling a message already buffered. It
	// is read, and the reporter's plan made afresh,
	// before a receive that needs the socket (and may wait there), so that
	// the wait ends in time for a position an ack moves meanwhile. Waits
	// end at rep.due (the receive's deadline, WaitRoom's).
	var now time.Time
	fresh := 0
	for {
		if ctx.Err() != nil {
			return nil
		}
		if err := s.ended(); err != nil {
			return err
		}
		if fresh--; fresh <= 0 || !w.Buffered() {
			now, fresh = time.Now(), clockEvery
			rep.plan(now, s.cp)
		}
		if !now.Before(rep.due) {
			if err := s.report(w, &rep, now); err != nil {
				return err
			}
		}
		if !s.cp.WaitRoom(ctx, rep.due) {
			fresh = 0
			continue // at the in-flight cap: keep reporting status, read nothing
		}
		typ, body, buf, err := w.Receive(ctx, rep.due)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) {
				fresh = 0
				continue
			}
			return fmt.Errorf("receiving from slot %q: %w", s.cfg.Slot, err)
		}
		switch typ {
		case pgwire.MsgCopyData:
			if len(body) == 0 {
				continue
			}
			switch body[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(body[1:])
				if err != nil {
					return fmt.Errorf("parsing keepalive: %w", err)
				}
				if !s.inTx {
					if err := s.observeWALEnd(ctx, ka.ServerWALEnd); err != nil {
						return err
					}
					if ka.ReplyRequested && s.replies != nil {
						s.replies.ReplyRequested(ka.ServerWALEnd)
					}
				}
				s.markReceived(ka.ServerWALEnd)
				if ka.ReplyRequested {
					rep.next, rep.due = time.Time{}, time.Time{}
				}
			case pglogrepl.XLogDataByteID:
				xld, err := pglogrepl.ParseXLogData(body[1:])
				if err != nil {
					return fmt.Errorf("parsing XLogData: %w", err)
				}
				if !s.cp.WaitRoomFor(ctx, rep.due, len(xld.WALData)) {
					if err := s.admit(ctx, w, &rep, len(xld.WALData)); err != nil || ctx.Err() != nil {
						return err
					}
				}
				if err := s.dispatch(ctx, xld, buf); err != nil {
					return err
				}
				s.markReceived(xld.WALStart + pglogrepl.LSN(len(xld.WALData)))
			}
		case pgwire.MsgErrorResponse:
			return fmt.Errorf("streaming from slot %q: %w", s.cfg.Slot, pgwire.ServerError(body))
		case pgwire.MsgCopyDone:
			return fmt.Errorf("streaming from slot %q: server ended the replication stream", s.cfg.Slot)
		}
	}
}

// admit holds a message of n bytes that the Checkpointer does not let
// through yet (larger than the byte cap, with records in flight) until it
// does, reporting status meanwhile as the loop would. The message stays
// in the receive buffer: nothing is read while it waits. It returns nil
// as well when ctx is done.
func (s *Stream) admit(ctx context.Context, w *pgwire.Conn, rep *reporter, n int) error {
	for !s.cp.WaitRoomFor(ctx, rep.due, n) {
		if ctx.Err() != nil {
			return nil
		}
		if err := s.ended(); err != nil {
			return err
		}
		now := time.Now()
		rep.plan(now, s.cp)
		if !now.Before(rep.due) {
			if err := s.report(w, rep, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// report sends a status update with Confirmed and plans the next.
func (s *Stream) report(w *pgwire.Conn, rep *reporter, now time.Time) error {
	lsn, err := s.sendStatus(w)
	if err != nil {
		return err
	}
	rep.sent, rep.sentAt, rep.next = lsn, now, now.Add(rep.interval)
	rep.plan(now, s.cp)
	return nil
}

// observeWALEnd hands an idle keepalive's server WAL end to the
// Checkpointer, when the Handler (a WALEndHandler) lets it.
func (s *Stream) observeWALEnd(ctx context.Context, lsn pglogrepl.LSN) error {
	if s.walEnd != nil {
		confirm, err := s.walEnd.WALEnd(ctx, lsn)
		if err != nil {
			return &HandlerError{LSN: lsn, Err: err}
		}
		if !confirm {
			return nil
		}
	}
	s.cp.ObserveWALEnd(lsn)
	return nil
}

// markReceived raises the received position.
func (s *Stream) markReceived(lsn pglogrepl.LSN) {
	if uint64(lsn) > s.received.Load() {
		s.received.Store(uint64(lsn))
	}
}

// dispatch decodes one pgoutput message and calls the handler.
func (s *Stream) dispatch(ctx context.Context, xld pglogrepl.XLogData, buf *Buffer) error {
	m, err := s.dec.decode(xld.WALData)
	if err != nil {
		return fmt.Errorf("decoding pgoutput message at %s: %w", xld.WALStart, err)
	}
	switch m := m.(type) {
	case *pglogrepl.BeginMessage:
		s.inTx = true
		err = s.handler.Begin(ctx, m)
	case *pglogrepl.CommitMessage:
		s.inTx = false
		err = s.handler.Commit(ctx, m)
	case *pglogrepl.RelationMessage:
		s.relations[m.RelationID] = m
		err = s.handler.Relation(ctx, m)
	case *pglogrepl.InsertMessage:
		rel, rerr := s.relation(m.RelationID, xld.WALStart)
		if rerr != nil {
			return rerr
		}
		err = s.handler.Insert(ctx, rel, m, xld.WALStart, buf)
	case *pglogrepl.UpdateMessage:
		rel, rerr := s.relation(m.RelationID, xld.WALStart)
		if rerr != nil {
			return rerr
		}
		err = s.handler.Update(ctx, rel, m, xld.WALStart)
	case *pglogrepl.DeleteMessage:
		rel, rerr := s.relation(m.RelationID, xld.WALStart)
		if rerr != nil {
			return rerr
		}
		err = s.handler.Delete(ctx, rel, m, xld.WALStart)
	case *pglogrepl.TruncateMessage:
		rels := make([]*pglogrepl.RelationMessage, 0, len(m.RelationIDs))
		for _, id := range m.RelationIDs {
			rel, rerr := s.relation(id, xld.WALStart)
			if rerr != nil {
				return rerr
			}
			rels = append(rels, rel)
		}
		err = s.handler.Truncate(ctx, rels, m, xld.WALStart)
	case *pglogrepl.LogicalDecodingMessage:
		err = s.handler.Message(ctx, m, xld.WALStart)
	default:
		// Type and Origin messages carry nothing walrelay uses.
		return nil
	}
	if err != nil {
		return &HandlerError{LSN: xld.WALStart, Err: err}
	}
	return nil
}

func (s *Stream) relation(id uint32, lsn pglogrepl.LSN) (*pglogrepl.RelationMessage, error) {
	rel, ok := s.relations[id]
	if !ok {
		return nil, permanent(fmt.Errorf("%w: relation %d at %s", ErrUnknownRelation, id, lsn))
	}
	return rel, nil
}

// sendStatus reports Confirmed as the write, flush and apply positions,
// and returns what it reported. All three are set explicitly: pglogrepl
// copies a zero flush/apply from write.
func (s *Stream) sendStatus(w *pgwire.Conn) (pglogrepl.LSN, error) {
	lsn := s.cp.Confirmed()
	if err := w.SendStatus(lsn, lsn, lsn); err != nil {
		return lsn, fmt.Errorf("sending standby status (flush %s): %w", lsn, err)
	}
	return lsn, nil
}
