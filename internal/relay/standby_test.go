package relay_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/internal/testenv"
)

// A standby relay taking over the slot when the active one stops.

// startRelay runs a relay with cfg, logging to logs, in the background
// (runRelay); its log is in the test's output if the test fails.
func startRelay(t *testing.T, cfg config.Config, logs *logBuffer) *running {
	t.Helper()
	t.Cleanup(func() { // after runRelay's, which stops the relay
		if t.Failed() {
			t.Logf("log of the relay started with startRelay:\n%s", logs.String())
		}
	})
	return runRelay(t, cfg, logs, metrics.New(prometheus.NewRegistry(), "test", cfg.Postgres.Slot))
}

// slotWatch polls a slot's confirmed_flush_lsn, the flush position its
// walsender last received (pg_stat_replication) and the server's WAL end,
// as often as it can until stopped.
type slotWatch struct {
	stop chan struct{}
	done chan struct{}
	// Set by the goroutine, read after done.
	seen      []pglogrepl.LSN // every change of confirmed_flush_lsn, in order
	reported  []report        // every change of the reported flush position
	pastWAL   []string        // confirmed_flush_lsn seen past the server's WAL end
	polls     int
	lastError error
}

// report is a flush position a client reported to the slot's walsender.
type report struct {
	pid   int32
	flush pglogrepl.LSN
}

func (r report) String() string { return fmt.Sprintf("walsender %d: %s", r.pid, r.flush) }

func watchSlot(t *testing.T, dsn, slot string) *slotWatch {
	t.Helper()
	conn := testenv.Connect(t, dsn)
	w := &slotWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			var c, cur, flush string
			var pid int32
			err := conn.QueryRow(context.Background(), `SELECT coalesce(s.confirmed_flush_lsn::text, '0/0'), pg_current_wal_lsn()::text,
					coalesce(s.active_pid, 0), coalesce(r.flush_lsn::text, '')
				FROM pg_replication_slots s LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid
				WHERE s.slot_name = $1`, slot).Scan(&c, &cur, &pid, &flush)
			if err != nil {
				w.lastError = err
				time.Sleep(10 * time.Millisecond)
				continue
			}
			w.polls++
			confirmed, _ := pglogrepl.ParseLSN(c)
			current, _ := pglogrepl.ParseLSN(cur)
			if n := len(w.seen); n == 0 || w.seen[n-1] != confirmed {
				w.seen = append(w.seen, confirmed)
			}
			if flush != "" {
				lsn, _ := pglogrepl.ParseLSN(flush)
				if n := len(w.reported); n == 0 || w.reported[n-1] != (report{pid, lsn}) {
					w.reported = append(w.reported, report{pid, lsn})
				}
			}
			if confirmed > current {
				w.pastWAL = append(w.pastWAL, fmt.Sprintf("confirmed_flush_lsn %s past the server's WAL end %s", confirmed, current))
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	t.Cleanup(w.end)
	return w
}

// end stops the watch; it returns once the goroutine has.
func (w *slotWatch) end() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// backwards lists the moves of confirmed_flush_lsn to a lower position.
func (w *slotWatch) backwards() []string {
	var out []string
	for i := 1; i < len(w.seen); i++ {
		if w.seen[i] < w.seen[i-1] {
			out = append(out, fmt.Sprintf("%s -> %s", w.seen[i-1], w.seen[i]))
		}
	}
	return out
}

// A standby (a second relay waiting for the slot another one holds) reads
// the slot's position at startup; when it takes over, the slot has moved
// on. It must start from where the slot is then: report that position
// from its first status update, never the stale one. Postgres releases
// before 15.13 moved the slot back to a lower flush position; later ones
// ignore it, and pg_stat_replication shows what was reported.
func TestRelayStandbyTakesOverAtSlotPosition(t *testing.T) {
	f := newFixture(t, nil)
	topic := []string{"outbox.event.order"}
	active := f.start(t)
	execTx(t, f.dsn, insertEvent("order", "a-1"))
	f.broker.ReadAll(t, topic, 1, 30*time.Second)
	f.waitCaughtUp(t, 10*time.Second)
	seeded, _ := f.slot(t)

	standbyCfg := f.cfg
	standbyCfg.Postgres.StatusInterval = time.Second // the default: a stale report would stand for a second
	standbyLogs := &logBuffer{}
	standby := startRelay(t, standbyCfg, standbyLogs)
	standbyLogs.waitLog(t, "found replication slot", nil, 30*time.Second)
	// The line comes just before the tracker is seeded (prepare returns
	// the position; Run sets it): wait for the seed, bounded. A standby
	// holds no slot, so nothing but the seed moves its tracker.
	for deadline := time.Now().Add(10 * time.Second); standby.relay.Tracker().Confirmed() != seeded && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := standby.relay.Tracker().Confirmed(); got != seeded {
		t.Fatalf("standby read %s at startup, the slot is at %s", got, seeded)
	}

	// The active relay moves the slot on while the standby waits.
	for i := 2; i <= 6; i++ {
		execTx(t, f.dsn, insertEvent("order", fmt.Sprintf("a-%d", i)))
	}
	f.broker.ReadAll(t, topic, 6, 30*time.Second)
	f.waitCaughtUp(t, 10*time.Second)

	watch := watchSlot(t, f.dsn, "walrelay")
	activePID := testenv.QueryValue[int32](t, f.dsn, `SELECT active_pid FROM pg_replication_slots WHERE slot_name = 'walrelay'`)
	if err := active.stop(); err != nil {
		t.Fatal(err)
	}
	left := active.relay.Tracker().Confirmed() // its final status update
	if left <= seeded {
		t.Fatalf("the active relay left the slot at %s, not past %s; the test proves nothing", left, seeded)
	}

	line := standbyLogs.waitLog(t, "streaming from slot", nil, 30*time.Second)
	if got := line["confirmed"]; got != left.String() {
		t.Errorf("the standby started streaming reporting %v; the slot was at %s when it took over (%s at the standby's startup)", got, left, seeded)
	}
	execTx(t, f.dsn, insertEvent("order", "b-1"))
	f.broker.ReadAll(t, topic, 7, 30*time.Second)
	f.waitCaughtUp(t, 10*time.Second)
	time.Sleep(2 * standbyCfg.Postgres.StatusInterval) // status updates of the standby, watched
	watch.end()
	if back := watch.backwards(); len(back) > 0 {
		t.Errorf("the slot's confirmed_flush_lsn moved back after the takeover: %v (seen %v)", back, watch.seen)
	}
	standbyReports := 0
	for _, r := range watch.reported {
		if r.pid == activePID {
			continue
		}
		standbyReports++
		if r.flush < left {
			t.Errorf("the standby reported flush position %s, behind the slot's %s (reports: %v)", r.flush, left, watch.reported)
			break
		}
	}
	if standbyReports == 0 {
		t.Errorf("the watch saw no status update from the standby (reports: %v, %d polls)", watch.reported, watch.polls)
	}
	if !slices.Contains(watch.seen, left) {
		t.Errorf("the watch never saw the position %s the active relay left (saw %v in %d polls)", left, watch.seen, watch.polls)
	}
	if err := standby.stop(); err != nil {
		t.Fatal(err)
	}
}
