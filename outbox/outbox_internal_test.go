package outbox

import (
	"regexp"
	"testing"
	"time"
)

// TestUUIDv7 checks the layout RFC 9562 gives version 7: the time prefix,
// the version and variant bits, and that ids differ within a millisecond.
func TestUUIDv7(t *testing.T) {
	now := time.UnixMilli(0x0190_1234_5678)
	canonical := regexp.MustCompile(`^01901234-5678-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := make(map[string]bool)
	for range 1000 {
		id := newUUIDv7(now)
		if !canonical.MatchString(id) {
			t.Fatalf("newUUIDv7 = %s, want 01901234-5678-7xxx-[89ab]xxx-xxxxxxxxxxxx", id)
		}
		if seen[id] {
			t.Fatalf("newUUIDv7 returned %s twice", id)
		}
		seen[id] = true
	}
	if a, b := newUUIDv7(now), newUUIDv7(now.Add(time.Millisecond)); a[:13] >= b[:13] {
		t.Errorf("ids of consecutive milliseconds do not sort by time: %s, %s", a, b)
	}
}
