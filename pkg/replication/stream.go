package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Handler receives the decoded stream. All calls come from the goroutine
// running Stream.Run, in WAL order. A Handler error stops the stream for good
// (no reconnect): Run returns it wrapped, and nothing after the last confirmed
// position is acknowledged to Postgres.
//
// Messages passed in are owned by the Handler only for the duration of the
// call: the stream reuses them (copy what you keep), except
// *pglogrepl.RelationMessage, which stays valid for the session. Tuple bytes
// point into the receive buffer: an Insert's stay valid while the Handler
// holds its Buffer, any other's must be copied if kept.
type Handler interface {
	// Begin starts a transaction. m.FinalLSN is its commit LSN.
	Begin(ctx context.Context, m *pglogrepl.BeginMessage) error
	// Relation announces (or re-announces after a schema change) a table.
	Relation(ctx context.Context, rel *pglogrepl.RelationMessage) error
	// Insert is one inserted row; lsn is the WAL position of the change.
	// The tuple's bytes are in buf: to keep them past the call, hold it
	// (Buffer.Hold), or copy them if it refuses.
	Insert(ctx context.Context, rel *pglogrepl.RelationMessage, m *pglogrepl.InsertMessage, lsn pglogrepl.LSN, buf *Buffer) error
	// Update is one updated row (only when the publication publishes updates).
	Update(ctx context.Context, rel *pglogrepl.RelationMessage, m *pglogrepl.UpdateMessage, lsn pglogrepl.LSN) error
	// Delete is one deleted row (only when the publication publishes deletes).
	Delete(ctx context.Context, rel *pglogrepl.RelationMessage, m *pglogrepl.DeleteMessage, lsn pglogrepl.LSN) error
	// Truncate names the truncated tables.
	Truncate(ctx context.Context, rels []*pglogrepl.RelationMessage, m *pglogrepl.TruncateMessage, lsn pglogrepl.LSN) error
	// Message is a pg_logical_emit_message record, transactional or not.
	Message(ctx context.Context, m *pglogrepl.LogicalDecodingMessage, lsn pglogrepl.LSN) error
	// Commit ends the transaction; m.TransactionEndLSN is what becomes
	// confirmable once all its records are acknowledged.
	Commit(ctx context.Context, m *pglogrepl.CommitMessage) error
	// SessionLost is called when a session ends (connection lost, server
	// restart) before the stream reconnects. A transaction begun and not
	// committed in that session will be sent again from its Begin.
	SessionLost()
	// SessionStart is called at the start of every session, once the
	// stream has identified the server and read the slot on the session's
	// connection, before START_REPLICATION and before the session sends
	// any status update: what the Checkpointer confirms from then on is
	// reported to this server. An error stops the stream for good.
	SessionStart(ctx context.Context, s Session) error
}

// Session is what a session's connection says about the server and the
// slot before streaming starts.
type Session struct {
	// SystemID is IDENTIFY_SYSTEM's systemid: it names the cluster's WAL
	// history from its initdb on (a physical standby shares it).
	SystemID string
	// Timeline is IDENTIFY_SYSTEM's timeline: it changes when a standby
	// is promoted and after a point-in-time recovery.
	Timeline int32
	// XLogPos is IDENTIFY_SYSTEM's xlogpos: the server's WAL flush
	// position now. No position of its WAL history that a client has
	// seen lies beyond it.
	XLogPos pglogrepl.LSN
	// SlotConfirmed is the slot's confirmed_flush_lsn: the session streams
	// the transactions that commit after it.
	SlotConfirmed pglogrepl.LSN
}

func (s Session) String() string {
	return fmt.Sprintf("system %s timeline %d", s.SystemID, s.Timeline)
}

