package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/checkpoint"
	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/deadletter"
	"github.com/walrelay/walrelay/internal/eoscheckpoint"
	"github.com/walrelay/walrelay/internal/heartbeat"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/internal/replication"
	"github.com/walrelay/walrelay/internal/resume"
	"github.com/walrelay/walrelay/internal/router"
)

// ErrStopped is returned (wrapped) when a row's configured behaviour is to
// stop the relay: a relay.on_error policy of stop, or
// table.op.invalid.behavior=fatal.
var ErrStopped = errors.New("relay stopped by configured behaviour")

// handler implements replication.Handler. Its methods run on the stream's
// goroutine; only the produce callbacks run elsewhere.
type handler struct {
	log      *slog.Logger
	tracker  *checkpoint.Tracker
	metrics  *metrics.Metrics
	clock    monoClock
	router   *router.Router
	records  *recordPool
	delivery delivery
	rec      *recorder          // walrelay's record of the slot
	hb       *heartbeat.Emitter // heartbeats seen come back through the stream
	// relationOf completes a Relation message with the catalog
	// (Relay.relationOf).
	relationOf func(context.Context, *pglogrepl.RelationMessage) router.Relation
	// reject logs and counts a row that cannot be published as routed
	// and returns its policy (Relay.reject).
	reject func(o deadletter.Origin, class router.ErrorClass, err error, msg string) string
	// deadLetter wraps a dead letter for the producer
	// (Relay.deadLetterRecord).
	deadLetter func(deadLetterJob) *outRecord
	slot       string // postgres.slot
	// topicPattern and maxTopics are relay.topic_pattern (pattern
	// compiled) and relay.max_topics.
	topicPattern string
	maxTopics    int

	plans   map[uint32]*router.Plan
	topics  map[string]prometheus.Counter // events_published_total by admitted topic
	pattern *regexp.Regexp                // relay.topic_pattern; nil: any
	msg     router.Message                // reused by RouteTo for every row

	// The transaction being read.
	tx *checkpoint.Tx
	// commitTime is copied from its Begin (the message is reused by the
	// stream); it stamps the records. commitAt is the commit time on the
	// relay's clock (anchor), for latencies.
	commitTime time.Time
	commitAt   time.Duration
	// final and xid name the transaction (its Begin), for checkpoints.
	final  pglogrepl.LSN
	xid    uint32
	anchor wallAnchor
	// resume decides what of a session's messages was handled before a
	// break and is passed over, so a reconnect duplicates nothing.
	resume resume.State
	// server is the last session's server; zero before the first.
	server replication.Session
	// skip passes over the rows a relay taken over had published
	// (SkipPublished).
	skip publishedSkip
	// messages routes the table-less outbox's logical messages
	// (outbox.message_prefix); nil when it is off.
	messages *router.MessagePlan
	// warnedNonTx: a non-transactional message with the outbox prefix
	// was logged.
	warnedNonTx bool
	// avro finishes the avro converter's keys and values (avro.go); nil
	// when neither side is avro.
	avro *avroStage
}

// newHandler is the stream's handler for r, with the parts of it the
// handler uses.
func newHandler(r *Relay) *handler {
	pattern, _ := r.cfg.Relay.TopicRegexp() // validated by config
	return &handler{log: r.log, tracker: r.tracker, metrics: r.metrics, clock: r.clock, router: r.router,
		records: &r.records, delivery: r.delivery, rec: r.rec, hb: r.hb,
		relationOf: r.relationOf, reject: r.reject, deadLetter: r.deadLetterRecord,
		slot: r.cfg.Postgres.Slot, topicPattern: r.cfg.Relay.TopicPattern, maxTopics: r.cfg.Relay.MaxTopics,
		plans: make(map[uint32]*router.Plan), topics: make(map[string]prometheus.Counter), pattern: pattern, avro: r.avro}
}

