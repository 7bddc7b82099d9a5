package checkpoint

// Helpers shared by the checkpoint tests: Confirmed checks and waiting for a parked waiter.

import (
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

func wantConfirmed(t *testing.T, tr *Tracker, want pglogrepl.LSN) {
	t.Helper()
	if got := tr.Confirmed(); got != want {
		t.Fatalf("Confirmed = %v, want %v", got, want)
	}
}

// waitRegistered blocks until some WaitRoom (room) or WaitDrained (drain)
// caller is parked on the tracker's wakeup channel.
func waitRegistered(t *testing.T, tr *Tracker, drain bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		tr.mu.Lock()
		ok := tr.roomCh != nil
		if drain {
			ok = tr.drainCh != nil
		}
		tr.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("waiter never parked")
		}
		time.Sleep(time.Millisecond)
	}
}
