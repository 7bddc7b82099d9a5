package relay

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/checkpoint"
	"github.com/walrelay/walrelay/internal/replication"
	"github.com/walrelay/walrelay/internal/resume"
)

// sessionHandler is a handler with only what SessionStart uses: a tracker,
// a logger and at-least-once delivery.
func sessionHandler() *handler {
	return newHandler(&Relay{tracker: checkpoint.New(checkpoint.Limits{}), log: slog.New(slog.DiscardHandler), delivery: &atLeastOnce{}})
}

// The rules of Handler.SessionStart: on the WAL history of the last
// session it raises the tracker to the slot, on another it resets to the
// slot and forgets what it handled.
func TestHandlerSessionStart(t *testing.T) {
	one := replication.Session{SystemID: "1", Timeline: 1, XLogPos: 0x9000, SlotConfirmed: 0x100}
	tests := []struct {
		name string
		prev *replication.Session // nil: the first session
		// handled is the end of a transaction the handler committed and
		// that was acknowledged (0: none).
		handled pglogrepl.LSN
		next    replication.Session
		want    pglogrepl.LSN // Confirmed afterwards
		reset   bool          // whether what was handled is forgotten
	}{
		{name: "first session raises to the slot (a standby)", next: replication.Session{SystemID: "1", Timeline: 1, XLogPos: 0x9000, SlotConfirmed: 0x800}, want: 0x800},
		{name: "same history, slot behind what was confirmed", prev: &one, handled: 0x700, next: replication.Session{SystemID: "1", Timeline: 1, XLogPos: 0x9000, SlotConfirmed: 0x500}, want: 0x700},
		{name: "same history, slot moved on by another process", prev: &one, handled: 0x700, next: replication.Session{SystemID: "1", Timeline: 1, XLogPos: 0x9000, SlotConfirmed: 0x800}, want: 0x800},
		{name: "another system", prev: &one, handled: 0x700, next: replication.Session{SystemID: "2", Timeline: 1, XLogPos: 0x300, SlotConfirmed: 0x200}, want: 0x200, reset: true},
		{name: "another timeline", prev: &one, handled: 0x700, next: replication.Session{SystemID: "1", Timeline: 2, XLogPos: 0x9000, SlotConfirmed: 0x600}, want: 0x600, reset: true},
		{name: "WAL ends before what was handled", prev: &one, handled: 0x700, next: replication.Session{SystemID: "1", Timeline: 1, XLogPos: 0x650, SlotConfirmed: 0x200}, want: 0x200, reset: true},
		{name: "first session, WAL ends before the start position", handled: 0x700, next: replication.Session{SystemID: "1", Timeline: 1, XLogPos: 0x650, SlotConfirmed: 0x200}, want: 0x200, reset: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := sessionHandler()
			tr := h.tracker
			if tc.prev != nil {
				if err := h.SessionStart(t.Context(), *tc.prev); err != nil {
					t.Fatal(err)
				}
			}
			if tc.handled != 0 {
				h.resume.Begin(tc.handled - 0x10)
				tx := tr.Begin()
				tr.Add(tx, 1)
				tr.Commit(tx, tc.handled)
				h.resume.Commit(tc.handled)
				tr.Ack(tx, 1)
			}
			if err := h.SessionStart(t.Context(), tc.next); err != nil {
				t.Fatalf("SessionStart: %v", err)
			}
			if got := tr.Confirmed(); got != tc.want {
				t.Errorf("Confirmed = %s, want %s", got, tc.want)
			}
			if tc.handled != 0 {
				// A transaction below what was handled: a replay on the
				// same history, new on another.
				got := h.resume.Begin(tc.handled - 0x10)
				if want := map[bool]resume.BeginAction{false: resume.BeginReplay, true: resume.BeginNew}[tc.reset]; got != want {
					t.Errorf("a re-sent transaction below what was handled: %s, want %s", got, want)
				}
			}
		})
	}
}

// On another history the transaction the lost session left open is
// aborted and what is in flight is waited for before the tracker is reset;
// a done context ends the wait with an error and resets nothing.
func TestHandlerSessionStartWaitsForOldHistory(t *testing.T) {
	one := replication.Session{SystemID: "1", Timeline: 1, XLogPos: 0x9000, SlotConfirmed: 0x100}
	two := replication.Session{SystemID: "2", Timeline: 1, XLogPos: 0x300, SlotConfirmed: 0x200}
	setup := func(t *testing.T) (h *handler, committed, open *checkpoint.Tx) {
		h = sessionHandler()
		tr := h.tracker
		if err := h.SessionStart(t.Context(), one); err != nil {
			t.Fatal(err)
		}
		h.resume.Begin(0x600)
		committed = tr.Begin()
		tr.Add(committed, 1)
		tr.Commit(committed, 0x700)
		h.resume.Commit(0x700)
		h.resume.Begin(0x800) // left open by the lost session, one record in flight
		open = tr.Begin()
		h.tx = open
		tr.Add(open, 1)
		h.SessionLost()
		return h, committed, open
	}

	t.Run("waits, then resets", func(t *testing.T) {
		h, committed, open := setup(t)
		tr := h.tracker
		done := make(chan error, 1)
		go func() { done <- h.SessionStart(context.Background(), two) }()
		tr.Ack(committed, 1) // raises Confirmed to 0x700, of the old history
		select {
		case err := <-done:
			t.Fatalf("SessionStart returned %v with a record of the old history in flight", err)
		case <-time.After(20 * time.Millisecond):
		}
		tr.Ack(open, 1)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := tr.Confirmed(); got != two.SlotConfirmed {
			t.Errorf("Confirmed = %s, want the new slot's %s", got, two.SlotConfirmed)
		}
		if _, open := h.resume.Open(); h.tx != nil || open {
			t.Error("the open transaction of the old history is still open")
		}
	})
	t.Run("ctx done while waiting", func(t *testing.T) {
		h, _, _ := setup(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- h.SessionStart(ctx, two) }()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("SessionStart = %v, want context.Canceled", err)
		}
		if got := h.tracker.Confirmed(); got != one.SlotConfirmed {
			t.Errorf("Confirmed = %s after an interrupted wait, want it untouched (%s)", got, one.SlotConfirmed)
		}
	})
}

// With exactly-once delivery SessionStart does not fence (nor read the
// checkpoint): the session does not hold the slot before START_REPLICATION,
// and a standby that found the slot free between two sessions of the
// active one would stop the active one and then lose the slot to it.
// SessionStreaming does, once. (The transactions here have no publisher:
// a Kafka call from SessionStart would panic.)
func TestHandlerSessionStartDoesNotFence(t *testing.T) {
	h := sessionHandler()
	tx := &transactions{tracker: h.tracker, log: h.log, wake: make(chan struct{}, 1)}
	h.delivery = tx
	s := replication.Session{SystemID: "1", Timeline: 1, XLogPos: 0x9000, SlotConfirmed: 0x800}
	if err := h.SessionStart(t.Context(), s); err != nil {
		t.Fatalf("SessionStart: %v", err)
	}
	if tx.fenced {
		t.Error("SessionStart fenced")
	}
	tx.fenced = true // as after the first SessionStreaming
	if err := h.SessionStreaming(t.Context()); err != nil {
		t.Fatalf("SessionStreaming after the first: %v", err)
	}
}
