package snapshot

import (
	"sync/atomic"
	"time"
)

// Progress counts a snapshot's rows: safe for concurrent use (the snapshot
// counts, /status and the progress log read).
type Progress struct {
	total   atomic.Int64
	done    atomic.Int64
	started atomic.Int64 // unix nanoseconds; 0: not started
	ended   atomic.Int64 // unix nanoseconds; 0: running
}

// Start records the rows to publish (counted in the snapshot) and the
// start time.
func (p *Progress) Start(total int64, now time.Time) {
	p.total.Store(total)
	p.done.Store(0)
	p.ended.Store(0)
	p.started.Store(now.UnixNano())
}

// AddTotal adds rows to the total (a second table).
func (p *Progress) AddTotal(n int64) { p.total.Add(n) }

// Done counts one row handed on.
func (p *Progress) Done() { p.done.Add(1) }

// End records the end of the snapshot.
func (p *Progress) End(now time.Time) { p.ended.Store(now.UnixNano()) }

// Status is a snapshot's progress at one moment.
type Status struct {
	Running bool    `json:"running"`
	Done    int64   `json:"rows_done"`
	Total   int64   `json:"rows_total"`
	Rate    float64 `json:"rows_per_second"`
	// ETA is the time left at Rate; 0 when unknown or done.
	ETA     time.Duration `json:"-"`
	ETAText string        `json:"eta,omitempty"`
	Elapsed time.Duration `json:"-"`
}

// Remaining is Total - Done, at least 0.
func (s Status) Remaining() int64 { return max(s.Total-s.Done, 0) }

// Status returns the progress at now; the zero Status before Start.
func (p *Progress) Status(now time.Time) Status {
	start := p.started.Load()
	if start == 0 {
		return Status{}
	}
	end := p.ended.Load()
	s := Status{Running: end == 0, Done: p.done.Load(), Total: p.total.Load()}
	if end == 0 {
		end = now.UnixNano()
	}
	s.Elapsed = time.Duration(end - start)
	if secs := s.Elapsed.Seconds(); secs > 0 {
		s.Rate = float64(s.Done) / secs
	}
	if s.Running && s.Rate > 0 {
		s.ETA = time.Duration(float64(s.Remaining()) / s.Rate * float64(time.Second)).Round(time.Second)
		s.ETAText = s.ETA.String()
	}
	return s
}
