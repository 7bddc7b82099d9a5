package checkpoint

// Tests of Abort and of the panics on misuse of a Tracker.

import (
	"strings"
	"testing"
	"time"
)

func TestAbort(t *testing.T) {
	t.Run("unacked records do not stall the re-sent copy", func(t *testing.T) {
		tr := New(Limits{})
		tr.SetStart(0x100)
		old := tr.Begin()
		tr.Add(old, 5)
		tr.Add(old, 6)
		tr.Abort(old) // stream broke; both records still in flight

		resent := tr.Begin() // the same transaction, re-sent after reconnect
		tr.Add(resent, 5)
		tr.Add(resent, 6)
		tr.Commit(resent, 0x200)
		tr.Ack(resent, 6)
		wantConfirmed(t, tr, 0x100)
		tr.Ack(resent, 5)
		wantConfirmed(t, tr, 0x200)

		if r, b := tr.InFlight(); r != 2 || b != 11 {
			t.Fatalf("InFlight = (%d, %d), want the aborted copy's (2, 11)", r, b)
		}
		if got := tr.Pending(); got != 1 {
			t.Fatalf("Pending = %d, want 1 (the aborted tx)", got)
		}
		tr.ObserveWALEnd(0x300) // not idle: aborted records in flight
		wantConfirmed(t, tr, 0x200)

		tr.Ack(old, 5)
		tr.Ack(old, 6)
		if r, b := tr.InFlight(); r != 0 || b != 0 {
			t.Fatalf("InFlight = (%d, %d), want (0, 0)", r, b)
		}
		if got := tr.Pending(); got != 0 {
			t.Fatalf("Pending = %d, want 0", got)
		}
		wantConfirmed(t, tr, 0x200) // the aborted tx confirmed nothing
		tr.ObserveWALEnd(0x300)
		wantConfirmed(t, tr, 0x300)
	})
	t.Run("earlier committed tx still confirms", func(t *testing.T) {
		tr := New(Limits{})
		a := tr.Begin()
		tr.Add(a, 1)
		tr.Commit(a, 0x200)
		b := tr.Begin()
		tr.Add(b, 1)
		tr.Abort(b)
		tr.Ack(a, 1)
		wantConfirmed(t, tr, 0x200)
		tr.Ack(b, 1)
		wantConfirmed(t, tr, 0x200)
	})
	t.Run("nil is a no-op", func(t *testing.T) {
		tr := New(Limits{})
		tr.Abort(nil)
		if got := tr.Pending(); got != 0 {
			t.Fatalf("Pending = %d, want 0", got)
		}
	})
}

func TestMisusePanics(t *testing.T) {
	tests := []struct {
		name string
		do   func(tr *Tracker)
		want string
	}{
		{
			name: "more acks than adds on an open tx",
			do: func(tr *Tracker) {
				tx := tr.Begin()
				tr.Add(tx, 1)
				tr.Ack(tx, 1)
				tr.Ack(tx, 1)
			},
			want: "more times than Add",
		},
		{
			name: "ack on a finished tx",
			do: func(tr *Tracker) {
				tx := tr.Begin()
				tr.Add(tx, 1)
				tr.Commit(tx, 10)
				tr.Ack(tx, 1)
				tr.Ack(tx, 1)
			},
			want: "more times than Add",
		},
		{
			name: "ack without add",
			do:   func(tr *Tracker) { tr.Ack(tr.Begin(), 1) },
			want: "more times than Add",
		},
		{
			name: "byte counts differ",
			do: func(tr *Tracker) {
				tx := tr.Begin()
				tr.Add(tx, 10)
				tr.Ack(tx, 9)
			},
			want: "byte counts",
		},
		{
			name: "add after commit",
			do: func(tr *Tracker) {
				tx := tr.Begin()
				tr.Add(tx, 1)
				tr.Commit(tx, 10)
				tr.Add(tx, 1)
			},
			want: "Add on a transaction that is not open",
		},
		{
			name: "double commit",
			do: func(tr *Tracker) {
				tx := tr.Begin()
				tr.Add(tx, 1)
				tr.Commit(tx, 10)
				tr.Commit(tx, 10)
			},
			want: "Commit on a transaction that is not open",
		},
		{
			name: "abort after commit",
			do: func(tr *Tracker) {
				tx := tr.Begin()
				tr.Add(tx, 1)
				tr.Commit(tx, 10)
				tr.Abort(tx)
			},
			want: "Abort on a transaction that is not open",
		},
		{
			name: "tx not from Begin",
			do:   func(tr *Tracker) { tr.Add(&Tx{}, 1) },
			want: "Add on a transaction that is not open",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(Limits{})
			msg := func() (msg string) {
				defer func() {
					if r := recover(); r != nil {
						msg, _ = r.(string)
						if msg == "" {
							msg = "non-string panic"
						}
					}
				}()
				tc.do(tr)
				return ""
			}()
			if !strings.HasPrefix(msg, "checkpoint: ") || !strings.Contains(msg, tc.want) {
				t.Fatalf("panic = %q, want one containing %q", msg, tc.want)
			}
			// The mutex must have been released before panicking.
			locked := make(chan struct{})
			go func() { tr.InFlight(); close(locked) }()
			select {
			case <-locked:
			case <-time.After(10 * time.Second):
				t.Fatal("tracker mutex still held after panic")
			}
		})
	}
}
