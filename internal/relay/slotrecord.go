package relay

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/checkpoint"
	"github.com/walrelay/walrelay/internal/pgsession"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/slotrecord"
)

// recorder is the write-ahead side of walrelay's slot record
// (internal/slotrecord): the stream confirms at most what it recorded, and its
// goroutine records what the tracker may confirm, at most every
// recordEvery while it moves. So that always the slot's
// confirmed_flush_lsn <= the record, and a slot found past the record was
// moved by someone else.
//
// Idle: with nothing in flight the tracker confirms the server's WAL end
// (keepalives), and recording it writes WAL, whose end the next keepalive
// reports: recording every idle move would write a row every
// status_interval forever on an idle database. So a position reached only
// by keepalives is not recorded when the last record was itself idle and
// nothing but that record's own write lies between it and the position
// (no WAL between the recorded position and the start of the write, and
// the position at or before the WAL insert position read right after
// it). The cost: an idle slot stays behind by walrelay's own last record
// (a few hundred bytes of WAL); any other write moves it on.
type recorder struct {
	// dsn is where the record is: postgres.primary_dsn when set (decoding
	// from a standby), postgres.dsn otherwise. All its reads of WAL
	// positions (pg_current_wal_insert_lsn around its own write) go there
	// too: they bound its own write, which is in the primary's WAL, the
	// history the standby replays and its slot decodes.
	dsn string
	// slots is, when decoding from a standby, the connection to it that
	// table.Slots reads the slot on; nil otherwise.
	slots   *slotConn
	table   slotrecord.Table
	slot    string
	tracker *checkpoint.Tracker
	log     *slog.Logger
	jumped  prometheus.Gauge

	// on: the cap applies (the record exists and this relay writes it).
	// Off, the relay confirms as it did before records (the role may not
	// write the table): retention then refuses to prune.
	on       atomic.Bool
	recorded atomic.Uint64
	// want is the newest position a walsender asked a reply at, 0 once
	// answered (pgshutdown.go): while it is past the record, the next
	// attempt records even a position reached by this recorder's own
	// write, and asks the server whether it shuts down when the stream
	// still cannot report it.
	want atomic.Uint64
	// endSession is Stream.EndSession: a record that fails because the
	// server shuts down ends the replication session (pgshutdown.go).
	endSession func(error) bool

	// io serializes the reads and writes of the record (raise, session)
	// and owns conn. It is never taken by the stream's keepalive path
	// (idle), so a slow or stuck query holds back only the record, never
	// the stream; each query is bounded by recordTimeout.
	io   sync.Mutex
	conn *pgx.Conn

	mu       sync.Mutex    // the fields below: held only to read or set them, never across I/O
	progress pglogrepl.LSN // the newest position reached by other means than idle keepalives
	idleTop  pglogrepl.LSN // the position the last idle keepalive raised the tracker to
	ownEnd   pglogrepl.LSN // the WAL insert position right after the last record was written
	tailFrom pglogrepl.LSN // the position the last record holds
	tailOK   bool          // no WAL but the last record's own between tailFrom and the start of its write
	lastIdle bool          // the last record was of a position reached only by keepalives, with no other WAL before its write
	lastErr  string

	// start is the state found() read and why what it found a jump ("" when
	// nothing new); judgeSlot decides on them (heal.go).
	start    *slotrecord.State
	startWhy string
	// system is the server's system identifier as this process last read
	// it with the record: a slot position at or before `recorded` on
	// the same system is one this process recorded itself (see session).
	system string
	// fences: the recorder takes a txfence.Fence every fenceEvery while
	// transactions move the position (see fence.go in internal/slotrecord).
	fenceConn     *pgx.Conn
	fenceAt       time.Time
	fenceProgress pglogrepl.LSN
	fenceErr      string
}

// recordEvery is how often the recorder looks at the tracker: the
// replication stream reports a confirmed position that moved within
// 100ms (postgres.status_interval bounds only the reports of one that
// did not), and it may confirm only what is recorded. While the position
// moves that is one single-row UPDATE every 100ms at most; none while
// nothing moves.
const recordEvery = 100 * time.Millisecond

// recordTimeout bounds one read or write of the record: past it the
// attempt fails (logged, tried again at the next tick) and the stream
// confirms no further than the record meanwhile.
const recordTimeout = 5 * time.Second

