package checkpoint

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

// panicMessage runs do and returns what it panicked with, "" if nothing.
func panicMessage(do func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg, _ = r.(string)
			if msg == "" {
				msg = "non-string panic"
			}
		}
	}()
	do()
	return ""
}

func TestReset(t *testing.T) {
	tests := []struct {
		name  string
		setup func(tr *Tracker) // leaves the tracker in the state under test
		lsn   pglogrepl.LSN
		panic string // "" when Reset is legal
	}{
		{name: "new tracker", setup: func(*Tracker) {}, lsn: 0x100},
		{name: "lowers", setup: func(tr *Tracker) { tr.SetStart(0x9000) }, lsn: 0x100},
		{name: "raises", setup: func(tr *Tracker) { tr.SetStart(0x100) }, lsn: 0x9000},
		{
			name: "after everything was acknowledged",
			setup: func(tr *Tracker) {
				tx := tr.Begin()
				tr.Add(tx, 10)
				tr.Commit(tx, 0x9000)
				tr.Ack(tx, 10)
				aborted := tr.Begin()
				tr.Add(aborted, 5)
				tr.Abort(aborted)
				tr.Ack(aborted, 5)
			},
			lsn: 0x100,
		},
		{
			name:  "a transaction open",
			setup: func(tr *Tracker) { tr.Begin() },
			lsn:   0x100, panic: "Reset while",
		},
		{
			name: "a committed transaction waiting for acks",
			setup: func(tr *Tracker) {
				tx := tr.Begin()
				tr.Add(tx, 10)
				tr.Commit(tx, 0x9000)
			},
			lsn: 0x100, panic: "Reset while",
		},
		{
			name: "an aborted transaction's record in flight",
			setup: func(tr *Tracker) {
				tx := tr.Begin()
				tr.Add(tx, 10)
				tr.Abort(tx)
			},
			lsn: 0x100, panic: "Reset while",
		},
		{
			name: "a finished transaction behind one waiting",
			setup: func(tr *Tracker) {
				tx := tr.Begin()
				tr.Add(tx, 10)
				tr.Commit(tx, 0x9000)
				tr.Commit(tr.Begin(), 0x9100)
			},
			lsn: 0x100, panic: "Reset while",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(Limits{MaxRecords: 10})
			tc.setup(tr)
			before := tr.Confirmed()
			msg := panicMessage(func() { tr.Reset(tc.lsn) })
			if tc.panic != "" {
				if !strings.HasPrefix(msg, "checkpoint: ") || !strings.Contains(msg, tc.panic) {
					t.Fatalf("panic = %q, want one starting with %q and containing %q", msg, "checkpoint: ", tc.panic)
				}
				wantConfirmed(t, tr, before) // nothing changed
				return
			}
			if msg != "" {
				t.Fatalf("Reset on an idle tracker panicked: %s", msg)
			}
			wantConfirmed(t, tr, tc.lsn)
			// The tracker goes on from the new position.
			tx := tr.Begin()
			tr.Add(tx, 10)
			tr.Commit(tx, tc.lsn+0x10)
			wantConfirmed(t, tr, tc.lsn)
			tr.Ack(tx, 10)
			wantConfirmed(t, tr, tc.lsn+0x10)
			if n, b := tr.InFlight(); n != 0 || b != 0 || tr.Pending() != 0 {
				t.Fatalf("after the transaction: InFlight %d, %d; Pending %d", n, b, tr.Pending())
			}
		})
	}
}

// WaitRoomFor lets a message larger than the byte cap through only when
// nothing is in flight; anything else at once.
func TestWaitRoomFor(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name     string
		limits   Limits
		inFlight []int // record sizes in flight before the call
		n        int
		ctx      context.Context
		until    time.Time
		want     bool
	}{
		{name: "no byte cap", limits: Limits{}, inFlight: []int{10, 10}, n: 1 << 30, want: true},
		{name: "at the cap", limits: Limits{MaxBytes: 100}, inFlight: []int{90}, n: 100, want: true},
		{name: "small, over the cap already", limits: Limits{MaxBytes: 100}, inFlight: []int{90, 50}, n: 10, want: true},
		{name: "large, nothing in flight", limits: Limits{MaxBytes: 100}, n: 101, want: true},
		{name: "large, records cap full, nothing else", limits: Limits{MaxRecords: 1, MaxBytes: 100}, n: 500, want: true},
		{name: "large with a record in flight, until passed", limits: Limits{MaxBytes: 100}, inFlight: []int{1}, n: 101, until: time.Now().Add(-time.Second)},
		{name: "large with a record in flight, until soon", limits: Limits{MaxBytes: 100}, inFlight: []int{1}, n: 101, until: time.Now().Add(20 * time.Millisecond)},
		{name: "large with a record in flight, ctx done", limits: Limits{MaxBytes: 100}, inFlight: []int{1}, n: 101, ctx: canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(tc.limits)
			tx := tr.Begin()
			for _, s := range tc.inFlight {
				tr.Add(tx, s)
			}
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			if got := tr.WaitRoomFor(ctx, tc.until, tc.n); got != tc.want {
				t.Fatalf("WaitRoomFor(%d) = %v, want %v", tc.n, got, tc.want)
			}
		})
	}
	t.Run("large waits for the last ack", func(t *testing.T) {
		tr := New(Limits{MaxBytes: 100})
		tx := tr.Begin()
		tr.Add(tx, 30)
		tr.Add(tx, 40)
		tr.Commit(tx, 0x100)
		done := make(chan bool, 1)
		go func() { done <- tr.WaitRoomFor(context.Background(), time.Time{}, 1000) }()
		waitRegistered(t, tr, true)
		tr.Ack(tx, 30) // room for small ones, not for the large one
		if !tr.WaitRoom(context.Background(), time.Now()) {
			t.Fatal("no room after the Ack")
		}
		select {
		case got := <-done:
			t.Fatalf("WaitRoomFor returned %v with a record in flight", got)
		case <-time.After(20 * time.Millisecond):
		}
		tr.Ack(tx, 40)
		if !<-done {
			t.Fatal("WaitRoomFor = false once nothing was in flight")
		}
	})
	t.Run("ctx canceled while waiting", func(t *testing.T) {
		tr := New(Limits{MaxBytes: 100})
		tr.Add(tr.Begin(), 1)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan bool, 1)
		go func() { done <- tr.WaitRoomFor(ctx, time.Time{}, 101) }()
		waitRegistered(t, tr, true)
		cancel()
		if <-done {
			t.Fatal("WaitRoomFor = true with a record in flight")
		}
	})
}
