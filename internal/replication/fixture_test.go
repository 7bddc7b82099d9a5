package replication

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/setup"
	"github.com/walrelay/walrelay/internal/testenv"
)

// fakeCheckpointer stands in for the checkpoint tracker: it confirms
// exactly what the test sets, and never confirms a keepalive's WAL end.
type fakeCheckpointer struct {
	confirmed atomic.Uint64
	walEnd    atomic.Uint64 // highest keepalive WAL end seen
	inFlight  atomic.Int64  // records in flight, as the test says
}

func (f *fakeCheckpointer) Confirmed() pglogrepl.LSN { return pglogrepl.LSN(f.confirmed.Load()) }
func (f *fakeCheckpointer) InFlight() (int, int64)   { return int(f.inFlight.Load()), 0 }
func (f *fakeCheckpointer) set(lsn pglogrepl.LSN)    { f.confirmed.Store(uint64(lsn)) }
func (f *fakeCheckpointer) ObserveWALEnd(lsn pglogrepl.LSN) {
	for {
		old := f.walEnd.Load()
		if uint64(lsn) <= old || f.walEnd.CompareAndSwap(old, uint64(lsn)) {
			return
		}
	}
}
func (f *fakeCheckpointer) WaitRoom(context.Context, time.Time) bool         { return true }
func (f *fakeCheckpointer) WaitDrained(context.Context) error                { return nil }
func (f *fakeCheckpointer) WaitRoomFor(context.Context, time.Time, int) bool { return true }

// event is one Handler call, as the recording handler saw it.
type event struct {
	kind    string // start, begin, relation, insert, commit, lost
	xid     uint32
	lsn     pglogrepl.LSN // commit: TransactionEndLSN
	id      string        // insert: the row's first column
	session Session       // start
}

// recorder is a Handler that records every call.
type recorder struct {
	mu       sync.Mutex
	events   []event
	xid      uint32
	slow     atomic.Int64 // each Insert takes this long (a time.Duration)
	startErr error        // returned by SessionStart
	// onBegin, when set, is called at each Begin and its error returned;
	// onStart at each SessionStart (n counts them from 1), its error
	// returned. Set them under mu.
	onBegin func(xid uint32) error
	onStart func(n int, s Session) error
	starts  int
}

func (r *recorder) add(e event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) snapshot() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}

func (r *recorder) Begin(_ context.Context, m *pglogrepl.BeginMessage) error {
	r.mu.Lock()
	r.xid = m.Xid
	hook := r.onBegin
	r.mu.Unlock()
	r.add(event{kind: "begin", xid: m.Xid})
	if hook != nil {
		return hook(m.Xid)
	}
	return nil
}
func (r *recorder) Relation(_ context.Context, m *pglogrepl.RelationMessage) error {
	r.add(event{kind: "relation", id: m.RelationName})
	return nil
}
func (r *recorder) Insert(_ context.Context, _ *pglogrepl.RelationMessage, m *pglogrepl.InsertMessage, lsn pglogrepl.LSN, _ *Buffer) error {
	if d := time.Duration(r.slow.Load()); d > 0 {
		time.Sleep(d)
	}
	r.mu.Lock()
	xid := r.xid
	r.mu.Unlock()
	r.add(event{kind: "insert", xid: xid, lsn: lsn, id: string(m.Tuple.Columns[0].Data)})
	return nil
}
func (r *recorder) Update(context.Context, *pglogrepl.RelationMessage, *pglogrepl.UpdateMessage, pglogrepl.LSN) error {
	return nil
}
func (r *recorder) Delete(context.Context, *pglogrepl.RelationMessage, *pglogrepl.DeleteMessage, pglogrepl.LSN) error {
	return nil
}
func (r *recorder) Truncate(context.Context, []*pglogrepl.RelationMessage, *pglogrepl.TruncateMessage, pglogrepl.LSN) error {
	return nil
}
func (r *recorder) Message(context.Context, *pglogrepl.LogicalDecodingMessage, pglogrepl.LSN) error {
	return nil
}
func (r *recorder) Commit(_ context.Context, m *pglogrepl.CommitMessage) error {
	r.mu.Lock()
	xid := r.xid
	r.mu.Unlock()
	r.add(event{kind: "commit", xid: xid, lsn: m.TransactionEndLSN})
	return nil
}
func (r *recorder) SessionLost() { r.add(event{kind: "lost"}) }

