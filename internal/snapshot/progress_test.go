package snapshot_test

import (
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/snapshot"
)

func TestProgress(t *testing.T) {
	var p snapshot.Progress
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if s := p.Status(t0); s != (snapshot.Status{}) {
		t.Fatalf("before Start: %+v", s)
	}
	p.Start(100, t0)
	for range 25 {
		p.Done()
	}
	cases := []struct {
		name string
		at   time.Time
		want snapshot.Status
	}{
		{"running", t0.Add(time.Second), snapshot.Status{Running: true, Done: 25, Total: 100, Rate: 25, ETA: 3 * time.Second, ETAText: "3s", Elapsed: time.Second}},
		{"slower", t0.Add(5 * time.Second), snapshot.Status{Running: true, Done: 25, Total: 100, Rate: 5, ETA: 15 * time.Second, ETAText: "15s", Elapsed: 5 * time.Second}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := p.Status(c.at); got != c.want {
				t.Fatalf("Status = %+v, want %+v", got, c.want)
			}
		})
	}
	for range 75 {
		p.Done()
	}
	p.End(t0.Add(2 * time.Second))
	got := p.Status(t0.Add(time.Hour))
	want := snapshot.Status{Done: 100, Total: 100, Rate: 50, Elapsed: 2 * time.Second}
	if got != want || got.Remaining() != 0 {
		t.Fatalf("after End: %+v, want %+v", got, want)
	}
}
