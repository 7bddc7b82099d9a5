package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
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
	// SessionStreaming is called once START_REPLICATION succeeded, before
	// the first message is read and before any status update: the session
	// holds the slot now (Postgres lets one process at a time stream from
	// it). An error stops the stream for good.
	SessionStreaming(ctx context.Context) error
}

// WALEndHandler is a Handler that has a say in confirming idle positions.
// The stream calls WALEnd on its goroutine with the server WAL end of each
// keepalive received outside a transaction (how far the walsender has
// decoded and sent: every transaction committed before it was sent
// already), before it hands that position to Checkpointer.ObserveWALEnd,
// and hands it on only when WALEnd returns true. An error ends the stream
// as a Handler's does (ErrRestartSession restarts the session).
type WALEndHandler interface {
	WALEnd(ctx context.Context, lsn pglogrepl.LSN) (confirm bool, err error)
}

// ReplyHandler is a Handler told when the walsender asks for a reply (a
// keepalive with ReplyRequested) outside a transaction. A walsender asks
// when it waits for the client's position: after wal_sender_timeout/2
// without a reply, and when the server shuts down (walsender.c's
// WalSndDone), where it exits only once the reported flush position
// equals walEnd, everything it sent, or once the client closes the
// connection. The stream calls ReplyRequested on its goroutine, before it
// replies; it must not block.
type ReplyHandler interface {
	ReplyRequested(walEnd pglogrepl.LSN)
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
	// Forks are the earlier timelines of the server's history
	// (TIMELINE_HISTORY), each with the position where it ended and the
	// next one began (a promotion): the WAL of timeline t up to Forks[t]
	// is part of this server's history. Nil on timeline 1, or when the
	// history could not be read (then no earlier timeline counts).
	Forks map[int32]pglogrepl.LSN
}

func (s Session) String() string {
	return fmt.Sprintf("system %s timeline %d", s.SystemID, s.Timeline)
}

// HasWAL reports whether the WAL up to lsn of the given timeline of this
// system is part of the server's history: on the server's own timeline up
// to its WAL position, on an earlier one up to where it ended (Forks). A
// promoted standby's history holds its old primary's timeline up to the
// promotion, and not what that primary wrote after it.
func (s Session) HasWAL(timeline int32, lsn pglogrepl.LSN) bool {
	if timeline == s.Timeline {
		return lsn <= s.XLogPos
	}
	end, ok := s.Forks[timeline]
	return ok && lsn <= end
}

// Checkpointer is the source of the positions the stream reports, and of
// backpressure. internal/checkpoint's Tracker implements it.
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

// Config configures a Stream. The timings are required (New refuses a
// zero one): walrelay sets them from its config (postgres.status_interval,
// min_backoff, max_backoff, relay.shutdown_timeout).
type Config struct {
	// DSN is a libpq connection string or URL; replication=database is set
	// by the stream. The role needs the REPLICATION attribute.
	DSN string
	// Slot is the logical replication slot (plugin pgoutput) to stream from.
	Slot string
	// Publications are the pgoutput publication names.
	Publications []string
	// StatusInterval is the longest time between two standby status
	// updates (walrelay's default 1s): when the confirmed position does not move, an
	// update every StatusInterval keeps the walsender from timing the
	// session out. A position that moved is reported sooner (confirmEvery).
	StatusInterval time.Duration
	// ShutdownTimeout bounds the wait for in-flight records on shutdown
	// (0: no wait; walrelay's default 30s).
	ShutdownTimeout time.Duration
	// MinBackoff and MaxBackoff bound the reconnect delay (walrelay's
	// defaults 250ms, 30s); MaxBackoff is at least MinBackoff.
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
	walEnd  WALEndHandler // handler, when it is one; nil otherwise
	replies ReplyHandler  // handler, when it is one; nil otherwise
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
	lastErr    atomic.Pointer[sessionEnd]

	// ending is EndSession's cause for the session streaming now; live
	// (under endMu with it) is whether one streams.
	endMu  sync.Mutex
	live   bool
	ending atomic.Pointer[error]
}

// sessionEnd is how the last session ended: its error, and when.
type sessionEnd struct {
	err error
	at  time.Time
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
	_, err := s.LastSessionEnd()
	return err
}

// LastSessionEnd is when the last session that ended with an error ended
// (the zero time if none did), and LastError. A standby's attempts end
// with ErrSlotActive, the next one starting at most Config.MaxBackoff
// later: an older end means the attempt running now hangs (readiness reads
// it so).
func (s *Stream) LastSessionEnd() (time.Time, error) {
	if p := s.lastErr.Load(); p != nil {
		return p.at, p.err
	}
	return time.Time{}, nil
}