func (r *recorder) SessionStreaming(context.Context) error { return nil }
func (r *recorder) SessionStart(_ context.Context, sess Session) error {
	r.add(event{kind: "start", session: sess})
	r.mu.Lock()
	r.starts++
	n, hook := r.starts, r.onStart
	r.mu.Unlock()
	if hook != nil {
		if err := hook(n, sess); err != nil {
			return err
		}
	}
	return r.startErr
}

// waitFor polls the recorded events until cond holds; it fails the test
// if the stream stops meanwhile.
func (f *streamFixture) waitFor(t *testing.T, what string, cond func([]event) bool) []event {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		f.running(t)
		evs := f.rec.snapshot()
		if cond(evs) {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; handler saw %v", what, evs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// commitOf returns the index of the first commit of xid at or after from, or -1.
func commitOf(evs []event, xid uint32, from int) int {
	for i := from; i < len(evs); i++ {
		if evs[i].kind == "commit" && evs[i].xid == xid {
			return i
		}
	}
	return -1
}

// A publication name that needs quoting both as an identifier and as a
// string literal in START_REPLICATION's options.
const weirdPublication = `Out"box, 'pub'`

const testSlot = "walrelay_stream_test"

// streamFixture is a database with the outbox table, a publication with a
// hostile name and a slot, plus a running Stream over a fake checkpointer.
type streamFixture struct {
	dsn   string
	cp    *fakeCheckpointer
	rec   *recorder
	start pglogrepl.LSN // the slot's confirmed_flush_lsn at creation
	done  chan error
	s     *Stream
}

func newStreamFixture(t *testing.T) *streamFixture {
	t.Helper()
	return newStreamFixtureWith(t, nil)
}

// newStreamFixtureWith is newStreamFixture with the stream's Config
// adjusted by mutate.
func newStreamFixtureWith(t *testing.T, mutate func(*Config)) *streamFixture {
	t.Helper()
	dsn := testenv.Postgres(t).NewDatabase(t)
	conn := testenv.Connect(t, dsn)
	if _, err := setup.Run(t.Context(), conn, setup.Names{Schema: "public", Table: "outbox", Publication: weirdPublication, Slot: testSlot}); err != nil {
		t.Fatalf("setup: %v", err)
	}
	f := &streamFixture{dsn: dsn, cp: &fakeCheckpointer{}, rec: &recorder{}, done: make(chan error, 1)}
	f.start, _ = f.slot(t)
	f.cp.set(f.start)

	cfg := Config{
		DSN:             dsn,
		Slot:            testSlot,
		Publications:    []string{weirdPublication},
		StatusInterval:  50 * time.Millisecond,
		ShutdownTimeout: time.Second,
		MinBackoff:      20 * time.Millisecond,
		MaxBackoff:      500 * time.Millisecond,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	s := newStream(t, cfg, f.rec, f.cp, nil)
	f.s = s
	ctx, cancel := context.WithCancel(context.Background())
	go func() { f.done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-f.done:
			if err != nil {
				t.Errorf("Run after cancel: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("Run did not return within 30s of cancel")
		}
	})
	f.waitActive(t)
	return f
}

// running fails the test if Run has returned.
func (f *streamFixture) running(t *testing.T) {
	t.Helper()
	select {
	case err := <-f.done:
		f.done <- err
		t.Fatalf("stream stopped: %v", err)
	default:
	}
}

// waitActive waits until a walsender holds the slot.
func (f *streamFixture) waitActive(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !testenv.QueryValue[bool](t, f.dsn, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, testSlot) {
		f.running(t)
		if time.Now().After(deadline) {
			t.Fatal("the stream never became active on the slot")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// slot returns the slot's confirmed_flush_lsn and the server's WAL position.
func (f *streamFixture) slot(t *testing.T) (confirmed, current pglogrepl.LSN) {
	t.Helper()
	return testenv.SlotLSNs(t, f.dsn, testSlot)
}

// reported returns what the walsender last received as write, flush and
// apply positions (pg_stat_replication), or ok=false before the first report.
func (f *streamFixture) reported(t *testing.T) (pos [3]pglogrepl.LSN, ok bool) {
	t.Helper()
	s := testenv.QueryValue[string](t, f.dsn, `
		SELECT coalesce(max(r.write_lsn::text || ' ' || r.flush_lsn::text || ' ' || r.replay_lsn::text), '')
		FROM pg_stat_replication r JOIN pg_replication_slots s ON s.active_pid = r.pid
		WHERE s.slot_name = $1`, testSlot)
	parts := strings.Fields(s)
	if len(parts) != 3 {
		return pos, false
	}
	for i, p := range parts {
		pos[i] = testenv.ParseLSN(t, p)
	}
	return pos, true
}

func (f *streamFixture) waitConfirmed(t *testing.T, want pglogrepl.LSN) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, _ := f.slot(t)
		if got == want {
			return
		}
		if got > want {
			t.Fatalf("confirmed_flush_lsn went to %s, past the checkpointer's %s", got, want)
		}
		if time.Now().After(deadline) {
			t.Fatalf("confirmed_flush_lsn stayed at %s; the checkpointer confirms %s", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// holds checks for d that the slot and the walsender's view of the
// client's write/flush/apply positions are exactly want.
func (f *streamFixture) holds(t *testing.T, want pglogrepl.LSN, d time.Duration) {
	t.Helper()
	seen := false
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(25 * time.Millisecond) {
		if got, _ := f.slot(t); got != want {
			t.Fatalf("confirmed_flush_lsn is %s; the checkpointer confirms only %s", got, want)
		}
		if pos, ok := f.reported(t); ok {
			seen = true
			if pos != [3]pglogrepl.LSN{want, want, want} {
				t.Fatalf("stream reported write/flush/apply %s/%s/%s; the checkpointer confirms %s", pos[0], pos[1], pos[2], want)
			}
		}
	}
	if !seen {
		t.Fatalf("pg_stat_replication never showed the stream's positions")
	}
}

// commitTx inserts n outbox rows in one transaction and returns its xid.
func (f *streamFixture) commitTx(t *testing.T, n int) uint32 {
	t.Helper()
	conn := testenv.Connect(t, f.dsn)
	defer conn.Close(context.Background())
	var xid uint32
	err := pgx.BeginFunc(t.Context(), conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(t.Context(), `INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
			SELECT 'order', 'o-' || i, 'OrderCreated', jsonb_build_object('i', i) FROM generate_series(1, $1) i`, n); err != nil {
			return err
		}
		return tx.QueryRow(t.Context(), `SELECT txid_current()::text::bigint`).Scan(&xid)
	})
	if err != nil {
		t.Fatalf("writing outbox rows: %v", err)
	}
	return xid
}

// testConfig is a stream's config for the slot and publications with
// walrelay's timings (config.Default: postgres.status_interval,
// min_backoff, max_backoff, relay.shutdown_timeout); tests change what
// they need.
func testConfig(dsn, slot string, pubs ...string) Config {
	d := config.Default()
	return Config{
		DSN:             dsn,
		Slot:            slot,
		Publications:    pubs,
		StatusInterval:  d.Postgres.StatusInterval,
		ShutdownTimeout: d.Relay.ShutdownTimeout,
		MinBackoff:      d.Postgres.MinBackoff,
		MaxBackoff:      d.Postgres.MaxBackoff,
	}
}

// newStream is New, failing the test on an error.
func newStream(tb testing.TB, cfg Config, h Handler, cp Checkpointer, log *slog.Logger) *Stream {
	tb.Helper()
	s, err := New(cfg, h, cp, log)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}
