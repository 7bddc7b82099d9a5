package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/walrelay/walrelay/internal/pgsession"
	"github.com/walrelay/walrelay/internal/pgwire"
)

// session runs one connection. streamed reports whether START_REPLICATION
// succeeded, which resets the backoff.
func (s *Stream) session(ctx context.Context) (streamed bool, err error) {
	conn, in, err := s.connect(ctx)
	if err != nil {
		return false, err
	}
	if err := CheckServerVersion(conn.ParameterStatus("server_version")); err != nil {
		_ = conn.Close(context.Background())
		return false, permanent(err)
	}
	sess, err := s.identify(ctx, conn)
	if err == nil {
		err = s.start(ctx, sess)
	}
	if err != nil {
		_ = conn.Close(context.Background())
		return false, err
	}
	// The stream owns the connection outright from here (pgwire.Conn): it
	// starts replication and reads the copy-both stream into buffers whose
	// bytes handlers may keep.
	w, err := pgwire.Hijack(ctx, conn, in, s.cfg.LargeMessage)
	if err != nil {
		_ = conn.Close(context.Background())
		return false, fmt.Errorf("taking over the replication connection: %w", err)
	}
	defer w.Close()
	if err := w.StartReplication(ctx, startReplicationSQL(s.cfg.Slot, s.cfg.Publications)); err != nil {
		return false, fmt.Errorf("starting replication on slot %q: %w", s.cfg.Slot, err)
	}
	if err := s.handler.SessionStreaming(ctx); err != nil {
		return true, permanent(fmt.Errorf("starting to stream from slot %q: %w", s.cfg.Slot, err))
	}
	s.log.Info("streaming from slot", "slot", s.cfg.Slot, "publications", s.cfg.Publications, "confirmed", s.cp.Confirmed().String())
	s.streaming.Store(true)
	defer s.streaming.Store(false)
	s.streamingSession(true)
	defer s.streamingSession(false)

	err = s.loop(ctx, w)
	if ctx.Err() != nil && err == nil {
		s.shutdown(w)
	}
	return true, err
}

// minServerMajor is the oldest PostgreSQL the stream starts: pgoutput takes
// the messages option (logical decoding messages: heartbeats, the
// table-less outbox) from PostgreSQL 14 on, and refuses the whole
// START_REPLICATION on older servers.
const minServerMajor = 14

