package relay

import (
	"bytes"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/replication"
	"github.com/walrelay/walrelay/internal/router"
)

// In a steady stream a row is routed into the record of an acknowledged
// one: no allocation, so the garbage collector has next to nothing to do at
// any rate. Records still in flight keep their bytes: routing the next rows
// never writes into them.
func TestRecordPoolRecycles(t *testing.T) {
	plan := benchPlan(t)
	cols := benchTuple()
	var (
		pool recordPool
		msg  router.Message
	)
	first, err := pool.route(plan, &msg, cols, benchCommitTime, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]byte(nil), first.rec.Value...)
	wantKey := append([]byte(nil), first.rec.Key...)

	// Rows routed while first is in flight, some recycled at once.
	cols[2].Data = []byte("other-key")
	for i := range 100 {
		out, err := pool.route(plan, &msg, cols, benchCommitTime, 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(out.rec.Key) != "other-key" {
			t.Fatalf("row %d: key %q", i, out.rec.Key)
		}
		if i%2 == 0 {
			pool.put(out)
		}
	}
	if !bytes.Equal(first.rec.Value, want) || !bytes.Equal(first.rec.Key, wantKey) || string(first.rec.Headers[0].Value) != "6f1c2a9e-5d0b-4c39-9a57-3d2f1b8e7c41" {
		t.Fatalf("a record in flight changed: key %q value %q", first.rec.Key, first.rec.Value)
	}
	if msg.Buf != nil {
		t.Errorf("the router's message still holds a record's buffer")
	}

	// An acknowledged record comes back for the next row, buffer and all.
	// (Under the race detector sync.Pool drops a quarter of what it is
	// given at random, hence a count rather than every time.)
	reused := 0
	prev, err := pool.route(plan, &msg, cols, benchCommitTime, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		prevBuf := &prev.buf[:1][0]
		pool.put(prev)
		out, err := pool.route(plan, &msg, cols, benchCommitTime, 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		if out == prev && &out.buf[0] == prevBuf {
			reused++
		}
		prev = out
	}
	if reused < 50 {
		t.Errorf("%d of 100 rows were routed into the record just acknowledged, want most", reused)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		out, err := pool.route(plan, &msg, cols, benchCommitTime, 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		pool.put(out)
	})
	if allocs != 0 && !raceEnabled {
		t.Errorf("routing into recycled records: %v allocations per row, want 0", allocs)
	}

	// A record whose buffer grew past maxPooledBuf comes back without it.
	big := &outRecord{buf: make([]byte, maxPooledBuf+1)}
	pool.put(big)
	if big.buf != nil {
		t.Errorf("a %d-byte buffer was kept for reuse", maxPooledBuf+1)
	}
}

// TestWallAnchor places wall-clock times on the monotonic clock: the
// present where the clock reads now, the past behind it by the wall
// clock's difference, and, once the anchor is over anchorLife old, from a
// new time.Now reading, so a wrong (stepped) anchor is corrected.
func TestWallAnchor(t *testing.T) {
	c := newMonoClock()
	var a wallAnchor
	near := func(got, want time.Duration) bool { return (got - want).Abs() < 50*time.Millisecond }

	now := c.now()
	if got := a.place(c, now, time.Now()); !near(got, now) {
		t.Fatalf("the present placed at %v, the clock reads %v", got, now)
	}
	past := time.Now().Add(-5 * time.Second).Round(0) // a wall-clock time, like Postgres's
	if got, want := a.place(c, c.now(), past), c.now()-5*time.Second; !near(got, want) {
		t.Fatalf("5s ago placed at %v, want about %v", got, want)
	}

	// An anchor taken before the wall clock stepped back an hour is used
	// while young, and read again once older than anchorLife.
	a.wall = a.wall.Add(time.Hour)
	if got, want := a.place(c, a.mono, past), a.mono-time.Hour-5*time.Second; !near(got, want) {
		t.Fatalf("with a young anchor, 5s ago placed at %v, want about %v (the anchor is kept)", got, want)
	}
	now = a.mono + anchorLife + time.Millisecond // the anchor is old by this reading
	if got, want := a.place(c, now, past), c.now()-5*time.Second; !near(got, want) {
		t.Fatalf("with an old anchor, 5s ago placed at %v, want about %v (the anchor read again)", got, want)
	}
}

// A row routed with the receive buffer it arrived in keeps its bytes there:
// the record's key, value and id header are the tuple's own bytes, and the
// record holds the buffer until it goes back to the pool, which releases
// it. Without a buffer (and so when the stream will not let one be held),
// the bytes are copied.
func TestRecordHoldsReceiveBuffer(t *testing.T) {
	plan := benchPlan(t)
	cols := benchTuple()
	var (
		pool recordPool
		msg  router.Message
	)
	in := replication.NewBuffer()
	out, err := pool.route(plan, &msg, cols, benchCommitTime, 1, in)
	if err != nil {
		t.Fatal(err)
	}
	copied, err := pool.route(plan, &msg, cols, benchCommitTime, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what      string
		in, local []byte
		col       int
	}{
		{"key", out.rec.Key, copied.rec.Key, 2},
		{"value", out.rec.Value, copied.rec.Value, 4},
		{"id header", out.rec.Headers[0].Value, copied.rec.Headers[0].Value, 0},
	} {
		if &c.in[0] != &cols[c.col].Data[0] {
			t.Errorf("%s routed with a receive buffer is a copy, want the tuple's bytes", c.what)
		}
		if &c.local[0] == &cols[c.col].Data[0] {
			t.Errorf("%s routed without a receive buffer points into the tuple, want a copy", c.what)
		}
	}
	pool.put(copied)

	// The record holds in once: put releases that hold, and in's own
	// Release then is the last one, so one more must panic.
	pool.put(out)
	in.Release()
	defer func() {
		if recover() == nil {
			t.Error("the record did not release its receive buffer when put back, or held it twice")
		}
	}()
	in.Release()
}
