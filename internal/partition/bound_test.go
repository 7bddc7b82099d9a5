package partition

import (
	"testing"
	"time"
)

// parseBound reads what pg_get_expr prints (TimeZone UTC, DateStyle ISO)
// and refuses what is not a range of one timestamp.
func TestParseBound(t *testing.T) {
	at := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, bound string
		from, to    time.Time
		def, bad    bool
	}{
		{"utc", "FOR VALUES FROM ('2026-11-25 00:00:00+00') TO ('2026-11-26 00:00:00+00')", at, at.Add(24 * time.Hour), false, false},
		{"fraction and offset", "FOR VALUES FROM ('2026-11-24 19:00:00.5-05') TO ('2026-11-25 05:30:00+05:30')", at.Add(500 * time.Millisecond), at, false, false},
		{"timestamp without zone", "FOR VALUES FROM ('2026-11-25 00:00:00') TO ('2026-11-25 01:00:00')", at, at.Add(time.Hour), false, false},
		{"open ends", "FOR VALUES FROM (MINVALUE) TO (MAXVALUE)", time.Time{}, unbounded(), false, false},
		{"infinities", "FOR VALUES FROM ('-infinity') TO ('infinity')", time.Time{}, unbounded(), false, false},
		{"default", "DEFAULT", time.Time{}, time.Time{}, true, false},
		{"list", "FOR VALUES IN ('a')", time.Time{}, time.Time{}, false, true},
		{"hash", "FOR VALUES WITH (modulus 2, remainder 0)", time.Time{}, time.Time{}, false, true},
		{"two columns", "FOR VALUES FROM ('2026-11-25 00:00:00+00', 1) TO ('2026-11-26 00:00:00+00', 1)", time.Time{}, time.Time{}, false, true},
		{"unquoted", "FOR VALUES FROM (2026-11-25 00:00:00+00') TO ('2026-11-26 00:00:00+00')", time.Time{}, time.Time{}, false, true},
		{"not a time", "FOR VALUES FROM (1) TO (2)", time.Time{}, time.Time{}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from, to, def, err := parseBound(tc.bound)
			if tc.bad {
				if err == nil {
					t.Errorf("parseBound(%q) = %v, %v, want an error", tc.bound, from, to)
				}
				return
			}
			if err != nil || !from.Equal(tc.from) || !to.Equal(tc.to) || def != tc.def {
				t.Errorf("parseBound(%q) = %v, %v, %v, %v; want %v, %v, %v", tc.bound, from, to, def, err, tc.from, tc.to, tc.def)
			}
		})
	}
}