// New validates cfg and returns a Stream. It does not connect. A Config
// with a timing unset or out of range is an error: the stream has no
// defaults of its own (walrelay's come from config.Default, through
// postgres.* and relay.shutdown_timeout).
func New(cfg Config, h Handler, cp Checkpointer, log *slog.Logger) (*Stream, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("configuring the replication stream: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	walEnd, _ := h.(WALEndHandler)
	replies, _ := h.(ReplyHandler)
	return &Stream{cfg: cfg, handler: h, walEnd: walEnd, replies: replies, cp: cp, log: log, relations: make(map[uint32]*pglogrepl.RelationMessage)}, nil
}

// EndSession ends the session streaming now, if one does, as a lost
// connection would: the stream stops reading, closes the replication
// connection without a final status update (so that the walsender exits
// and the slot keeps the last position reported), calls
// Handler.SessionLost, and connects again after Config.MinBackoff, then
// with backoff. The session's error wraps ErrRestartSession and cause.
// walrelay calls it when Postgres is shutting down and the slot's
// position cannot be recorded: a walsender at shutdown waits for its
// client to confirm everything it sent (see ReplyHandler), and waits for
// ever for one that may not. It is safe to call from any goroutine; a
// call while no session streams is ignored. The stream notices it before
// the next message, and at the latest by the next status update. It
// reports whether a session was streaming and is now ending for cause.
func (s *Stream) EndSession(cause error) bool {
	s.endMu.Lock()
	defer s.endMu.Unlock()
	if !s.live || s.ending.Load() != nil {
		return false
	}
	s.ending.Store(&cause)
	return true
}

// streamingSession marks a session as streaming (live) or not, for
// EndSession; each start forgets what ended the one before.
func (s *Stream) streamingSession(live bool) {
	s.endMu.Lock()
	defer s.endMu.Unlock()
	s.live = live
	s.ending.Store(nil)
}

// ended returns the error that ends the session when EndSession was
// called during it, nil otherwise.
func (s *Stream) ended() error {
	p := s.ending.Load()
	if p == nil {
		return nil
	}
	return fmt.Errorf("ending the session on slot %q: %w: %w", s.cfg.Slot, ErrRestartSession, *p)
}

// validate reports the first timing of c that is unset or out of range.
func (c *Config) validate() error {
	switch {
	case c.StatusInterval <= 0:
		return fmt.Errorf("Config.StatusInterval %s must be positive", c.StatusInterval)
	case c.ShutdownTimeout < 0:
		return fmt.Errorf("Config.ShutdownTimeout %s must not be negative", c.ShutdownTimeout)
	case c.MinBackoff <= 0:
		return fmt.Errorf("Config.MinBackoff %s must be positive", c.MinBackoff)
	case c.MaxBackoff < c.MinBackoff:
		return fmt.Errorf("Config.MaxBackoff %s must be at least Config.MinBackoff %s", c.MaxBackoff, c.MinBackoff)
	}
	return nil
}

// Run streams until ctx is done or a permanent error occurs. Lost
// connections are retried with backoff. When ctx is done it drains
// (bounded by ShutdownTimeout), sends the final confirmed position and
// returns nil.
func (s *Stream) Run(ctx context.Context) error {
	backoff := s.cfg.MinBackoff
	waiting := false       // a standby: the slot is held by another process
	waitingSynced := false // the wait on a synchronized copy was logged
	for {
		streamed, err := s.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		err = withDetail(err)
		if err != nil {
			s.lastErr.Store(&sessionEnd{err: err, at: time.Now()})
		}
		if !retryable(err) {
			return err
		}
		s.lose()
		if streamed {
			backoff = s.cfg.MinBackoff
			s.reconnects.Add(1)
			waiting = false
		}
		standby, synced := errors.Is(err, ErrSlotActive), errors.Is(err, ErrSlotSynced)
		if !standby {
			waiting = false
		}
		if !synced {
			waitingSynced = false
		}
		switch {
		case standby && !waiting:
			// A standby's state, said once (at each change): not a
			// warning per attempt. "streaming from slot" says when
			// it takes over.
			s.log.Info("standby: another process streams from the slot; waiting to take it over (retries are logged at debug)",
				"slot", s.cfg.Slot, "err", err, "retry_every_up_to", s.cfg.MaxBackoff)
			waiting = true
		case standby:
			s.log.Debug("standby: the slot is still held by another process", "slot", s.cfg.Slot, "err", err, "backoff", backoff)
		case synced && !waitingSynced:
			// One line for the whole wait: it lasts until a promotion.
			s.log.Warn("waiting for this standby's promotion to stream from the slot", "slot", s.cfg.Slot, "err", err)
			waitingSynced = true
		case synced:
			s.log.Debug("still waiting for this standby's promotion", "slot", s.cfg.Slot, "backoff", backoff)
		default:
			s.log.Warn("replication session lost; reconnecting", "slot", s.cfg.Slot, "err", err, "backoff", backoff)
		}
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