func (h *handler) Begin(ctx context.Context, m *pglogrepl.BeginMessage) error {
	if h.resume.Proving() {
		proved, why := h.resume.ProveBegin(resume.Mark{CommitLSN: m.FinalLSN, Xid: m.Xid, CommitTime: m.CommitTime})
		if why != "" {
			return h.disprove(ctx, why)
		}
		if proved {
			h.proved()
		}
	}
	open, _ := h.resume.Open()
	act := h.resume.Begin(m.FinalLSN)
	if act != resume.BeginReplay {
		h.skip.begin(h.log, m.Xid, m.FinalLSN)
	}
	h.final, h.xid = m.FinalLSN, m.Xid
	switch act {
	case resume.BeginReplay:
		return nil
	case resume.BeginResume:
		h.log.Info("resuming a transaction after reconnecting", "commit_lsn", m.FinalLSN.String(), "rows_already_handled", h.resume.Handled())
		return nil
	case resume.BeginReplace:
		// Not re-sent as expected: it confirms nothing, and its records
		// are dropped from the tracker as they are acked.
		h.log.Warn("a transaction left open by a lost session was not re-sent first; its records may be published twice",
			"commit_lsn", open.String(), "next_commit_lsn", m.FinalLSN.String())
		h.tracker.Abort(h.tx)
	}
	if n := h.resume.Handled(); n > 0 {
		h.log.Info("passing over the rows of a transaction the checkpoint says were published", "commit_lsn", m.FinalLSN.String(), "xid", m.Xid, "rows", n)
	}
	h.tx, h.commitTime = h.tracker.BeginAt(m.CommitTime), m.CommitTime
	h.metrics.Transactions.Inc()
	// pgoutput sends a transaction only after it committed, so this is how
	// long it took Postgres to decode and send it and this process to read
	// it (plus the age of any backlog ahead of it).
	now := h.clock.now()
	h.commitAt = h.anchor.place(h.clock, now, m.CommitTime)
	h.metrics.CommitReadLatency.Observe((now - h.commitAt).Seconds())
	return nil
}

func (h *handler) Commit(ctx context.Context, m *pglogrepl.CommitMessage) error {
	if h.resume.Proving() {
		proved, why := h.resume.ProveCommit(m.TransactionEndLSN)
		if why != "" {
			return h.disprove(ctx, why)
		}
		if proved {
			h.proved()
		}
	}
	switch h.resume.Commit(m.TransactionEndLSN) {
	case resume.CommitReplayed:
		return nil
	case resume.CommitNone:
		return fmt.Errorf("commit at %s without a begin", m.CommitLSN)
	}
	h.tracker.Commit(h.tx, m.TransactionEndLSN)
	h.delivery.commit(m.TransactionEndLSN, eoscheckpoint.Last{CommitLSN: h.final, Xid: h.xid, CommitTime: h.commitTime})
	h.tx = nil
	h.skip.commit(h.log)
	return nil
}

// SessionLost keeps an open transaction open: Postgres re-sends it from
// its Begin (see internal/resume).
func (h *handler) SessionLost() {
	if commitLSN, open := h.resume.Open(); open {
		h.log.Info("replication session lost inside a transaction; it resumes when Postgres sends it again",
			"commit_lsn", commitLSN.String(), "rows_handled", h.resume.Handled(), "rows_this_session", h.resume.Seen())
	}
	h.resume.Lost()
}

// SessionStart takes a session's server and slot before it streams. On
// the same WAL history as the last session it raises the tracker to the
// slot's position: a standby that takes over a slot another process moved
// on since this one read it reports where the slot is, not the position
// it read at startup. On another history (another system or timeline, or
// WAL that ends before what this process has handled or confirmed), LSNs
// handled so far mean nothing there: it resets (see resetHistory).
func (h *handler) SessionStart(ctx context.Context, s replication.Session) error {
	prev := h.server
	var why string
	switch seen := max(h.resume.Through(), h.tracker.Confirmed()); {
	case prev.SystemID != "" && prev.SystemID != s.SystemID:
		why = "another system"
	case prev.SystemID != "" && prev.Timeline != s.Timeline:
		why = "another timeline"
	case s.XLogPos < seen:
		why = "the server's WAL ends before what this process handled: " + s.XLogPos.String() + " < " + seen.String()
	}
	if err := h.rec.session(ctx); err != nil { // the slot record's cap, as this session finds the slot
		return err
	}
	if why == "" {
		h.tracker.SetStart(s.SlotConfirmed)
	} else if err := h.resetHistory(ctx, s, prev, why); err != nil {
		return err
	}
	h.server = s
	if why != "" {
		h.delivery.historyChanged(s)
	}
	return nil
}

// SessionStreaming, with exactly-once delivery, starts from the checkpoint
// at the first session that got the slot, and at the first one after a
// change of WAL history (delivery.streaming).
func (h *handler) SessionStreaming(ctx context.Context) error {
	return h.delivery.streaming(ctx, h.server, &h.resume)
}

