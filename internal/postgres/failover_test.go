package postgres

import (
	"testing"

	"github.com/walrelay/walrelay/internal/config"
)

// TestFailoverModes checks that SlotFailover reads postgres.slot_failover
// as internal/config spells its values.
func TestFailoverModes(t *testing.T) {
	if failoverTrue != config.FailoverTrue || failoverFalse != config.FailoverFalse {
		t.Errorf("failoverTrue, failoverFalse = %q, %q; config has %q, %q", failoverTrue, failoverFalse, config.FailoverTrue, config.FailoverFalse)
	}
}
