package checkpoint

// Stress test of the Tracker under concurrent acks, backpressure, aborts and idle keepalives.

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

// TestStress runs a replication goroutine with backpressure, aborts and
// idle keepalives against many acking goroutines, while a checker verifies
// that Confirmed never covers a transaction the test has not seen fully acked.
func TestStress(t *testing.T) {
	const (
		nTx        = 20000
		workers    = 8
		maxRecords = 32
		maxBytes   = 16 << 10
		maxRecSize = 2000
	)
	type txInfo struct {
		records   int
		end       pglogrepl.LSN // 0 for an aborted copy
		committed atomic.Bool
		acked     atomic.Int32 // incremented before the tracker sees the Ack
	}
	type item struct {
		tx    *Tx
		info  *txInfo
		bytes int
	}
	infos := make([]*txInfo, 0, nTx+nTx/20)
	var infosMu sync.Mutex // infos grows while the checker reads it

	tr := New(Limits{MaxRecords: maxRecords, MaxBytes: maxBytes})
	tr.SetStart(0x1000)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	work := make(chan item, 64)
	var ackers sync.WaitGroup
	for w := range workers {
		ackers.Add(1)
		go func() {
			defer ackers.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			var batch []item
			for it := range work {
				batch = append(batch[:0], it)
			more:
				for len(batch) < 6 {
					select {
					case it, ok := <-work:
						if !ok {
							break more
						}
						batch = append(batch, it)
					default:
						break more
					}
				}
				rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
				for _, it := range batch {
					it.info.acked.Add(1)
					tr.Ack(it.tx, it.bytes)
				}
			}
		}()
	}

	stop := make(chan struct{})
	checkErr := make(chan string, 1)
	go func() {
		prev := tr.Confirmed()
		verified := 0 // infos[:verified] are known complete or aborted
		for {
			select {
			case <-stop:
				checkErr <- ""
				return
			default:
			}
			c := tr.Confirmed()
			if c < prev {
				checkErr <- "Confirmed went back"
				return
			}
			prev = c
			infosMu.Lock()
			for verified < len(infos) {
				in := infos[verified]
				if in.end != 0 && in.end > c {
					break
				}
				if in.end != 0 && (!in.committed.Load() || int(in.acked.Load()) != in.records) {
					infosMu.Unlock()
					checkErr <- "Confirmed " + c.String() + " covers tx ending at " + in.end.String() + " that is not fully acked"
					return
				}
				verified++
			}
			infosMu.Unlock()
		}
	}()

	rng := rand.New(rand.NewPCG(42, 43))
	end := pglogrepl.LSN(0x1000)
	idleHits, aborts := 0, 0
	for i := 0; i < nTx; i++ {
		n := rng.IntN(5)
		sizes := make([]int, n)
		for j := range sizes {
			sizes[j] = 1 + rng.IntN(maxRecSize)
		}
		copies := 1
		if rng.IntN(40) == 0 {
			copies = 2 // first copy aborted by a stream break, then re-sent
		}
		for c := 0; c < copies; c++ {
			aborted := c+1 < copies
			info := &txInfo{records: n}
			if !aborted {
				info.end = end + 0x100
			}
			infosMu.Lock()
			infos = append(infos, info)
			infosMu.Unlock()
			tx := tr.Begin()
			for _, s := range sizes {
				if !tr.WaitRoom(ctx, time.Time{}) {
					t.Fatal("WaitRoom gave up")
				}
				tr.Add(tx, s)
				if r, b := tr.InFlight(); r > maxRecords || b >= maxBytes+maxRecSize {
					t.Fatalf("in flight (%d, %d) beyond the caps", r, b)
				}
				work <- item{tx: tx, info: info, bytes: s}
			}
			if aborted {
				aborts++
				tr.Abort(tx)
				continue
			}
			end += 0x100
			info.committed.Store(true)
			tr.Commit(tx, end)
		}
		if rng.IntN(200) == 0 { // a quiet moment: once drained, idle is not stuck
			if err := tr.WaitDrained(ctx); err != nil {
				t.Fatal(err)
			}
			tr.ObserveWALEnd(end + 0x80)
			wantConfirmed(t, tr, end+0x80)
			end += 0x80
			idleHits++
		} else if rng.IntN(50) == 0 {
			tr.ObserveWALEnd(end + 0x80) // only applies when idle
			if tr.Confirmed() > end {
				end += 0x80
				idleHits++
			}
		}
	}
	if err := tr.WaitDrained(ctx); err != nil {
		t.Fatal(err)
	}
	close(work)
	ackers.Wait()
	close(stop)
	if msg := <-checkErr; msg != "" {
		t.Fatal(msg)
	}
	t.Logf("%d transactions, %d aborted copies, %d idle keepalives applied", nTx, aborts, idleHits)
	wantConfirmed(t, tr, end)
	if got := tr.Pending(); got != 0 {
		t.Fatalf("Pending = %d, want 0", got)
	}
	if r, b := tr.InFlight(); r != 0 || b != 0 {
		t.Fatalf("InFlight = (%d, %d), want (0, 0)", r, b)
	}
}
