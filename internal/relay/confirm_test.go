package relay_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/config"
)

// A transaction's position reaches the slot soon after the broker
// acknowledged its records, not at the next postgres.status_interval:
// after a kill, everything acknowledged and not yet confirmed is
// published again. With the interval at its longest (1m; Postgres asks
// for a reply every wal_sender_timeout/2, 30s here, too), each of a
// trickle of transactions must be confirmed within 10s of its ack, which
// only a prompt status update does.
func TestRelayConfirmsPromptlyAfterAcks(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Postgres.StatusInterval = time.Minute })
	topic := []string{"outbox.event.order"}
	run := f.start(t)
	execTx(t, f.dsn, insertEvent("order", "warmup"))
	f.broker.ReadAll(t, topic, 1, 30*time.Second)
	f.createProbe(t)
	for i := range 5 {
		xid := execTx(t, f.dsn, insertEvent("order", fmt.Sprintf("o-%d", i)))
		end := f.txEnd(t, xid)
		f.broker.ReadAll(t, topic, 2+i, 30*time.Second) // acknowledged
		acked := time.Now()
		for {
			confirmed, _ := f.slot(t)
			if confirmed >= end {
				break
			}
			if time.Since(acked) > 10*time.Second {
				t.Fatalf("transaction %d (end %s) acknowledged 10s ago; the slot is still at %s (status interval %s)", i, end, confirmed, f.cfg.Postgres.StatusInterval)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}
