package relay_test

import (
	"strings"
	"testing"
	"time"
)

// A standby (a second relay while another holds the slot) says its state
// once, at INFO, not a WARN per attempt; its attempts are at DEBUG; it
// emits no heartbeats, so it does not warn that they do not come back; it
// says when it takes over.
func TestRelayStandbyLogsItsStateOnce(t *testing.T) {
	f := newFixture(t, nil)
	active := f.start(t)
	f.waitCaughtUp(t, 10*time.Second)

	cfg := f.cfg
	cfg.Postgres.MinBackoff = 20 * time.Millisecond
	cfg.Postgres.MaxBackoff = 50 * time.Millisecond
	// Heartbeats on: a standby emitting them would warn, after three
	// intervals and 5s, that they do not come back.
	cfg.Relay.HeartbeatInterval = 100 * time.Millisecond
	logs := &logBuffer{}
	startRelay(t, cfg, logs)
	// Enough attempts that a line per attempt would show (each attempt's
	// error is logged, at DEBUG), for longer than the heartbeats' grace
	// (3 intervals and 5s: 5.3s): 140 attempts, 20, 40 then 50ms apart,
	// take at least 6.9s.
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(logs.String(), "replication slot is active in another process") < 140 { // each attempt's error, at whatever level
		if time.Now().After(deadline) {
			t.Fatalf("the standby made fewer than 140 attempts in 30s:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(logs.lines("standby: another process streams from the slot")); n != 1 {
		t.Errorf("the standby said its state %d times, want once", n)
	}
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"level":"WARN"`) || strings.Contains(l, `"level":"ERROR"`) {
			t.Errorf("the standby logged, while waiting: %s", l)
		}
	}
	if err := active.stop(); err != nil {
		t.Fatal(err)
	}
	logs.waitLog(t, "streaming from slot", nil, 30*time.Second)
}
