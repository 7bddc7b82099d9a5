package relay

import "time"

// monoClock reads the monotonic clock alone, for intervals within the
// process: half the cost of time.Now, which reads the wall clock as well,
// on a path taken for every record.
type monoClock struct{ start time.Time }

func newMonoClock() monoClock { return monoClock{start: time.Now()} }

// now is the time since the clock's start.
func (c monoClock) now() time.Duration { return time.Since(c.start) }

// at is t (a time.Now reading) on the clock.
func (c monoClock) at(t time.Time) time.Duration { return t.Sub(c.start) }

// wallAnchor places wall-clock times (Postgres's commit timestamps) on a
// monoClock, from one time.Now reading renewed every second. Placing a
// transaction's commit time once lets each of its records' latencies be
// measured with a monotonic read alone; a step of the wall clock shows
// within a second. Not safe for concurrent use: the stream's goroutine
// owns it.
type wallAnchor struct {
	wall time.Time     // a time.Now reading
	mono time.Duration // the same instant on the clock
}

// anchorLife is how long an anchor is used before it is read again.
const anchorLife = time.Second

// place returns wall-clock time t on c, whose current reading is now.
func (a *wallAnchor) place(c monoClock, now time.Duration, t time.Time) time.Duration {
	if a.wall.IsZero() || now-a.mono > anchorLife {
		w := time.Now()
		a.wall, a.mono = w, c.at(w)
	}
	return a.mono + t.Sub(a.wall) // t has no monotonic reading: wall clock difference
}
