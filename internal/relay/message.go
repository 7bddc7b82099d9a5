package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/deadletter"
	"github.com/walrelay/walrelay/internal/heartbeat"
	"github.com/walrelay/walrelay/internal/router"
)

// This file holds the table-less outbox (outbox.message_prefix): logical
// decoding messages the application emits in its transaction with
// pg_logical_emit_message(true, prefix, json), routed as outbox events.
// A message is an event of its transaction like an INSERT: it is counted,
// positioned, skipped on resume, dead-lettered and confirmed the same way
// (docs/DESIGN.md, "A table-less outbox").

// bindMessages binds the router to the messages of outbox.message_prefix
// (prefix), when it is set.
func (h *handler) bindMessages(prefix string) error {
	if prefix == "" {
		return nil
	}
	mp, err := h.router.BindMessage(prefix)
	if err != nil {
		return fmt.Errorf("configuring outbox.message_prefix: %w", err)
	}
	h.messages = mp
	return nil
}

// Message handles a logical decoding message: a heartbeat, an outbox
// event of the table-less outbox, or something else (ignored).
func (h *handler) Message(ctx context.Context, m *pglogrepl.LogicalDecodingMessage, lsn pglogrepl.LSN) error {
	if heartbeat.Is(m) {
		h.hb.Seen(time.Now())
		// Everything committed before the heartbeat was sent before it:
		// with nothing in flight, its position is safe to confirm (not
		// while a checkpoint is being proven: WALEnd).
		if confirm, err := h.WALEnd(ctx, m.LSN); err != nil || !confirm {
			return err
		}
		h.tracker.ObserveWALEnd(m.LSN)
		return nil
	}
	if mp := h.messages; mp != nil && m.Prefix == mp.Prefix() {
		if m.Transactional {
			return h.event(ctx, mp, m.Content, lsn)
		}
		// Not part of any transaction: it would be published even if the
		// transaction that emitted it rolled back. Never an event.
		if !h.warnedNonTx {
			h.warnedNonTx = true
			h.log.Warn("non-transactional logical message with the outbox prefix ignored: emit outbox events with pg_logical_emit_message(true, ...) (logged once)",
				"lsn", lsn.String(), "prefix", m.Prefix)
		}
		return nil
	}
	h.log.Debug("logical decoding message ignored", "lsn", lsn.String(), "prefix", m.Prefix, "transactional", m.Transactional)
	return nil
}

// event handles a message of the table-less outbox exactly as Insert
// handles a row: the same resume and takeover bookkeeping (a message
// counts as one of its transaction's rows), the same routing, admission,
// tracking and relay.on_error.
func (h *handler) event(ctx context.Context, mp *router.MessagePlan, content []byte, lsn pglogrepl.LSN) error {
	if h.resume.Skipping() {
		return nil
	}
	if h.tx == nil {
		return fmt.Errorf("outbox message at %s outside a transaction", lsn)
	}
	if h.skip.insert(lsn) {
		h.log.Info("passing over an outbox message the relay taken over had published", "lsn", lsn.String(), "xid", h.skip.p.Xid)
		return nil
	}
	if !h.resume.Insert() {
		return nil // handled before the session was lost
	}
	cols, err := mp.Columns(content)
	id, topic := "", ""
	if err == nil {
		id = mp.EventID(cols)
		if topic, err = h.publish(ctx, mp.Plan, cols, lsn, nil); err == nil {
			return nil
		}
		if we, ok := err.(*waitEnded); ok {
			return we.err
		}
	}
	o := deadletter.Origin{LSN: lsn, ID: id, Table: mp.Table()}
	return h.refuse(o, err, "outbox message", func(class string) *deadletter.Letter {
		return deadletter.FromMessage(content, o, class, err, topic)
	})
}
