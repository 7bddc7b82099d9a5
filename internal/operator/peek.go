package operator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/pgcatalog"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/router"
	"github.com/walrelay/walrelay/internal/slotrecord"
)

// Event is one pending outbox INSERT as `walrelay run` would publish it.
type Event struct {
	// LSN is the INSERT's position in the WAL.
	LSN string `json:"lsn"`
	// TxEndLSN is the end of its transaction's commit record: the
	// position the relay confirms once the transaction is published, and
	// what `slot advance --past-event` moves the slot to.
	TxEndLSN string `json:"tx_end_lsn"`
	XID      uint32 `json:"xid"`
	// Table is the outbox table, or "message:<prefix>" for an event of
	// the table-less outbox (a logical decoding message).
	Table string `json:"table"`
	// Message is true for an event of the table-less outbox: a
	// transactional logical decoding message with outbox.message_prefix.
	Message bool   `json:"message,omitempty"`
	ID      string `json:"id"`
	Topic   string `json:"topic"`
	// Key is null when the key column is NULL. PayloadBytes is the
	// routed value's size. For an event the router cannot publish
	// (ErrorClass), both are the row's key and payload columns as it
	// holds them (no converter).
	Key          *string `json:"key"`
	PayloadBytes int     `json:"payload_bytes"`
	// ErrorClass and Error are set when the router cannot publish the row
	// (e.g. routing_value_missing); OnError is the configured policy for
	// that class (dlq, stop or log), "" for classes without one.
	ErrorClass string `json:"error_class,omitempty"`
	Error      string `json:"error,omitempty"`
	OnError    string `json:"on_error,omitempty"`
}

// tx is one decoded transaction.
type tx struct {
	xid               uint32
	commitTime        time.Time
	commitLSN, endLSN pglogrepl.LSN
	events            []Event
}

// PeekRequest says what to peek at.
type PeekRequest struct {
	Slot         string
	Publications []string
	Router       *router.Router
	// Policies fill Event.OnError.
	Policies config.ErrorPolicies
	// MessagePrefix is outbox.message_prefix: transactional logical
	// decoding messages with it are events too ("": rows only).
	MessagePrefix string
	// Limit is the number of events wanted (0: 100).
	Limit int
	// Copy peeks a temporary copy of the slot, so a slot in use can be
	// peeked. The copy lives as long as the connection.
	Copy bool
}

// PeekResult is what Peek found.
type PeekResult struct {
	Slot   postgres.Slot `json:"slot"`
	Copy   string        `json:"copy,omitempty"` // the temporary copy peeked, if any
	Events []Event       `json:"events"`
	// More is true when more events are pending after these.
	More bool `json:"more"`
}

// Peek decodes the slot's pending changes with pgoutput and the relay's
// publications, without consuming them, and returns the first Limit
// outbox events in commit order.
func Peek(ctx context.Context, conn *pgx.Conn, req PeekRequest) (PeekResult, error) {
	if req.Limit <= 0 {
		req.Limit = 100
	}
	hint := "stop the relay or peek a copy (--copy)"
	var (
		s   postgres.Slot
		err error
	)
	res := PeekResult{}
	name := req.Slot
	if req.Copy {
		if s, err = postgres.InspectSlot(ctx, conn, req.Slot); err != nil {
			return res, err
		}
		db, err := postgres.CurrentDatabase(ctx, conn)
		if err != nil {
			return res, err
		}
		if p := s.Problem(db); p != "" {
			return res, fmt.Errorf("%w: %s", postgres.ErrSlotMismatch, p)
		}
		name = fmt.Sprintf("walrelay_peek_%d", conn.PgConn().PID())
		if _, err := conn.Exec(ctx, `SELECT pg_copy_logical_replication_slot($1, $2, true)`, req.Slot, name); err != nil {
			return res, postgres.QueryError(fmt.Sprintf("copying replication slot %q", req.Slot), postgres.PrivilegeFix(ctx, conn), err)
		}
		res.Copy = name
	} else if s, err = usableSlot(ctx, conn, req.Slot, hint); err != nil {
		return res, err
	}
	res.Slot = s
	err = scan(ctx, conn, name, req, nil, func(t tx, _ bool) bool {
		for _, ev := range t.events {
			if len(res.Events) == req.Limit {
				res.More = true
				return false
			}
			res.Events = append(res.Events, ev)
		}
		return true
	})
	if err != nil {
		return res, err
	}
	if res.Events == nil {
		res.Events = []Event{}
	}
	return res, nil
}

