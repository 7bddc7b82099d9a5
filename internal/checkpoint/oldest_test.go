package checkpoint

// Tests of Oldest: the commit time of the oldest transaction with a record
// not yet acknowledged (the unpublished-event alarm).

import (
	"testing"
	"time"
)

func TestOldest(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 1, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	tests := []struct {
		name string
		// setup leaves the tracker in the state under test.
		setup func(tr *Tracker)
		want  time.Time // zero: none
	}{
		{name: "idle", setup: func(*Tracker) {}},
		{name: "open without records", setup: func(tr *Tracker) { tr.BeginAt(at(1)) }},
		{name: "open with a record in flight", setup: func(tr *Tracker) {
			tr.Add(tr.BeginAt(at(1)), 10)
		}, want: at(1)},
		{name: "open with its records acknowledged", setup: func(tr *Tracker) {
			tx := tr.BeginAt(at(1))
			tr.Add(tx, 10)
			tr.Ack(tx, 10)
		}},
		{name: "committed, waiting for its ack", setup: func(tr *Tracker) {
			tx := tr.BeginAt(at(1))
			tr.Add(tx, 10)
			tr.Commit(tx, 100)
		}, want: at(1)},
		{name: "committed and acknowledged", setup: func(tr *Tracker) {
			tx := tr.BeginAt(at(1))
			tr.Add(tx, 10)
			tr.Commit(tx, 100)
			tr.Ack(tx, 10)
		}},
		{name: "the front of the queue, not a newer open one", setup: func(tr *Tracker) {
			a := tr.BeginAt(at(1))
			tr.Add(a, 10)
			tr.Commit(a, 100)
			tr.Add(tr.BeginAt(at(2)), 10)
		}, want: at(1)},
		{name: "the next once the oldest is acknowledged", setup: func(tr *Tracker) {
			a := tr.BeginAt(at(1))
			tr.Add(a, 10)
			tr.Commit(a, 100)
			b := tr.BeginAt(at(2))
			tr.Add(b, 10)
			tr.Commit(b, 200)
			tr.Ack(a, 10)
		}, want: at(2)},
		{name: "an older transaction acknowledged out of order waits behind an unacknowledged one", setup: func(tr *Tracker) {
			a := tr.BeginAt(at(1))
			tr.Add(a, 10)
			tr.Commit(a, 100)
			b := tr.BeginAt(at(2))
			tr.Add(b, 10)
			tr.Commit(b, 200)
			tr.Ack(b, 10)
		}, want: at(1)},
		{name: "the open one once the queue is acknowledged", setup: func(tr *Tracker) {
			a := tr.BeginAt(at(1))
			tr.Add(a, 10)
			tr.Commit(a, 100)
			tr.Add(tr.BeginAt(at(2)), 10)
			tr.Ack(a, 10)
		}, want: at(2)},
		{name: "an aborted transaction is not reported", setup: func(tr *Tracker) {
			tx := tr.BeginAt(at(1))
			tr.Add(tx, 10)
			tr.Abort(tx)
		}},
		{name: "no commit time", setup: func(tr *Tracker) {
			tr.Add(tr.Begin(), 10)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(Limits{})
			tc.setup(tr)
			got, ok := tr.Oldest()
			if ok != !tc.want.IsZero() || !got.Equal(tc.want) {
				t.Fatalf("Oldest = %v, %v; want %v, %v", got, ok, tc.want, !tc.want.IsZero())
			}
		})
	}
}
