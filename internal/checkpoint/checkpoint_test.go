package checkpoint

// Tests of the confirmation rules: zero-record transactions, ObserveWALEnd and SetStart.

import (
	"testing"

	"github.com/jackc/pglogrepl"
)

func TestZeroRecordTxBetweenRecordsJumps(t *testing.T) {
	tr := New(Limits{})
	a := tr.Begin()
	tr.Add(a, 1)
	tr.Commit(a, 100)
	for i := 1; i <= 40; i++ { // more than the ring's initial size, all folded
		tr.Commit(tr.Begin(), pglogrepl.LSN(100+i))
	}
	wantConfirmed(t, tr, 0)
	if got := tr.Pending(); got != 41 {
		t.Fatalf("Pending = %d, want 41", got)
	}
	if got := tr.queue.len(); got != 1 {
		t.Fatalf("queue length = %d, want 1 (zero-record txs folded into the tail)", got)
	}
	tr.Ack(a, 1)
	wantConfirmed(t, tr, 140)
	if got := tr.Pending(); got != 0 {
		t.Fatalf("Pending = %d, want 0", got)
	}
}

func TestObserveWALEnd(t *testing.T) {
	tests := []struct {
		name  string
		setup func(tr *Tracker) // leaves the tracker in the state under test
		wal   pglogrepl.LSN
		want  pglogrepl.LSN
	}{
		{
			name:  "idle raises",
			setup: func(tr *Tracker) {},
			wal:   0x500, want: 0x500,
		},
		{
			name:  "idle never lowers",
			setup: func(tr *Tracker) { tr.SetStart(0x600) },
			wal:   0x500, want: 0x600,
		},
		{
			name: "idle after everything acked",
			setup: func(tr *Tracker) {
				tx := tr.Begin()
				tr.Add(tx, 1)
				tr.Commit(tx, 0x200)
				tr.Ack(tx, 1)
			},
			wal: 0x500, want: 0x500,
		},
		{
			name:  "open tx without records",
			setup: func(tr *Tracker) { tr.Begin() },
			wal:   0x500, want: 0x100,
		},
		{
			name: "open tx with a record in flight",
			setup: func(tr *Tracker) {
				tr.Add(tr.Begin(), 1)
			},
			wal: 0x500, want: 0x100,
		},
		{
			name: "open tx whose records are all acked",
			setup: func(tr *Tracker) {
				tx := tr.Begin()
				tr.Add(tx, 1)
				tr.Ack(tx, 1)
			},
			wal: 0x500, want: 0x100,
		},
		{
			name: "committed tx awaiting acks",
			setup: func(tr *Tracker) {
				tx := tr.Begin()
				tr.Add(tx, 1)
				tr.Commit(tx, 0x200)
			},
			wal: 0x500, want: 0x100,
		},
		{
			name: "aborted tx records in flight",
			setup: func(tr *Tracker) {
				tx := tr.Begin()
				tr.Add(tx, 1)
				tr.Abort(tx)
			},
			wal: 0x500, want: 0x100,
		},
		{
			name: "aborted tx with nothing in flight",
			setup: func(tr *Tracker) {
				tr.Abort(tr.Begin())
			},
			wal: 0x500, want: 0x500,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(Limits{})
			tr.SetStart(0x100)
			tc.setup(tr)
			tr.ObserveWALEnd(tc.wal)
			wantConfirmed(t, tr, tc.want)
		})
	}
}

func TestSetStart(t *testing.T) {
	tests := []struct {
		name   string
		starts []pglogrepl.LSN
		commit pglogrepl.LSN // a zero-record tx committed afterwards, 0 for none
		want   pglogrepl.LSN
	}{
		{name: "sets", starts: []pglogrepl.LSN{0x100}, want: 0x100},
		{name: "only raises", starts: []pglogrepl.LSN{0x200, 0x100}, want: 0x200},
		{name: "commit below start does not lower", starts: []pglogrepl.LSN{0x200}, commit: 0x150, want: 0x200},
		{name: "commit above start raises", starts: []pglogrepl.LSN{0x200}, commit: 0x250, want: 0x250},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(Limits{})
			for _, s := range tc.starts {
				tr.SetStart(s)
			}
			if tc.commit != 0 {
				tr.Commit(tr.Begin(), tc.commit)
			}
			wantConfirmed(t, tr, tc.want)
		})
	}
}
