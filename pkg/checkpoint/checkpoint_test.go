package checkpoint

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
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