func newRecorder(r *Relay, table slotrecord.Table) *recorder {
	c := &recorder{dsn: r.cfg.Postgres.Primary(), table: table, slot: r.cfg.Postgres.Slot, tracker: r.tracker,
		log: r.log, jumped: r.metrics.SlotJumped}
	if r.cfg.Postgres.PrimaryDSN != "" {
		c.slots = &slotConn{dsn: r.cfg.Postgres.DSN}
		c.table.Slots = c.slots
	}
	return c
}

// recordIdleLimit is idle_in_transaction_session_timeout on the
// recorder's connections. Its transactions are a few statements with
// nothing between them, but one that a frozen process (a zombie: SIGSTOP,
// a suspended VM) left open holds the record's row lock, which stops the
// process that took the slot over from recording and so from confirming,
// and its xid, which stops every logical slot creation on the cluster
// (walrelay setup, slot create) until it ends. Postgres ends it after this
// long; the zombie's next write fails and is tried again on a new
// connection.
const recordIdleLimit = recordTimeout

// connect opens one of the recorder's connections (the record, its
// fences) to c.dsn, with recordIdleLimit.
func (c *recorder) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(c.dsn)
	if err != nil {
		return nil, err // pgx's parse errors never include the password
	}
	cfg.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(recordIdleLimit.Milliseconds(), 10)
	return pgsession.ConnectConfig(ctx, cfg)
}

// writer is the connection the startup reads and writes the record on:
// conn (postgres.dsn), or when decoding from a standby the recorder's own
// connection to the primary (conn is the standby then, read-only).
func (c *recorder) writer(ctx context.Context, conn *pgx.Conn) (*pgx.Conn, error) {
	if c.slots == nil {
		return conn, nil
	}
	if c.conn == nil || c.conn.IsClosed() {
		pc, err := c.connect(ctx)
		if err != nil {
			return nil, fmt.Errorf("connecting to the primary (postgres.primary_dsn) to keep the slot's record: %w", postgres.ExplainConnectError(err))
		}
		c.conn = pc
	}
	return c.conn, nil
}

// limit is what the stream may confirm of lsn: at most the record.
func (c *recorder) limit(lsn pglogrepl.LSN) pglogrepl.LSN {
	if !c.on.Load() {
		return lsn
	}
	return min(lsn, pglogrepl.LSN(c.recorded.Load()))
}

// idle notes that a keepalive raised the tracker from before to after.
func (c *recorder) idle(before, after pglogrepl.LSN) {
	c.mu.Lock()
	if before != c.idleTop {
		c.progress = max(c.progress, before) // moved by transactions since the last idle raise
	}
	c.idleTop = after
	c.mu.Unlock()
}

// use sets what the record holds (the cap) and turns the cap on.
func (c *recorder) use(s slotrecord.State) {
	if s.Record == nil {
		return
	}
	c.recorded.Store(uint64(s.Record.Confirmed))
	c.on.Store(true)
	c.mu.Lock()
	c.system = s.System
	c.mu.Unlock()
	c.jumped.Set(0)
	if s.Record.JumpedAt != nil {
		c.jumped.Set(1)
	}
}

// off logs why the relay cannot keep the record and runs without the cap.
func (c *recorder) off(err error) {
	c.on.Store(false)
	c.log.Error("cannot keep walrelay's record of the slot: relaying goes on, but retention stays stopped (nothing proves the slot's position); grant the role SELECT, INSERT, UPDATE on the table (sql/004_role.sql) or run walrelay setup",
		"slot", c.slot, "table", c.table.String(), "err", err)
}

// found checks an existing slot against its record at the relay's start:
// no record (the first start of a walrelay that keeps them) records the
// slot's position as the baseline; a slot replaced or past the record is
// marked jumped (retention stops until walrelay slot adopt or a heal).
// It keeps the state for Relay.judgeSlot, which stops the relay on a lost
// or jumped slot, or heals it (heal.go).
func (c *recorder) found(ctx context.Context, conn *pgx.Conn) error {
	conn, err := c.writer(ctx, conn)
	if err != nil {
		return err
	}
	if _, err := c.table.Ensure(ctx, conn); err != nil {
		if slotrecord.IsPrivilege(err) {
			c.off(err)
			return nil
		}
		return err
	}
	var why string
	s, baseline, err := slotrecord.Baseline(ctx, conn, c.table, c.slot, "baseline: the first start of a walrelay that keeps slot records; positions before it were confirmed by an earlier version")
	if err != nil {
		if slotrecord.IsPrivilege(err) {
			c.off(err)
			return nil
		}
		return err
	}
	if baseline {
		c.log.Warn("no record of the slot yet: recorded its position as walrelay's baseline (rows before it are protected from retention only if the slot was never replaced before this start)",
			"slot", c.slot, "table", c.table.String(), "confirmed_lsn", s.SlotConfirmed.String())
	}
	s, why, err = slotrecord.MarkJumped(ctx, conn, c.table, c.slot)
	if err != nil {
		if slotrecord.IsPrivilege(err) {
			c.off(err)
			return nil
		}
		return err
	}
	c.use(s)
	c.start, c.startWhy = &s, why
	return nil
}

