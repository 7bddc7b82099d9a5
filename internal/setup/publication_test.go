package setup

import "testing"

// The first minor release with PostgreSQL's fix for decoding with a stale
// catalog after publication DDL, per major (the release of 2025-05-08).
func TestDecodingFixedIn(t *testing.T) {
	for _, tc := range []struct {
		num, fixed int
		stale      bool
	}{
		{140017, 140018, true},
		{140018, 140018, false},
		{150012, 150013, true},
		{150013, 150013, false},
		{150018, 150013, false}, // Debian's 15 here
		{160008, 160009, true},
		{160009, 160009, false},
		{170004, 170005, true},
		{170005, 170005, false},
		{180000, 0, false}, // 18.0 was released with it
		{130020, 0, false}, // refused before setup gets here
	} {
		fixed := decodingFixedIn(tc.num)
		if fixed != tc.fixed || (fixed != 0 && tc.num < fixed) != tc.stale {
			t.Errorf("decodingFixedIn(%d) = %d, want %d (stale %t)", tc.num, fixed, tc.fixed, tc.stale)
		}
	}
}
