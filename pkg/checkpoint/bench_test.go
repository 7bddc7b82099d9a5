package checkpoint

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

// Benchmarks of the checkpoint paths that checkpoint_test.go's benchmarks
// (one-record and empty transactions, parallel acks) do not cover.

// BenchmarkWaitRoom is the backpressure check the stream makes before every
// message it reads, with room to spare.
func BenchmarkWaitRoom(b *testing.B) {
	tr := New(Limits{MaxRecords: 20000, MaxBytes: 16 << 20})
	tx := tr.Begin()
	tr.Add(tx, 200)
	ctx := context.Background()
	until := time.Now().Add(time.Hour)
	b.ReportAllocs()
	for b.Loop() {
		if !tr.WaitRoom(ctx, until) {
			b.Fatal("no room")
		}
	}
}

// BenchmarkConfirmed is the read each standby status update makes.
func BenchmarkConfirmed(b *testing.B) {
	tr := New(Limits{})
	tr.SetStart(0x1000)
	b.ReportAllocs()
	for b.Loop() {
		if tr.Confirmed() != 0x1000 {
			b.Fatal("wrong LSN")
		}
	}
}

// BenchmarkTxHundredRecords tracks 100-record transactions, acked in order
// after their Commit (the backlog shape of 100-row transactions); one op is
// one record.
func BenchmarkTxHundredRecords(b *testing.B) {
	const perTx = 100
	tr := New(Limits{MaxRecords: 20000})
	var (
		end pglogrepl.LSN
		tx  *Tx
		n   int
	)
	b.ReportAllocs()
	for b.Loop() {
		if tx == nil {
			tx = tr.Begin()
		}
		tr.Add(tx, 200)
		if n++; n == perTx {
			end++
			tr.Commit(tx, end)
			for range perTx {
				tr.Ack(tx, 200)
			}
			tx, n = nil, 0
		}
	}
}