// proved raises the tracker to what a checkpoint covers once the slot
// sent its last transaction again (Through), and says so once the whole
// checkpoint is proven.
func (h *handler) proved() {
	h.tracker.SetStart(h.resume.Through())
	if !h.resume.Proving() {
		h.log.Info("the checkpoint is proven on this server's WAL: the slot sent again the transactions it names; what it covers stays skipped",
			"checkpoint_lsn", h.resume.Through().String(), "server", h.server.String())
	}
}

// disprove forgets a checkpoint the slot's stream disproved (why) before
// anything it skipped was confirmed, and restarts the session: the slot
// did not move past its position, so Postgres sends again what was
// passed over, and all of it is published (duplicates of what is on
// Kafka, where the checkpoint was right after all, never a loss).
func (h *handler) disprove(ctx context.Context, why string) error {
	s := h.server
	h.log.Warn("the checkpoint is not proven on this server's WAL: "+why+"; publishing everything the slot sends that no earlier checkpoint proven on this WAL covers",
		"server", s.String(), "slot_confirmed_flush_lsn", s.SlotConfirmed.String(), "confirmed", h.tracker.Confirmed().String())
	earlier, ok := h.resume.Proven()
	if err := h.resetHistory(ctx, s, s, "the checkpoint is not proven on this server's WAL"); err != nil {
		return err
	}
	at, last := s.SlotConfirmed, eoscheckpoint.Last{}
	if ok && earlier.Through > at {
		// Proven on the way: what it covers is in this WAL and on Kafka.
		at, last = earlier.Through, eoscheckpoint.Last{CommitLSN: earlier.Last.CommitLSN, Xid: earlier.Last.Xid, CommitTime: earlier.Last.CommitTime}
		h.resume.Seed(at, 0, 0)
		h.tracker.SetStart(at)
		h.log.Info("an earlier checkpoint is proven on this server's WAL: the transactions it covers stay skipped, everything after it is published",
			"checkpoint_lsn", at.String(), "last_commit_lsn", last.CommitLSN.String(), "last_xid", last.Xid)
	}
	h.delivery.restart(at, s, last)
	return fmt.Errorf("reading again from %s: %w", at, replication.ErrRestartSession)
}

// WALEnd lets the stream confirm an idle keepalive's server WAL end,
// except while a checkpoint is being proven: the walsender may have
// passed transactions the checkpoint skipped provisionally, and a WAL end
// at or past what the proof waits for disproves it (see
// replication.WALEndHandler).
func (h *handler) WALEnd(ctx context.Context, lsn pglogrepl.LSN) (confirm bool, err error) {
	if !h.resume.Proving() {
		return true, nil
	}
	if why := h.resume.ProveWALEnd(lsn); why != "" {
		return false, h.disprove(ctx, why)
	}
	return false, nil
}

// resetHistory forgets a WAL history before the stream reads another: the
// transaction the lost session left open is aborted (it will not be sent
// again), the records still in flight are waited for (their acks would
// otherwise raise the tracker to positions of the old history), then the
// tracker restarts at the new server's slot position and the resume
// bookkeeping forgets what was handled. Nothing of the old history is
// ever reported to the new server: the stream sends no status update
// before this returns. Re-sent transactions are published again; none is
// skipped.
func (h *handler) resetHistory(ctx context.Context, s, prev replication.Session, why string) error {
	h.log.Warn("the server's WAL history is not the one this process read so far; forgetting what it handled and starting from the slot",
		"why", why, "server", s.String(), "previous", prev.String(),
		"slot_confirmed_flush_lsn", s.SlotConfirmed.String(), "confirmed", h.tracker.Confirmed().String())
	if h.resume.Reset() {
		h.log.Warn("aborting the transaction the lost session left open; its records may be published twice")
		h.tracker.Abort(h.tx)
		h.tx = nil
	}
	// Logged now and every 10s while it waits.
	for records, bytes := h.tracker.InFlight(); records > 0; records, bytes = h.tracker.InFlight() {
		h.log.Warn("waiting for records of the previous WAL history to be acknowledged before reading the new one",
			"records", records, "bytes", bytes)
		step, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := h.tracker.WaitDrained(step)
		cancel()
		if err != nil && ctx.Err() != nil {
			return fmt.Errorf("waiting for records of the previous WAL history: %w", ctx.Err())
		}
	}
	h.tracker.Reset(s.SlotConfirmed)
	h.skip.reset()
	return nil
}

