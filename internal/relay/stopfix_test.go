package relay_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/testenv"
)

// A row relay.on_error=stop stops on is told with the commands that show
// it and skip it: slot peek and slot advance --past-event ID.
func TestRelayStopSaysPeekAndAdvance(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Relay.OnError.SetAll(config.PolicyStop) })
	testenv.Exec(t, f.dsn, `ALTER TABLE outbox ALTER COLUMN aggregatetype DROP NOT NULL`)
	f.createProbe(t)
	run := f.start(t)
	badID, _ := insertReturningID(t, f.dsn, "<NULL>")
	err := run.wait(30 * time.Second)
	if !errors.Is(err, relay.ErrStopped) {
		t.Fatalf("Run returned %v, want ErrStopped", err)
	}
	slot := f.cfg.Postgres.Slot
	for _, want := range []string{"walrelay slot peek " + slot, "walrelay slot advance " + slot + " --past-event " + badID} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Run returned %q, want it to say %q", err, want)
		}
	}
}