// scan peeks the slot's pending transactions in commit order and calls fn
// with each until fn returns false or there are no more; last is true for
// the final pending transaction. upto, when not nil, stops the peek at
// that WAL position. Each round peeks from the slot's position again, with
// a larger change budget, so a long backlog costs a few passes, not one
// unbounded one.
func scan(ctx context.Context, conn *pgx.Conn, slot string, req PeekRequest, upto *pglogrepl.LSN, fn func(t tx, last bool) bool) error {
	catalog, err := publishedColumns(ctx, conn, req.Publications)
	if err != nil {
		return fmt.Errorf("peeking at replication slot %q: %w", slot, err)
	}
	seen := 0 // transactions already handed to fn
	for budget := 1000; ; budget *= 8 {
		txs, exhausted, err := peekTxs(ctx, conn, slot, req, catalog, upto, budget)
		if err != nil {
			return err
		}
		for i := seen; i < len(txs); i++ {
			if !fn(txs[i], exhausted && i == len(txs)-1) {
				return nil
			}
		}
		seen = len(txs)
		if exhausted {
			return nil
		}
	}
}

// peekTxs runs one pg_logical_slot_peek_binary_changes with at most
// budget changes (Postgres always finishes the transaction it is in) and
// decodes the pgoutput messages. exhausted is true when the peek returned
// fewer rows than the budget: nothing more is pending.
func peekTxs(ctx context.Context, conn *pgx.Conn, slot string, req PeekRequest, catalog pgcatalog.Columns, upto *pglogrepl.LSN, budget int) (txs []tx, exhausted bool, err error) {
	names := make([]string, len(req.Publications))
	for i, p := range req.Publications {
		names[i] = pgx.Identifier{p}.Sanitize()
	}
	var uptoArg any
	if upto != nil {
		uptoArg = upto.String()
	}
	what := fmt.Sprintf("peeking at replication slot %q", slot)
	var messages *router.MessagePlan
	if req.MessagePrefix != "" {
		if messages, err = req.Router.BindMessage(req.MessagePrefix); err != nil {
			return nil, false, fmt.Errorf("%s: outbox.message_prefix: %w", what, err)
		}
	}
	// With messages 'true', as the relay streams: pgoutput then also
	// sends transactions that hold only logical decoding messages.
	rows, err := conn.Query(ctx, `
		SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes($1, $2::pg_lsn, $3,
			'proto_version', '1', 'publication_names', $4, 'messages', $5)`,
		slot, uptoArg, budget, strings.Join(names, ","), strconv.FormatBool(messages != nil))
	if err != nil {
		return nil, false, postgres.QueryError(what, postgres.PrivilegeFix(ctx, conn), err)
	}
	defer rows.Close()
	var (
		cur   *tx
		plans = map[uint32]*router.Plan{}
		bind  = map[uint32]error{}
		n     int
	)
	for rows.Next() {
		n++
		var lsnText string
		var data []byte
		if err := rows.Scan(&lsnText, &data); err != nil {
			return nil, false, fmt.Errorf("%s: %w", what, err)
		}
		lsn, err := pglogrepl.ParseLSN(lsnText)
		if err != nil {
			return nil, false, fmt.Errorf("%s: parsing LSN %q: %w", what, lsnText, err)
		}
		msg, err := pglogrepl.Parse(data)
		if err != nil {
			return nil, false, fmt.Errorf("%s: decoding pgoutput at %s: %w", what, lsn, err)
		}
		switch m := msg.(type) {
		case *pglogrepl.BeginMessage:
			cur = &tx{xid: m.Xid, commitTime: m.CommitTime}
		case *pglogrepl.RelationMessage:
			plan, err := req.Router.Bind(catalog.Complete(router.RelationOf(m)))
			plans[m.RelationID], bind[m.RelationID] = plan, err
		case *pglogrepl.InsertMessage:
			if cur == nil {
				return nil, false, fmt.Errorf("%s: insert at %s outside a transaction", what, lsn)
			}
			cur.events = append(cur.events, route(plans[m.RelationID], bind[m.RelationID], m, lsn, cur, req.Policies))
		case *pglogrepl.LogicalDecodingMessage:
			if messages == nil || !m.Transactional || m.Prefix != messages.Prefix() || cur == nil {
				continue // the relay ignores it too
			}
			cur.events = append(cur.events, routeMessage(messages, m.Content, lsn, cur, req.Policies))
		case *pglogrepl.CommitMessage:
			if cur == nil {
				return nil, false, fmt.Errorf("%s: commit at %s outside a transaction", what, lsn)
			}
			cur.commitLSN, cur.endLSN = m.CommitLSN, m.TransactionEndLSN
			for i := range cur.events {
				cur.events[i].TxEndLSN = m.TransactionEndLSN.String()
			}
			txs = append(txs, *cur)
			cur = nil
		}
	}
	if err := rows.Err(); err != nil {
		return nil, false, postgres.QueryError(what, postgres.PrivilegeFix(ctx, conn), err)
	}
	return txs, n < budget, nil
}