func (h *handler) Relation(ctx context.Context, rel *pglogrepl.RelationMessage) error {
	plan, err := h.router.Bind(h.relationOf(ctx, rel))
	if err != nil {
		return fmt.Errorf("outbox table changed: %w", err)
	}
	h.plans[rel.RelationID] = plan
	return nil
}

func (h *handler) Insert(ctx context.Context, rel *pglogrepl.RelationMessage, m *pglogrepl.InsertMessage, lsn pglogrepl.LSN, in *replication.Buffer) error {
	if h.resume.Skipping() {
		return nil
	}
	plan := h.plans[rel.RelationID]
	if plan == nil || h.tx == nil {
		return fmt.Errorf("insert into %s.%s at %s outside a transaction or before its relation", rel.Namespace, rel.RelationName, lsn)
	}
	// Before the resume count: the rows passed over are the same on every
	// pass, so the count covers only rows this relay handed on.
	if h.skip.insert(lsn) {
		h.log.Info("passing over an outbox row the relay taken over had published", "lsn", lsn.String(),
			"outbox_id", plan.EventID(m.Tuple.Columns), "xid", h.skip.p.Xid)
		return nil
	}
	if !h.resume.Insert() {
		return nil // handled before the session was lost
	}
	return h.publishRow(ctx, rel, plan, m.Tuple.Columns, lsn, in)
}

// publishRow routes one outbox row of the current transaction and hands
// its record on, or applies relay.on_error to a row it cannot route: the
// INSERTs the stream reads and the rows a snapshot reads go this one way.
// An error that is not a row's (the stream stopping, or the session lost
// while the row waited for the schema registry) is returned as is.
func (h *handler) publishRow(ctx context.Context, rel *pglogrepl.RelationMessage, plan *router.Plan, cols []*pglogrepl.TupleDataColumn, lsn pglogrepl.LSN, in *replication.Buffer) error {
	topic, err := h.publish(ctx, plan, cols, lsn, in)
	if err == nil {
		return nil
	}
	if we, ok := err.(*waitEnded); ok {
		return we.err
	}
	o := deadletter.Origin{LSN: lsn, ID: plan.EventID(cols), Table: plan.Table()}
	return h.refuse(o, err, "outbox row", func(class string) *deadletter.Letter {
		return deadletter.FromRow(rel, cols, o, class, err, topic)
	})
}

// publish routes an event's columns with plan, finishes its Avro (the
// schema registry's ids, which it may wait for), admits its topic and
// hands the record on. It returns the router's, the registry's or the
// admission's error, with the topic when it was routed, for refuse.
func (h *handler) publish(ctx context.Context, plan *router.Plan, cols []*pglogrepl.TupleDataColumn, lsn pglogrepl.LSN, in *replication.Buffer) (topic string, err error) {
	out, err := h.records.route(plan, &h.msg, cols, h.commitTime, lsn, in)
	if err != nil {
		return "", err
	}
	topic = out.rec.Topic
	if h.avro != nil && (!h.msg.KeyAvro.IsZero() || !h.msg.ValueAvro.IsZero()) {
		if err := h.avro.finish(ctx, out, &h.msg); err != nil {
			h.records.put(out)
			if _, ok := router.ClassOf(err); !ok {
				return topic, &waitEnded{err}
			}
			return topic, err
		}
	}
	published, err := h.admit(topic)
	if err != nil {
		h.records.put(out) // not produced (put clears it): its dead letter is built from the event
		return topic, err
	}
	h.produce(out, published)
	return "", nil
}

// refuse applies relay.on_error to an event (what: "outbox row", "outbox
// message") that cannot be published: stop returns ErrStopped, log skips
// it, dlq produces the dead letter letter builds in its place.
func (h *handler) refuse(o deadletter.Origin, err error, what string, letter func(class string) *deadletter.Letter) error {
	class, _ := router.ClassOf(err)
	switch h.reject(o, class, err, "cannot route "+what) {
	case config.PolicyStop:
		return fmt.Errorf("%w: %s %q at %s: %w: %s", ErrStopped, what, o.ID, o.LSN, err, stopFix(h.slot, o.ID))
	case config.PolicyLog:
		return nil
	}
	h.produceDeadLetter(letter(class.String()))
	return nil
}