// Checkpointer is the source of the positions the stream reports, and of
// backpressure. pkg/checkpoint's Tracker implements it.
type Checkpointer interface {
	// Confirmed is the LSN up to which every record is durably published.
	// It may move on another goroutine (an acknowledgement) while records
	// are in flight; otherwise only through calls the stream makes.
	Confirmed() pglogrepl.LSN
	// InFlight is what was handed on and not yet acknowledged. While
	// records are in flight the stream looks at Confirmed every
	// confirmEvery, so that a position that moved is reported soon.
	InFlight() (records int, bytes int64)
	// ObserveWALEnd reports a keepalive's server WAL end; the Checkpointer
	// may confirm it when nothing is in flight.
	ObserveWALEnd(lsn pglogrepl.LSN)
	// WaitRoom reports whether more may be read, waiting until `until` for
	// in-flight records to be acknowledged.
	WaitRoom(ctx context.Context, until time.Time) bool
	// WaitRoomFor reports whether a message of n bytes, read once
	// WaitRoom let the stream read, may be handed to the Handler, waiting
	// until `until`: a message larger than the byte cap waits until
	// nothing is in flight. The stream calls it for every XLogData
	// message, so it must answer cheaply for one within the cap.
	WaitRoomFor(ctx context.Context, until time.Time, n int) bool
	// WaitDrained returns nil once nothing is in flight.
	WaitDrained(ctx context.Context) error
}

// Config configures a Stream. Zero durations take the defaults below.
type Config struct {
	// DSN is a libpq connection string or URL; replication=database is set
	// by the stream. The role needs the REPLICATION attribute.
	DSN string
	// Slot is the logical replication slot (plugin pgoutput) to stream from.
	Slot string
	// Publications are the pgoutput publication names.
	Publications []string
	// StatusInterval is the longest time between two standby status
	// updates (default 1s): when the confirmed position does not move, an
	// update every StatusInterval keeps the walsender from timing the
	// session out. A position that moved is reported sooner (confirmEvery).
	StatusInterval time.Duration
	// ShutdownTimeout bounds the wait for in-flight records on shutdown
	// (default 30s).
	ShutdownTimeout time.Duration
	// MinBackoff and MaxBackoff bound the reconnect delay (defaults 250ms, 30s).
	MinBackoff, MaxBackoff time.Duration
	// LargeMessage, when set, is called on the stream's goroutine with the
	// size of a message larger than the standard receive buffer (512 KiB)
	// before the stream allocates a buffer for it: the process may then
	// hold that much beyond the in-flight caps (walrelay run raises Go's
	// memory limit with it).
	LargeMessage func(n int)
	// ReadWait is how long a read waits, after one that returned little,
	// for a batch of messages to arrive (0: never wait). It bounds the
	// latency it adds.
	ReadWait time.Duration
}

// Stream is a logical replication client for one slot. Create it with New
// and run it with Run; a Stream is run once.
type Stream struct {
	cfg     Config
	handler Handler
	cp      Checkpointer
	log     *slog.Logger

	relations map[uint32]*pglogrepl.RelationMessage
	inTx      bool
	dec       decoder
	server    Session // the last session's; zero before the first

	// Live state for metrics, readiness and status; read from any goroutine.
	streaming  atomic.Bool
	received   atomic.Uint64
	reconnects atomic.Uint64
	lastErr    atomic.Pointer[error]
}

// Streaming reports whether a session is streaming from the slot now.
func (s *Stream) Streaming() bool { return s.streaming.Load() }

// Received is the newest WAL position received from the server.
func (s *Stream) Received() pglogrepl.LSN { return pglogrepl.LSN(s.received.Load()) }

// Reconnects counts streaming sessions that were lost (and are being
// re-established). Failed attempts to start one, such as a standby's while
// the slot is held elsewhere, do not count.
func (s *Stream) Reconnects() uint64 { return s.reconnects.Load() }