// CheckServerVersion returns an error wrapping ErrServerTooOld when the
// server is older than PostgreSQL 14, by the server_version it reported at
// connection ("15.4 (Debian 15.4-1)", "14beta1", "9.6.24";
// pgconn.PgConn.ParameterStatus("server_version")). An unreadable version
// is left to the server (START_REPLICATION fails on it). The stream calls
// it for every session; walrelay setup, slot create and check call it
// before creating or reporting anything.
func CheckServerVersion(version string) error {
	major, n := 0, 0
	for n < len(version) && version[n] >= '0' && version[n] <= '9' && n < 4 {
		major = major*10 + int(version[n]-'0')
		n++
	}
	if n == 0 || major >= minServerMajor {
		return nil
	}
	return fmt.Errorf("%w: the server is PostgreSQL %s, and walrelay starts replication with pgoutput's messages option (heartbeats, outbox.message_prefix), which PostgreSQL %d added: upgrade the server",
		ErrServerTooOld, version, minServerMajor)
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
	if id.Timeline > 1 {
		if sess.Forks, err = timelineForks(ctx, conn, id.Timeline); err != nil {
			// Without it no earlier timeline counts as this server's
			// history: duplicates, never a skip.
			s.log.Warn("cannot read the server's timeline history; positions of earlier timelines are not taken as part of it", "timeline", id.Timeline, "err", err)
		}
	}
	// synced (PostgreSQL 17+) is read through to_jsonb so that the query
	// runs on older servers too.
	results, err := conn.Exec(ctx, "SELECT confirmed_flush_lsn, active_pid, pg_catalog.pg_is_in_recovery() AND coalesce((pg_catalog.to_jsonb(s) ->> 'synced')::bool, false) FROM pg_catalog.pg_replication_slots s WHERE slot_name = "+quoteLiteral(s.cfg.Slot)).ReadAll()
	if err != nil {
		return Session{}, fmt.Errorf("reading replication slot %q: %w", s.cfg.Slot, err)
	}
	if len(results) != 1 || len(results[0].Rows) == 0 {
		return Session{}, permanent(fmt.Errorf("%w: %q", ErrSlotMissing, s.cfg.Slot))
	}
	row := results[0].Rows[0]
	if len(row) != 3 {
		return Session{}, fmt.Errorf("reading replication slot %q: %d columns", s.cfg.Slot, len(row))
	}
	if string(row[2]) == "t" {
		// Not ErrSlotActive, whatever active_pid says: the holder, if
		// any, is the slot sync worker, and no other process will let go.
		return Session{}, fmt.Errorf("%w: slot %q on this standby is a synchronized copy of the primary's failover slot (sync_replication_slots); it becomes usable when this server is promoted", ErrSlotSynced, s.cfg.Slot)
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
	// Whatever ended the last session, this one starts outside any
	// transaction (Postgres sends a transaction whole, from its Begin):
	// idle keepalives are passed on again (see loop).
	s.inTx = false
	if err := s.handler.SessionStart(ctx, sess); err != nil {
		return permanent(fmt.Errorf("starting a session on slot %q (%s): %w", s.cfg.Slot, sess, err))
	}
	return nil
}

// connect opens a replication connection, read through the returned
// pgwire.Reader.
func (s *Stream) connect(ctx context.Context) (*pgconn.PgConn, *pgwire.Reader, error) {
	cfg, err := pgconn.ParseConfig(s.cfg.DSN)
	if err != nil {
		// pgconn's parse errors never include the password.
		return nil, nil, permanent(fmt.Errorf("parsing postgres DSN: %w", err))
	}
	cfg.RuntimeParams["application_name"] = "walrelay"
	// pgoutput formats values with the walsender's output functions:
	// pgsession pins the settings the router parses (timestamps, bytea,
	// floats), with replication=database.
	// Everything is read through a pgwire.Reader: pgconn's frontend while
	// connecting, the pgwire.Conn once the stream owns the connection. pgconn dials, then builds the frontend, one address at a
	// time: the socket dialed last is the one read (through TLS, when used).
	var dialed net.Conn
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		dialed = c
		return c, err
	}
	var in *pgwire.Reader
	cfg.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
		in = pgwire.NewReader(ctx, r, dialed, s.cfg.ReadWait)
		return pgproto3.NewFrontend(in, w)
	}
	conn, err := pgsession.ConnectReplication(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("connecting for replication to %s: %w", describe(cfg), err)
	}
	return conn, in, nil
}

// shutdown waits (bounded) for in-flight records, keeps the walsender
// informed while it waits (a position that moved soon, as the loop does,
// and one update every StatusInterval), then reports the final confirmed
// position.
func (s *Stream) shutdown(w *pgwire.Conn) {
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

// timelineForks reads the history of timeline (TIMELINE_HISTORY): each
// earlier timeline and the position where it ended. The history file's
// lines are "<timeline>\t<switch LSN>\t<reason>".
func timelineForks(ctx context.Context, conn *pgconn.PgConn, timeline int32) (map[int32]pglogrepl.LSN, error) {
	h, err := pglogrepl.TimelineHistory(ctx, conn, timeline)
	if err != nil {
		return nil, fmt.Errorf("reading the history of timeline %d (TIMELINE_HISTORY): %w", timeline, err)
	}
	forks := map[int32]pglogrepl.LSN{}
	for line := range strings.Lines(string(h.Content)) {
		f := strings.Fields(line)
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		tli, err := strconv.ParseInt(f[0], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("parsing timeline history %s: line %q: %w", h.FileName, strings.TrimSpace(line), err)
		}
		end, err := pglogrepl.ParseLSN(f[1])
		if err != nil {
			return nil, fmt.Errorf("parsing timeline history %s: line %q: %w", h.FileName, strings.TrimSpace(line), err)
		}
		forks[int32(tli)] = end
	}
	return forks, nil
}