// created records a slot this relay has just created at lsn.
func (c *recorder) created(ctx context.Context, conn *pgx.Conn, lsn pglogrepl.LSN, who string) error {
	conn, err := c.writer(ctx, conn)
	if err != nil {
		return err
	}
	if _, err := c.table.Ensure(ctx, conn); err != nil {
		if slotrecord.IsPrivilege(err) {
			c.off(err)
			return nil
		}
		return err
	}
	s, err := slotrecord.Created(ctx, conn, c.table, c.slot, lsn, who)
	if err != nil {
		if slotrecord.IsPrivilege(err) {
			c.off(err)
			return nil
		}
		return err
	}
	c.use(s)
	return nil
}

// missing refuses to create a slot walrelay confirmed through before, and
// returns nil when it never did (or the record cannot be read: no table).
func (c *recorder) missing(ctx context.Context, conn *pgx.Conn) error {
	conn, err := c.writer(ctx, conn)
	if err != nil {
		return err
	}
	s, err := slotrecord.Read(ctx, conn, c.table, c.slot)
	if err != nil {
		return err
	}
	if s.Record == nil {
		return nil
	}
	return fmt.Errorf("%w: slot %q is missing, and walrelay had confirmed through a slot of this name up to %s (recorded %s): rows committed after that may never have been published, and creating it again would skip them silently. %s",
		slotrecord.ErrRecorded, c.slot, s.Record.Confirmed, s.Record.UpdatedAt.UTC().Format(time.RFC3339), wayOnLost(c.slot, s.Record, false))
}

// session checks the slot against its record at the start of every
// replication session, before the session reports anything: another
// instance may have streamed and recorded meanwhile (the cap is then
// raised to its record), or someone may have moved the slot past the
// record (marked jumped, logged). A failure is logged and leaves the cap
// where it was: it can only hold confirmations back.
func (c *recorder) session(ctx context.Context) error {
	if c == nil || !c.on.Load() {
		return nil
	}
	var jumped error
	c.io.Lock()
	defer c.io.Unlock()
	ctx, cancel := context.WithTimeout(ctx, recordTimeout)
	defer cancel()
	err := func() error {
		reused := c.conn != nil && !c.conn.IsClosed()
		if !reused {
			conn, err := c.connect(ctx)
			if err != nil {
				return fmt.Errorf("connecting to read the slot's record: %w", err)
			}
			c.conn = conn
		}
		check := func() (slotrecord.State, string, error) {
			if err := c.reclaim(ctx); err != nil {
				return slotrecord.State{}, "", err
			}
			return slotrecord.MarkJumped(ctx, c.conn, c.table, c.slot)
		}
		s, why, err := check()
		if err != nil && reused && ctx.Err() == nil {
			// The connection may be to the server before a failover or a
			// restart (a new session follows one): once more on a new one,
			// which the DSN takes to the server this session streams from.
			_ = c.conn.Close(context.WithoutCancel(ctx))
			if c.conn, err = c.connect(ctx); err != nil {
				c.conn = nil
				return fmt.Errorf("connecting to read the slot's record: %w", err)
			}
			s, why, err = check()
		}
		if err != nil {
			_ = c.conn.Close(context.WithoutCancel(ctx))
			c.conn = nil
			return err
		}
		c.use(s)
		if s.SlotLost && s.Record != nil {
			jumped = fmt.Errorf("%w: at a replication session's start: slot %q has wal_status lost (Postgres removed WAL it needed); walrelay had confirmed through it up to %s: rows committed after that may never have been published. %s",
				ErrSlotLost, c.slot, s.Record.Confirmed, wayOnLost(c.slot, s.Record, true))
			return nil
		}
		if reason, uerr := s.Unproven(); reason == slotrecord.ReasonSlotJumped && (why != "" || !s.Record.Accepted) {
			jumped = fmt.Errorf("at a replication session's start: %w. %s", uerr, wayOnJumped(c.slot))
			if r := s.Record; r.JumpedAt != nil {
				jumped = fmt.Errorf("%w at a replication session's start: slot %q: %s (found %s): rows committed after %s may never have been published. %s",
					slotrecord.ErrJumped, c.slot, r.Jump, r.JumpedAt.UTC().Format(time.RFC3339), r.JumpedFrom, wayOnJumped(c.slot))
			}
		}
		return nil
	}()
	if err != nil {
		c.log.Warn("reading walrelay's record of the slot at the session's start; confirming no further than the record read before", "slot", c.slot, "err", err)
	}
	return jumped
}