// LastError is the error that ended the last session, nil if none did.
func (s *Stream) LastError() error {
	if p := s.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// New returns a Stream. It does not connect.
func New(cfg Config, h Handler, cp Checkpointer, log *slog.Logger) *Stream {
	if cfg.StatusInterval <= 0 {
		cfg.StatusInterval = time.Second
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 250 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Stream{cfg: cfg, handler: h, cp: cp, log: log, relations: make(map[uint32]*pglogrepl.RelationMessage)}
}

// Run streams until ctx is done or a permanent error occurs. Lost
// connections are retried with backoff. When ctx is done it drains
// (bounded by ShutdownTimeout), sends the final confirmed position and
// returns nil.
func (s *Stream) Run(ctx context.Context) error {
	backoff := s.cfg.MinBackoff
	for {
		streamed, err := s.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			s.lastErr.Store(&err)
		}
		if !retryable(err) {
			return err
		}
		s.lose()
		if streamed {
			backoff = s.cfg.MinBackoff
			s.reconnects.Add(1)
		}
		s.log.Warn("replication session lost; reconnecting", "slot", s.cfg.Slot, "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, s.cfg.MaxBackoff)
	}
}

// lose forgets the session's state: Postgres re-sends Relation messages and
// any transaction it was in the middle of.
func (s *Stream) lose() {
	clear(s.relations)
	s.inTx = false
	s.handler.SessionLost()
}

// session runs one connection. streamed reports whether START_REPLICATION
// succeeded, which resets the backoff.
func (s *Stream) session(ctx context.Context) (streamed bool, err error) {
	conn, in, err := s.connect(ctx)
	if err != nil {
		return false, err
	}
	sess, err := s.identify(ctx, conn)
	if err == nil {
		err = s.start(ctx, sess)
	}
	if err != nil {
		_ = conn.Close(context.Background())
		return false, err
	}
	// The stream owns the connection outright from here: it starts
	// replication and reads the copy-both stream itself (replConn), with
	// socket deadlines instead of pgconn's per-message locking and context
	// watching, and into buffers whose bytes handlers may keep.
	w, err := newReplConn(ctx, conn, in)
	if err != nil {
		_ = conn.Close(context.Background())
		return false, fmt.Errorf("taking over the replication connection: %w", err)
	}
	defer w.close()
	w.frames.large = s.cfg.LargeMessage
	if err := w.startReplication(ctx, startReplicationSQL(s.cfg.Slot, s.cfg.Publications)); err != nil {
		return false, fmt.Errorf("starting replication on slot %q: %w", s.cfg.Slot, err)
	}
	s.log.Info("streaming from slot", "slot", s.cfg.Slot, "publications", s.cfg.Publications, "confirmed", s.cp.Confirmed().String())
	s.streaming.Store(true)
	defer s.streaming.Store(false)

	err = s.loop(ctx, w)
	if ctx.Err() != nil && err == nil {
		s.shutdown(w)
	}
	return true, err
}

// identify reads, on the session's connection, what identifies the
// server (IDENTIFY_SYSTEM) and where the slot stands. A replication
// connection to a database runs SQL too. A slot held by another process
// fails the session now (as START_REPLICATION would), so that the
// position read is not one its holder moves on before this session takes
// the slot.
func (s *Stream) identify(ctx context.Context, conn *pgconn.PgConn) (Session, error) {
	id, err := pglogrepl.IdentifySystem(ctx, conn)
	if err != nil {
		return Session{}, fmt.Errorf("identifying the server (IDENTIFY_SYSTEM): %w", err)
	}
	sess := Session{SystemID: id.SystemID, Timeline: id.Timeline, XLogPos: id.XLogPos}
	results, err := conn.Exec(ctx, "SELECT confirmed_flush_lsn, active_pid FROM pg_catalog.pg_replication_slots WHERE slot_name = "+quoteLiteral(s.cfg.Slot)).ReadAll()
	if err != nil {
		return Session{}, fmt.Errorf("reading replication slot %q: %w", s.cfg.Slot, err)
	}
	if len(results) != 1 || len(results[0].Rows) == 0 {
		return Session{}, permanent(fmt.Errorf("%w: %q", ErrSlotMissing, s.cfg.Slot))
	}
	row := results[0].Rows[0]
	if len(row) != 2 {
		return Session{}, fmt.Errorf("reading replication slot %q: %d columns", s.cfg.Slot, len(row))
	}
	if row[0] != nil { // NULL for a slot not yet consistent
		if sess.SlotConfirmed, err = pglogrepl.ParseLSN(string(row[0])); err != nil {
			return Session{}, fmt.Errorf("parsing confirmed_flush_lsn %q of slot %q: %w", row[0], s.cfg.Slot, err)
		}
	}
	if row[1] != nil {
		return Session{}, fmt.Errorf("%w: slot %q, walsender pid %s", ErrSlotActive, s.cfg.Slot, row[1])
	}
	return sess, nil
}

// start hands a session's identity to the Handler. A server with another
// identity than the last session's starts the received position anew.
func (s *Stream) start(ctx context.Context, sess Session) error {
	if prev := s.server; prev.SystemID != "" && (prev.SystemID != sess.SystemID || prev.Timeline != sess.Timeline) {
		s.log.Info("the server is another system or on another timeline than in the last session",
			"slot", s.cfg.Slot, "server", sess.String(), "previous", prev.String())
		s.received.Store(0)
	}
	s.server = sess
	if err := s.handler.SessionStart(ctx, sess); err != nil {
		return permanent(fmt.Errorf("starting a session on slot %q (%s): %w", s.cfg.Slot, sess, err))
	}
	return nil
}

// connect opens a replication connection, read through the returned
// coalescingReader.
func (s *Stream) connect(ctx context.Context) (*pgconn.PgConn, *coalescingReader, error) {
	cfg, err := pgconn.ParseConfig(s.cfg.DSN)
	if err != nil {
		// pgconn's parse errors never include the password.
		return nil, nil, permanent(fmt.Errorf("parsing postgres DSN: %w", err))
	}
	cfg.RuntimeParams["replication"] = "database"
	cfg.RuntimeParams["application_name"] = "walrelay"
	// pgoutput formats values with the walsender's output functions; pin
	// the settings the router parses (timestamps, bytea).
	cfg.RuntimeParams["DateStyle"] = "ISO"
	cfg.RuntimeParams["TimeZone"] = "UTC"
	cfg.RuntimeParams["bytea_output"] = "hex"
	cfg.RuntimeParams["extra_float_digits"] = "3"
	// Everything is read through a coalescingReader: pgconn's frontend
	// while connecting, the stream's frame reader once it owns the
	// connection. pgconn dials, then builds the frontend, one address at a
	// time: the socket dialed last is the one read (through TLS, when used).
	var dialed net.Conn
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		dialed = c
		return c, err
	}
	var in *coalescingReader
	cfg.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
		in = newCoalescingReader(ctx, r, dialed, s.cfg.ReadWait)
		return pgproto3.NewFrontend(in, w)
	}
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("connecting for replication to %s: %w", describe(cfg), err)
	}
	return conn, in, nil
}

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
func (s *Stream) loop(ctx context.Context, w *replConn) error {
	rep := reporter{interval: s.cfg.StatusInterval}
	// The clock is read every clockEvery messages, not for each: a message
	// from the read buffer takes well under a microsecond to handle, a
	// clock read 50 ns. It is read, and the reporter's plan made afresh,
	// before a receive that needs the socket (and may wait there), so that
	// the wait ends in time for a position an ack moves meanwhile. Waits
	// end at rep.due (the receive's deadline, WaitRoom's).
	var now time.Time
	fresh := 0
	for {
		if ctx.Err() != nil {
			return nil
		}
		if fresh--; fresh <= 0 || !w.frames.buffered() {
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
		typ, body, buf, err := w.receive(ctx, rep.due)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) {
				fresh = 0
				continue
			}
			return fmt.Errorf("receiving from slot %q: %w", s.cfg.Slot, err)
		}
		switch typ {
		case msgCopyData:
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
					s.cp.ObserveWALEnd(ka.ServerWALEnd)
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
		case msgErrorResponse:
			return fmt.Errorf("streaming from slot %q: %w", s.cfg.Slot, serverError(body))
		case msgCopyDone:
			return fmt.Errorf("streaming from slot %q: server ended the replication stream", s.cfg.Slot)
		}
	}
}

