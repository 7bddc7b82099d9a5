package checkpoint

// Tests of waiting on a Tracker: WaitRoom (backpressure) and WaitDrained.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestWaitRoomWakesOnAck(t *testing.T) {
	tests := []struct {
		name   string
		limits Limits
		sizes  []int // records added before waiting; the last fills the cap
		ack    int   // index of the record whose Ack must make room
	}{
		{name: "records cap", limits: Limits{MaxRecords: 3}, sizes: []int{1, 1, 1}, ack: 1},
		{name: "bytes cap", limits: Limits{MaxBytes: 100}, sizes: []int{40, 60}, ack: 0},
		{name: "bytes cap exceeded by last record", limits: Limits{MaxBytes: 100}, sizes: []int{40, 90}, ack: 1},
		{name: "oversize single record", limits: Limits{MaxBytes: 100}, sizes: []int{500}, ack: 0},
		{name: "both caps, records binding", limits: Limits{MaxRecords: 2, MaxBytes: 1000}, sizes: []int{1, 1}, ack: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(tc.limits)
			ctx := context.Background()
			tx := tr.Begin()
			for _, s := range tc.sizes {
				if !tr.WaitRoom(ctx, time.Time{}) {
					t.Fatalf("no room before adding %d bytes (in flight %v)", s, tc.sizes)
				}
				tr.Add(tx, s)
			}
			done := make(chan bool, 1)
			go func() { done <- tr.WaitRoom(ctx, time.Time{}) }()
			waitRegistered(t, tr, false)
			select {
			case got := <-done:
				t.Fatalf("WaitRoom returned %v at the cap", got)
			default:
			}
			tr.Ack(tx, tc.sizes[tc.ack])
			if !<-done {
				t.Fatal("WaitRoom returned false after an Ack made room")
			}
		})
	}
}

func TestWaitRoomWakesAllWaiters(t *testing.T) {
	tr := New(Limits{MaxRecords: 1})
	tx := tr.Begin()
	tr.Add(tx, 1)
	const n = 8
	var wg sync.WaitGroup
	var roomy atomic.Int32
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if tr.WaitRoom(context.Background(), time.Time{}) {
				roomy.Add(1)
			}
		}()
	}
	waitRegistered(t, tr, false)
	tr.Ack(tx, 1)
	wg.Wait()
	if roomy.Load() != n {
		t.Fatalf("%d of %d waiters saw room", roomy.Load(), n)
	}
}

func TestWaitRoomGivesUp(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name   string
		ctx    context.Context
		until  time.Time
		full   bool
		wantOK bool
	}{
		{name: "room despite done ctx", ctx: canceled, full: false, wantOK: true},
		{name: "room despite past until", ctx: context.Background(), until: time.Now().Add(-time.Hour), full: false, wantOK: true},
		{name: "until in the past", ctx: context.Background(), until: time.Now().Add(-time.Hour), full: true},
		{name: "until in the future", ctx: context.Background(), until: time.Now().Add(20 * time.Millisecond), full: true},
		{name: "ctx done", ctx: canceled, full: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(Limits{MaxRecords: 1})
			if tc.full {
				tr.Add(tr.Begin(), 1)
			}
			if got := tr.WaitRoom(tc.ctx, tc.until); got != tc.wantOK {
				t.Fatalf("WaitRoom = %v, want %v", got, tc.wantOK)
			}
		})
	}
	t.Run("ctx canceled while waiting", func(t *testing.T) {
		tr := New(Limits{MaxRecords: 1})
		tr.Add(tr.Begin(), 1)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan bool, 1)
		go func() { done <- tr.WaitRoom(ctx, time.Time{}) }()
		waitRegistered(t, tr, false)
		cancel()
		if <-done {
			t.Fatal("WaitRoom = true without room")
		}
	})
}

func TestWaitDrained(t *testing.T) {
	t.Run("nothing in flight", func(t *testing.T) {
		tr := New(Limits{})
		tr.Begin() // an open tx without records does not count
		if err := tr.WaitDrained(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("waits for the last ack", func(t *testing.T) {
		tr := New(Limits{})
		tx := tr.Begin()
		tr.Add(tx, 3)
		tr.Add(tx, 4)
		tr.Commit(tx, 10)
		done := make(chan error, 1)
		go func() { done <- tr.WaitDrained(context.Background()) }()
		waitRegistered(t, tr, true)
		tr.Ack(tx, 3)
		select {
		case err := <-done:
			t.Fatalf("WaitDrained returned %v with a record in flight", err)
		default:
		}
		tr.Ack(tx, 4)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
	t.Run("ctx done reports what is in flight", func(t *testing.T) {
		tr := New(Limits{})
		tx := tr.Begin()
		tr.Add(tx, 3)
		tr.Add(tx, 4)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- tr.WaitDrained(ctx) }()
		waitRegistered(t, tr, true)
		cancel()
		err := <-done
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if !strings.Contains(err.Error(), "2 in-flight records (7 bytes)") {
			t.Fatalf("err = %q, want the in-flight count", err)
		}
	})
}
