package partition_test

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/partition"
	"github.com/walrelay/walrelay/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

// Partitions are aligned to the Unix epoch in UTC: daily ones start at UTC
// midnight whatever the time's zone, hourly ones on the hour, and names
// and bounds follow.
func TestSchemeNamesAndBounds(t *testing.T) {
	newYork, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		table    string
		interval time.Duration
		at       time.Time
		wantName string
		wantFrom string
		wantTo   string
	}{
		{"daily", "public.outbox", 24 * time.Hour, utc("2026-11-25T13:45:00Z"), "outbox_p20261125", "2026-11-25T00:00:00Z", "2026-11-26T00:00:00Z"},
		{"daily at midnight", "outbox", 24 * time.Hour, utc("2026-11-25T00:00:00Z"), "outbox_p20261125", "2026-11-25T00:00:00Z", "2026-11-26T00:00:00Z"},
		{"daily just before midnight", "outbox", 24 * time.Hour, utc("2026-11-25T23:59:59Z"), "outbox_p20261125", "2026-11-25T00:00:00Z", "2026-11-26T00:00:00Z"},
		// 20:30 in New York on the 24th is 01:30 UTC on the 25th.
		{"daily from another zone", "outbox", 24 * time.Hour, time.Date(2026, 11, 24, 20, 30, 0, 0, newYork), "outbox_p20261125", "2026-11-25T00:00:00Z", "2026-11-26T00:00:00Z"},
		// The night New York's clocks go back is 25 hours there, not in UTC.
		{"daily across a DST change", "outbox", 24 * time.Hour, utc("2026-11-01T05:30:00Z"), "outbox_p20261101", "2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z"},
		{"hourly", "events.outbox", time.Hour, utc("2026-11-25T06:59:59Z"), "outbox_p20261125T06", "2026-11-25T06:00:00Z", "2026-11-25T07:00:00Z"},
		{"six hours", "outbox", 6 * time.Hour, utc("2026-11-25T13:00:00Z"), "outbox_p20261125T12", "2026-11-25T12:00:00Z", "2026-11-25T18:00:00Z"},
		// 2026-11-25 is day 20782 since the epoch, even: a 48h partition starts there.
		{"two days from the epoch", "outbox", 48 * time.Hour, utc("2026-11-26T23:00:00Z"), "outbox_p20261125", "2026-11-25T00:00:00Z", "2026-11-27T00:00:00Z"},
		{"two days, the next", "outbox", 48 * time.Hour, utc("2026-11-27T00:00:00Z"), "outbox_p20261127", "2026-11-27T00:00:00Z", "2026-11-29T00:00:00Z"},
		{"before 1970", "outbox", 24 * time.Hour, utc("1969-12-31T23:00:00Z"), "outbox_p19691231", "1969-12-31T00:00:00Z", "1970-01-01T00:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := partition.NewScheme(tc.table, "created_at", tc.interval)
			if err != nil {
				t.Fatal(err)
			}
			p := s.Partition(s.Start(tc.at))
			if p.Name != tc.wantName || !p.From.Equal(utc(tc.wantFrom)) || !p.To.Equal(utc(tc.wantTo)) {
				t.Errorf("partition of %s = %s, want %s [%s, %s)", tc.at, p, tc.wantName, tc.wantFrom, tc.wantTo)
			}
			if !p.Holds(tc.at) {
				t.Errorf("%s does not hold %s", p, tc.at)
			}
			stmt := s.CreateStatement(p.From)
			wantBounds := "FOR VALUES FROM ('" + utc(tc.wantFrom).Format("2006-01-02 15:04:05") + "+00') TO ('" + utc(tc.wantTo).Format("2006-01-02 15:04:05") + "+00')"
			if !strings.HasSuffix(stmt, wantBounds) || !strings.Contains(stmt, `"`+tc.wantName+`" PARTITION OF`) {
				t.Errorf("CreateStatement = %s, want the name %s and %s", stmt, tc.wantName, wantBounds)
			}
		})
	}
}

func TestSchemeRefuses(t *testing.T) {
	long := strings.Repeat("x", 53) // + "_p20261125T06" = 66 bytes
	for _, tc := range []struct {
		name, table string
		interval    time.Duration
		want        string
	}{
		{"name over 63 bytes", long, time.Hour, "shorten the table's name to at most 50 bytes"},
		{"daily name over 63 bytes", strings.Repeat("x", 54), 24 * time.Hour, "over Postgres's limit of 63"},
		{"not whole hours", "outbox", 90 * time.Minute, "whole number of hours"},
		{"bad table", `a.b.c`, time.Hour, "postgres.table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := partition.NewScheme(tc.table, "created_at", tc.interval)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewScheme(%q, %s) = %v, want an error containing %q", tc.table, tc.interval, err, tc.want)
			}
		})
	}
	// At the limit it is accepted: 53 + "_p20261125" = 63.
	if _, err := partition.NewScheme(long, "created_at", 24*time.Hour); err != nil {
		t.Errorf("a 63-byte daily name: %v", err)
	}
}