// admit holds a message of n bytes that the Checkpointer does not let
// through yet (larger than the byte cap, with records in flight) until it
// does, reporting status meanwhile as the loop would. The message stays
// in the receive buffer: nothing is read while it waits. It returns nil
// as well when ctx is done.
func (s *Stream) admit(ctx context.Context, w *replConn, rep *reporter, n int) error {
	for !s.cp.WaitRoomFor(ctx, rep.due, n) {
		if ctx.Err() != nil {
			return nil
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
func (s *Stream) report(w *replConn, rep *reporter, now time.Time) error {
	lsn, err := s.sendStatus(w)
	if err != nil {
		return err
	}
	rep.sent, rep.sentAt, rep.next = lsn, now, now.Add(rep.interval)
	rep.plan(now, s.cp)
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
func (s *Stream) sendStatus(w *replConn) (pglogrepl.LSN, error) {
	lsn := s.cp.Confirmed()
	if err := w.sendStatus(lsn, lsn, lsn); err != nil {
		return lsn, fmt.Errorf("sending standby status (flush %s): %w", lsn, err)
	}
	return lsn, nil
}

// shutdown waits (bounded) for in-flight records, keeps the walsender
// informed while it waits (a position that moved soon, as the loop does,
// and one update every StatusInterval), then reports the final confirmed
// position.
func (s *Stream) shutdown(w *replConn) {
	deadline := time.Now().Add(s.cfg.ShutdownTimeout)
	// Not a position Confirmed can take: the first step reports, whatever
	// the loop last did.
	sent := ^pglogrepl.LSN(0)
	next := time.Now().Add(s.cfg.StatusInterval)
	for {
		step := time.Now().Add(confirmEvery)
		if step.After(deadline) {
			step = deadline
		}
		waitCtx, cancel := context.WithDeadline(context.Background(), step)
		err := s.cp.WaitDrained(waitCtx)
		cancel()
		if err == nil {
			break
		}
		if !time.Now().Before(deadline) {
			s.log.Warn("shutdown timeout reached with records in flight; they will be re-sent after restart", "err", err)
			break
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			s.log.Warn("not waiting for in-flight records", "err", err)
			break
		}
		if now := time.Now(); s.cp.Confirmed() != sent || !now.Before(next) {
			if sent, err = s.sendStatus(w); err != nil {
				s.log.Warn("reporting position during shutdown", "err", err)
				return
			}
			next = now.Add(s.cfg.StatusInterval)
		}
	}
	if _, err := s.sendStatus(w); err != nil {
		s.log.Warn("reporting final position", "err", err)
		return
	}
	s.log.Info("stopped streaming", "slot", s.cfg.Slot, "confirmed", s.cp.Confirmed().String())
}

// startReplicationSQL starts logical replication from the slot's
// confirmed position (0/0 asks for it) with pgoutput's options.
func startReplicationSQL(slot string, pubs []string) string {
	return "START_REPLICATION SLOT " + quoteIdent(slot) + " LOGICAL 0/0 (" + strings.Join(pluginArgs(pubs), ", ") + ")"
}

// pluginArgs are pgoutput's options. Publication names are quoted as
// identifiers (pgoutput splits the list with SplitIdentifierString) and the
// whole value as a string literal.
func pluginArgs(pubs []string) []string {
	names := make([]string, len(pubs))
	for i, p := range pubs {
		names[i] = quoteIdent(p)
	}
	return []string{
		"proto_version '1'",
		"publication_names " + quoteLiteral(strings.Join(names, ",")),
		"messages 'true'",
	}
}

func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

func quoteLiteral(s string) string {
	return `'` + strings.ReplaceAll(s, `'`, `''`) + `'`
}

// describe names a connection target without its password.
func describe(cfg *pgconn.Config) string {
	return fmt.Sprintf("host=%s port=%d user=%s database=%s", cfg.Host, cfg.Port, cfg.User, cfg.Database)
}
