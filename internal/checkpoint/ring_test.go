package checkpoint

// Tests of the transaction ring and that the hot path does not allocate.

import (
	"math/rand/v2"
	"testing"

	"github.com/jackc/pglogrepl"
)

func TestRingFIFO(t *testing.T) {
	var r ring
	r.init(4)
	var want []*Tx
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 5000; i++ {
		if rng.IntN(3) != 0 || len(want) == 0 {
			tx := &Tx{end: pglogrepl.LSN(i)}
			r.push(tx)
			want = append(want, tx)
		} else {
			if r.front() != want[0] {
				t.Fatalf("step %d: front = %v, want %v", i, r.front(), want[0])
			}
			r.pop()
			want = want[1:]
		}
		if r.len() != len(want) {
			t.Fatalf("step %d: len = %d, want %d", i, r.len(), len(want))
		}
		if len(want) > 0 && r.back() != want[len(want)-1] {
			t.Fatalf("step %d: back mismatch", i)
		}
	}
}

func TestHotPathDoesNotAllocate(t *testing.T) {
	tests := []struct {
		name string
		tx   func(tr *Tracker, end pglogrepl.LSN)
	}{
		{name: "zero-record tx", tx: func(tr *Tracker, end pglogrepl.LSN) {
			tr.Commit(tr.Begin(), end)
		}},
		{name: "one record acked after commit", tx: func(tr *Tracker, end pglogrepl.LSN) {
			tx := tr.Begin()
			tr.Add(tx, 100)
			tr.Commit(tx, end)
			tr.Ack(tx, 100)
		}},
		{name: "one record acked before commit", tx: func(tr *Tracker, end pglogrepl.LSN) {
			tx := tr.Begin()
			tr.Add(tx, 100)
			tr.Ack(tx, 100)
			tr.Commit(tx, end)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(Limits{MaxRecords: 10})
			end := pglogrepl.LSN(0)
			tc.tx(tr, end) // warm the free list
			allocs := testing.AllocsPerRun(1000, func() {
				end++
				tc.tx(tr, end)
			})
			if allocs != 0 {
				t.Fatalf("%v allocations per transaction, want 0", allocs)
			}
			wantConfirmed(t, tr, end)
		})
	}
}