// route routes one INSERT like the relay's handler does.
func route(plan *router.Plan, bindErr error, m *pglogrepl.InsertMessage, lsn pglogrepl.LSN, t *tx, pol config.ErrorPolicies) Event {
	ev := Event{LSN: lsn.String(), XID: t.xid}
	if plan == nil {
		ev.ErrorClass = router.ClassColumnMissing.String()
		if bindErr != nil {
			ev.Error = bindErr.Error()
		} else {
			ev.Error = fmt.Sprintf("insert into relation %d before its Relation message", m.RelationID)
		}
		return ev
	}
	ev.Table = plan.Table()
	ev.ID = plan.EventID(m.Tuple.Columns)
	msg, err := plan.Route(m.Tuple.Columns, t.commitTime)
	return rawIfRefused(routed(ev, msg, err, pol), err, plan, m.Tuple.Columns)
}

// rawIfRefused gives an event the router refused (err) the key and
// payload size its row holds, so that slot peek shows the real row, not
// "(null)" and 0 B.
func rawIfRefused(ev Event, err error, plan *router.Plan, cols []*pglogrepl.TupleDataColumn) Event {
	if err == nil {
		return ev
	}
	if k, ok := plan.RawKey(cols); ok {
		ev.Key = &k
	}
	ev.PayloadBytes = plan.RawPayloadBytes(cols)
	return ev
}

// routed completes ev with where msg goes, or with err, its class and
// the policy the relay applies to it.
func routed(ev Event, msg router.Message, err error, pol config.ErrorPolicies) Event {
	if err != nil {
		if class, ok := router.ClassOf(err); ok {
			ev.ErrorClass = class.String()
			ev.OnError, _ = pol.Policy(class)
		}
		ev.Error = err.Error()
		return ev
	}
	ev.Topic = msg.Topic
	if msg.Key != nil {
		k := string(msg.Key)
		ev.Key = &k
	}
	ev.PayloadBytes = len(msg.Value)
	return ev
}

// routeMessage routes one logical decoding message of the table-less
// outbox like the relay's handler does.
func routeMessage(mp *router.MessagePlan, content []byte, lsn pglogrepl.LSN, t *tx, pol config.ErrorPolicies) Event {
	ev := Event{LSN: lsn.String(), XID: t.xid, Table: mp.Table(), Message: true}
	cols, err := mp.Columns(content)
	var msg router.Message
	if err != nil {
		ev = routed(ev, msg, err, pol)
		ev.PayloadBytes = len(content) // not an object walrelay can read: the message as written
		return ev
	}
	ev.ID = mp.EventID(cols)
	msg, err = mp.Route(cols, t.commitTime)
	return rawIfRefused(routed(ev, msg, err, pol), err, mp.Plan, cols)
}

// AdvanceRequest says where to move a slot: To, or past the transaction
// holding the outbox event PastEvent.
type AdvanceRequest struct {
	PeekRequest
	To        *pglogrepl.LSN
	PastEvent string
	// Records is walrelay's record of its slots (internal/slotrecord): Advance
	// records the target there before it moves the slot, so the move is
	// walrelay's own and not a jump. Zero: not recorded (retention then
	// finds the slot moved past the record and stops).
	Records slotrecord.Table
	// Note says who moved the slot, in the record (default "walrelay
	// slot advance").
	Note string
}

// AdvancePlan is what Advance would do: move Slot from From to To,
// skipping Skipped (every pending outbox event committed before To).
type AdvancePlan struct {
	Slot    string  `json:"slot"`
	From    string  `json:"from"`
	To      string  `json:"to"`
	Skipped []Event `json:"skipped"`
	// Event is the event named by --past-event.
	Event   *Event `json:"event,omitempty"`
	from    pglogrepl.LSN
	to      pglogrepl.LSN
	records slotrecord.Table
	note    string
}

