package checkpoint

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

// Benchmarks of the Tracker: one-record and empty transactions, parallel
// acks, WaitRoom, Confirmed and 100-record transactions.

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

func BenchmarkTxOneRecord(b *testing.B) {
	tr := New(Limits{MaxRecords: 1000})
	b.ReportAllocs()
	end := pglogrepl.LSN(0)
	for b.Loop() {
		end++
		tx := tr.Begin()
		tr.Add(tx, 200)
		tr.Commit(tx, end)
		tr.Ack(tx, 200)
	}
	if tr.Confirmed() != end {
		b.Fatalf("Confirmed = %v, want %v", tr.Confirmed(), end)
	}
}

func BenchmarkTxZeroRecords(b *testing.B) {
	tr := New(Limits{})
	b.ReportAllocs()
	end := pglogrepl.LSN(0)
	for b.Loop() {
		end++
		tr.Commit(tr.Begin(), end)
	}
	if tr.Confirmed() != end {
		b.Fatalf("Confirmed = %v, want %v", tr.Confirmed(), end)
	}
}

// BenchmarkAckParallel measures Ack contention: b.N records of one
// transaction are acked from GOMAXPROCS goroutines.
func BenchmarkAckParallel(b *testing.B) {
	tr := New(Limits{})
	tx := tr.Begin()
	for range b.N {
		tr.Add(tx, 100)
	}
	tr.Commit(tx, 1)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tr.Ack(tx, 100)
		}
	})
	b.StopTimer()
	if tr.Confirmed() != 1 {
		b.Fatalf("Confirmed = %v after all acks, want 1", tr.Confirmed())
	}
}

// BenchmarkAckParallelManyTxs acks records of many small transactions from
// parallel goroutines, so acks also pop the queue out of order.
func BenchmarkAckParallelManyTxs(b *testing.B) {
	tr := New(Limits{})
	const perTx = 16
	txs := make([]*Tx, 0, b.N/perTx+1)
	for i := 0; i < b.N; i += perTx {
		tx := tr.Begin()
		n := min(perTx, b.N-i)
		for range n {
			tr.Add(tx, 100)
		}
		tr.Commit(tx, pglogrepl.LSN(len(txs)+1))
		txs = append(txs, tx)
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1) - 1
			tr.Ack(txs[i/perTx], 100)
		}
	})
	b.StopTimer()
	if want := pglogrepl.LSN(len(txs)); tr.Confirmed() != want {
		b.Fatalf("Confirmed = %v after all acks, want %v", tr.Confirmed(), want)
	}
}