// run records what the tracker may confirm until ctx is done.
func (c *recorder) run(ctx context.Context) {
	defer c.close()
	t := time.NewTicker(recordEvery)
	defer t.Stop()
	var stuck stuckWatch
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		want := c.want.Load()
		force := want > c.recorded.Load()
		err := c.raise(ctx, force)
		if err == nil && want != 0 {
			err = c.answer(ctx, want) // pgshutdown.go
		}
		if err == nil && c.stuckProbe(&stuck, time.Now()) {
			err = c.probe(ctx) // pgshutdown.go
		}
		if err != nil && ctx.Err() == nil {
			c.stopping(err)
			c.mu.Lock()
			if err.Error() != c.lastErr {
				c.log.Warn("recording the slot's position before confirming it; the slot is not confirmed past the record until it works", "slot", c.slot, "err", err)
			}
			c.lastErr = err.Error()
			c.mu.Unlock()
		}
		c.fence(ctx)
	}
}

// reclaim raises the record, on c.conn, back to the slot's position when
// the slot is past it at a position this process recorded itself on the
// same system (slotrecord.Reclaim). After a failover (a multi-host DSN
// that followed a promotion) the new primary's slot, synced from the old
// one, can be past the record it replayed: the record of a position
// commits after the position, and the standby may have received the one
// and not the other. Called with c.io held.
func (c *recorder) reclaim(ctx context.Context) error {
	c.mu.Lock()
	system := c.system
	c.mu.Unlock()
	own := pglogrepl.LSN(c.recorded.Load())
	s, back, err := slotrecord.Reclaim(ctx, c.conn, c.table, c.slot, system, own)
	if err != nil {
		return err
	}
	if back {
		c.log.Warn("the slot is past the record this server holds, at a position this process recorded itself before a failover: recorded it again",
			"slot", c.slot, "slot_confirmed_lsn", s.SlotConfirmed.String(), "recorded_lsn", own.String())
	}
	return nil
}

// raise records the tracker's confirmed position when it moved past the
// record: always with force (a drained stop) or when transactions moved
// it, and when only keepalives did unless that is the idle loop (see
// recorder).
func (c *recorder) raise(ctx context.Context, force bool) error {
	if !c.on.Load() {
		return nil
	}
	c.io.Lock()
	defer c.io.Unlock()
	ctx, cancel := context.WithTimeout(ctx, recordTimeout)
	defer cancel()
	to := c.tracker.Confirmed()
	recorded := pglogrepl.LSN(c.recorded.Load())
	if to <= recorded {
		return nil
	}
	c.mu.Lock()
	progress := c.progress
	if to != c.idleTop {
		progress = max(progress, to)
	}
	idle := progress <= recorded
	skip := !force && idle && c.lastIdle && to <= c.ownEnd
	c.mu.Unlock()
	if skip {
		return nil // only this recorder's own last write since its last idle record
	}
	if c.conn == nil || c.conn.IsClosed() {
		conn, err := c.connect(ctx)
		if err != nil {
			return fmt.Errorf("connecting to record the slot's position: %w", err)
		}
		c.conn = conn
		// A new connection may be to a new primary (a multi-host DSN
		// that followed a promotion), found by this write before the
		// next session's check: the same reclaim first, or Raise would
		// take the synced slot for one moved by someone else.
		if err := c.reclaim(ctx); err != nil {
			_ = c.conn.Close(context.WithoutCancel(ctx))
			c.conn = nil
			return err
		}
	}
	var start string
	if err := c.conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&start); err != nil {
		_ = c.conn.Close(context.WithoutCancel(ctx))
		c.conn = nil
		return fmt.Errorf("reading the WAL insert position: %w", err)
	}
	ownStart, _ := pglogrepl.ParseLSN(start)
	rec, why, err := slotrecord.Raise(ctx, c.conn, c.table, c.slot, to)
	if err != nil {
		_ = c.conn.Close(context.WithoutCancel(ctx))
		c.conn = nil
		return err
	}
	if why != "" {
		c.log.Error("the slot was moved past walrelay's record by someone else: rows committed after the record may never have been published; relaying goes on, retention stays stopped until an operator runs walrelay verify and walrelay slot adopt",
			"slot", c.slot, "found", why, "recorded_lsn", recorded.String())
	}
	if why != "" || rec.JumpedAt != nil {
		c.jumped.Set(1)
	} else {
		c.jumped.Set(0) // adopted since (walrelay slot adopt)
	}
	var end string
	endErr := c.conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&end)
	if endErr != nil {
		_ = c.conn.Close(context.WithoutCancel(ctx))
		c.conn = nil
		return fmt.Errorf("reading the WAL insert position after recording: %w", endErr)
	}
	ownEnd, _ := pglogrepl.ParseLSN(end)
	if err := c.standbysReceived(ctx, ownEnd); err != nil {
		return err
	}
	c.recorded.Store(uint64(rec.Confirmed))
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastIdle = idle && ownStart <= to
	c.tailFrom, c.tailOK = rec.Confirmed, ownStart <= rec.Confirmed
	c.ownEnd = ownEnd
	c.lastErr = ""
	return nil
}