// admit returns the events_published_total counter of a routed topic,
// admitting the topic the first time it is seen: it must match
// relay.topic_pattern, and there must be room for it under
// relay.max_topics. A topic refused is a topic_invalid row error.
func (h *handler) admit(topic string) (prometheus.Counter, error) {
	if published, ok := h.topics[topic]; ok {
		return published, nil
	}
	switch {
	case h.pattern != nil && !h.pattern.MatchString(topic):
		return nil, &router.RowError{Class: router.ClassTopicInvalid, Value: topic,
			Err: fmt.Errorf("topic %q does not match relay.topic_pattern %q", topic, h.topicPattern)}
	case len(h.topics) >= h.maxTopics:
		return nil, &router.RowError{Class: router.ClassTopicInvalid, Value: topic,
			Err: fmt.Errorf("topic %q would be the %d-th routed topic, past relay.max_topics", topic, len(h.topics)+1)}
	}
	published := h.metrics.Published(topic)
	h.topics[topic] = published
	return published, nil
}

// produce tracks out in the current transaction and hands it to the
// producer. The tracker counts it until its outcome (Relay.onProduced): a
// record the broker refuses for good follows relay.on_error
// (record_too_large, topic_rejected, payload_invalid); any other failure
// stops the relay. A refused record is never acked as published, so its
// LSN is not confirmed until its dead letter is acked (dlq) or it is
// deliberately skipped (log).
func (h *handler) produce(out *outRecord, published prometheus.Counter) {
	out.tx, out.size, out.published, out.committed = h.tx, out.bytes(), published, h.commitAt
	h.send(out)
}

// send tracks out in the current transaction and hands it on: to the
// producer, or with exactly-once delivery to the transaction loop.
func (h *handler) send(out *outRecord) {
	h.tracker.Add(out.tx, out.size)
	h.delivery.send(out, rowPos{final: h.final, xid: h.xid, at: h.commitTime, row: h.resume.Handled()})
}

// produceDeadLetter tracks the dead letter of a row the relay did not route
// in the current transaction and hands it to the producer: it is that
// row's record.
func (h *handler) produceDeadLetter(letter *deadletter.Letter) {
	out := h.deadLetter(deadLetterJob{letter: letter, tx: h.tx, withValue: true, committed: h.commitAt})
	out.size = out.bytes()
	h.send(out)
}

func (h *handler) Update(_ context.Context, rel *pglogrepl.RelationMessage, m *pglogrepl.UpdateMessage, lsn pglogrepl.LSN) error {
	if h.resume.Skipping() {
		return nil
	}
	id := ""
	if plan := h.plans[rel.RelationID]; plan != nil && m.NewTuple != nil {
		id = plan.EventID(m.NewTuple.Columns)
	}
	attrs := []any{"lsn", lsn.String(), "outbox_id", id, "table", rel.Namespace + "." + rel.RelationName, "behavior", h.router.InvalidOpBehavior().String()}
	const msg = "UPDATE on the outbox table ignored: outbox rows are insert-only"
	switch h.router.InvalidOpBehavior() {
	case router.OpFatal:
		h.log.Error("UPDATE on the outbox table; stopping (table.op.invalid.behavior=fatal)", attrs...)
		return fmt.Errorf("%w: UPDATE of outbox row %q at %s: %s", ErrStopped, id, lsn, stopFix(h.slot, id))
	case router.OpError:
		h.log.Error(msg, attrs...)
	default:
		h.log.Warn(msg, attrs...)
	}
	return nil
}

func (h *handler) Delete(_ context.Context, rel *pglogrepl.RelationMessage, _ *pglogrepl.DeleteMessage, lsn pglogrepl.LSN) error {
	h.log.Debug("DELETE on the outbox table ignored", "lsn", lsn.String(), "table", rel.Namespace+"."+rel.RelationName)
	return nil
}

func (h *handler) Truncate(_ context.Context, rels []*pglogrepl.RelationMessage, _ *pglogrepl.TruncateMessage, lsn pglogrepl.LSN) error {
	for _, rel := range rels {
		h.log.Info("TRUNCATE of the outbox table ignored", "lsn", lsn.String(), "table", rel.Namespace+"."+rel.RelationName)
	}
	return nil
}
