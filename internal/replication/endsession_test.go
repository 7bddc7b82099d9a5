package replication

import (
	"errors"
	"testing"

	"github.com/walrelay/walrelay/internal/testenv"
)

// EndSession ends the session streaming now as a lost connection would:
// the walsender exits (its connection is closed), the Handler hears
// SessionLost, and the stream streams again in a new session, with
// nothing reported past the Checkpointer's position. walrelay ends a
// session this way when Postgres shuts down and the slot's position
// cannot be recorded (a walsender at shutdown waits for its client).
func TestEndSession(t *testing.T) {
	f := newStreamFixture(t)
	first := testenv.QueryValue[int32](t, f.dsn, `SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1`, testSlot)
	cause := errors.New("the test ends the session")
	if !f.s.EndSession(cause) {
		t.Fatal("EndSession reported no session streaming while one did")
	}
	evs := f.waitFor(t, "a second session", func(evs []event) bool { return len(sessions(evs)) == 2 })
	lost := false
	for _, e := range evs {
		lost = lost || e.kind == "lost"
	}
	if !lost {
		t.Errorf("the handler did not hear SessionLost before the second session: %v", evs)
	}
	if err := f.s.LastError(); !errors.Is(err, ErrRestartSession) || !errors.Is(err, cause) {
		t.Errorf("LastError %v; want it to wrap ErrRestartSession and the cause", err)
	}
	if gone := testenv.QueryValue[bool](t, f.dsn, `SELECT count(*) = 0 FROM pg_stat_replication WHERE pid = $1`, first); !gone {
		t.Errorf("the first session's walsender (pid %d) is still there", first)
	}
	f.waitActive(t)
	if confirmed, _ := f.slot(t); confirmed != f.start {
		t.Errorf("the slot moved to %s, want it at %s (nothing confirmed)", confirmed, f.start)
	}
	if f.s.Reconnects() != 1 {
		t.Errorf("Reconnects() = %d, want 1", f.s.Reconnects())
	}
}

// EndSession ends only a session that streams: without one it does
// nothing and says so.
func TestEndSessionWithoutSession(t *testing.T) {
	s := newStream(t, testConfig("postgres://localhost/none", testSlot), &recorder{}, &fakeCheckpointer{}, nil)
	if s.EndSession(errors.New("nothing to end")) {
		t.Error("EndSession reported a session ended before Run")
	}
	if err := s.ended(); err != nil {
		t.Errorf("a session started later would end at once: %v", err)
	}
}