// standbySlotsSQL lists, when slot $2 is a FAILOVER slot (Postgres 17+;
// the column is read through to_jsonb, absent before 17), the physical
// slots named in synchronized_standby_slots (none when unset) whose
// standby has not flushed the WAL up to $1 (restart_lsn; a missing or
// invalidated slot counts as not flushed, as Postgres counts it). Postgres
// holds back only the decoding of failover slots for those standbys, and
// only their synced copies matter.
const standbySlotsSQL = `SELECT coalesce(array_agg(n ORDER BY n) FILTER (WHERE s.restart_lsn IS NULL OR s.restart_lsn < $1::pg_lsn), '{}')
	FROM unnest(string_to_array(replace(replace(coalesce(current_setting('synchronized_standby_slots', true), ''), ' ', ''), '"', ''), ',')) n
	LEFT JOIN pg_replication_slots s ON s.slot_name = n AND s.slot_type = 'physical'
	WHERE EXISTS (SELECT 1 FROM pg_replication_slots l WHERE l.slot_name = $2 AND coalesce((to_jsonb(l) ->> 'failover')::bool, false))`

// standbysReceived waits, for a FAILOVER slot, until the standbys named in
// synchronized_standby_slots have flushed the WAL up to lsn, the end of
// the record just written. Their synced copies of a failover slot (Postgres
// 17+) move only to positions a standby flushed, and the slot moves only
// to what is recorded: without this wait a synced copy could be past the
// record the standby has, and after a promotion the record would say the
// slot was moved by someone else (a false jump that stops retention).
// Postgres holds logical decoding back for the same standbys, so the wait
// is short unless a standby is down, and then the stream waits anyway.
func (c *recorder) standbysReceived(ctx context.Context, lsn pglogrepl.LSN) error {
	for {
		var pending []string
		if err := c.conn.QueryRow(ctx, standbySlotsSQL, lsn.String(), c.slot).Scan(&pending); err != nil {
			_ = c.conn.Close(context.WithoutCancel(ctx))
			c.conn = nil
			return fmt.Errorf("reading the standbys of synchronized_standby_slots: %w", err)
		}
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the standbys of synchronized_standby_slots %v to flush walrelay's record at %s before confirming it: %w", pending, lsn, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// ownTail is slotmon's OwnWAL: the WAL in (from, to] is only this
// recorder's last write, when ok.
func (c *recorder) ownTail() (from, to pglogrepl.LSN, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tailFrom, c.ownEnd, c.tailOK && c.on.Load()
}

func (c *recorder) close() {
	c.io.Lock()
	defer c.io.Unlock()
	c.slots.close()
	if c.conn != nil {
		_ = c.conn.Close(context.Background())
		c.conn = nil
	}
	if c.fenceConn != nil {
		_ = c.fenceConn.Close(context.Background())
		c.fenceConn = nil
	}
}