// PlanAdvance checks the move and lists the events it would skip. It
// refuses (ErrRefused) a target before the slot's confirmed_flush_lsn or
// past the server's current WAL position, and a slot in use
// (postgres.ErrSlotActive) or not walrelay's (postgres.ErrSlotMismatch).
func PlanAdvance(ctx context.Context, conn *pgx.Conn, req AdvanceRequest) (AdvancePlan, error) {
	s, err := usableSlot(ctx, conn, req.Slot, "stop the relay before advancing it")
	if err != nil {
		return AdvancePlan{}, err
	}
	from, err := pglogrepl.ParseLSN(s.ConfirmedFlushLSN)
	if err != nil {
		return AdvancePlan{}, fmt.Errorf("reading confirmed_flush_lsn %q of slot %q: %w", s.ConfirmedFlushLSN, s.Name, err)
	}
	current, err := pglogrepl.ParseLSN(s.CurrentLSN)
	if err != nil {
		return AdvancePlan{}, fmt.Errorf("reading the current WAL position %q: %w", s.CurrentLSN, err)
	}
	p := AdvancePlan{Slot: s.Name, From: from.String(), from: from, Skipped: []Event{}, records: req.Records, note: req.Note}
	switch {
	case req.To != nil:
		to := *req.To
		if to < from {
			return AdvancePlan{}, fmt.Errorf("%w backwards: %s is before slot %q's confirmed_flush_lsn %s, and Postgres may already have removed the WAL before it: pick an LSN at or after %s", ErrRefused, to, s.Name, from, from)
		}
		if to > current {
			return AdvancePlan{}, fmt.Errorf("%w past the current WAL end: %s is ahead of pg_current_wal_lsn() %s: pick an LSN at or before %s (see `walrelay lsn`)", ErrRefused, to, current, current)
		}
		p.to = to
		if to > from {
			// Postgres skips a transaction whose commit record starts
			// before the slot's new position.
			err = scan(ctx, conn, s.Name, req.PeekRequest, &to, func(t tx, _ bool) bool {
				if t.commitLSN >= to {
					return false
				}
				p.Skipped = append(p.Skipped, t.events...)
				return true
			})
		}
	case req.PastEvent != "":
		var skipped []Event
		err = scan(ctx, conn, s.Name, req.PeekRequest, nil, func(t tx, _ bool) bool {
			skipped = append(skipped, t.events...)
			for _, ev := range t.events {
				if strings.EqualFold(ev.ID, req.PastEvent) {
					e := ev
					p.Event, p.to, p.Skipped = &e, t.endLSN, skipped
					return false
				}
			}
			return true
		})
		if err == nil && p.Event == nil {
			return AdvancePlan{}, fmt.Errorf("%w: no pending INSERT in slot %q has %s %q (it may be published already, or the id is wrong): list what is pending with `walrelay slot peek %s`", ErrEventNotFound, s.Name, req.Router.Config().FieldEventID, req.PastEvent, s.Name)
		}
	default:
		return AdvancePlan{}, errors.New("advancing a slot needs a target: --to LSN or --past-event ID")
	}
	if err != nil {
		return AdvancePlan{}, err
	}
	p.To = p.to.String()
	return p, nil
}

// Advance moves the slot as planned with pg_replication_slot_advance,
// after checking again that nobody holds it and it has not moved since
// the plan. It returns the slot's new confirmed_flush_lsn.
func Advance(ctx context.Context, conn *pgx.Conn, p AdvancePlan) (string, error) {
	s, err := usableSlot(ctx, conn, p.Slot, "stop the relay before advancing it")
	if err != nil {
		return "", err
	}
	if s.ConfirmedFlushLSN != p.From {
		return "", fmt.Errorf("%w: slot %q moved from %s to %s while planning: run the command again", ErrRefused, p.Slot, p.From, s.ConfirmedFlushLSN)
	}
	if p.to == p.from {
		return p.From, nil
	}
	if p.records.Schema != "" {
		// Write-ahead, as the relay: the record first, then the slot.
		if _, err := p.records.Ensure(ctx, conn); err != nil {
			return "", err
		}
		note := p.note
		if note == "" {
			note = "walrelay slot advance"
		}
		note = fmt.Sprintf("%s (%s) from %s to %s", note, postgres.CurrentUser(ctx, conn), p.From, p.To)
		if err := slotrecord.Moved(ctx, conn, p.records, p.Slot, p.to, note); err != nil {
			return "", err
		}
	}
	var end string
	err = conn.QueryRow(ctx, `SELECT end_lsn::text FROM pg_replication_slot_advance($1, $2::pg_lsn)`, p.Slot, p.To).Scan(&end)
	if err != nil {
		return "", postgres.QueryError(fmt.Sprintf("advancing replication slot %q to %s", p.Slot, p.To), postgres.PrivilegeFix(ctx, conn), err)
	}
	return end, nil
}

// publishedColumns reads the columns of the publications' tables, which
// the router needs beyond what the Relation messages carry.
func publishedColumns(ctx context.Context, conn *pgx.Conn, pubs []string) (pgcatalog.Columns, error) {
	var oids []uint32
	err := conn.QueryRow(ctx, `
		SELECT coalesce(array_agg(DISTINCT (quote_ident(schemaname) || '.' || quote_ident(tablename))::regclass::oid), '{}')
		FROM pg_publication_tables WHERE pubname = ANY($1)`, pubs).Scan(&oids)
	if err != nil {
		return nil, fmt.Errorf("reading the publications' tables: %w", err)
	}
	return pgcatalog.ReadColumns(ctx, conn, oids)
}
