package relay_test

import (
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/deadletter"
	"github.com/walrelay/walrelay/internal/testenv"
)

// A row of billing.outbox the router refuses (NULL route value), in a
// transaction that also writes public.outbox, with relay.on_error=dlq:
// its dead letter names its table (walrelay.source.table), A's rows of the
// same transaction are delivered, and the transaction is confirmed only
// once the dead letter is acknowledged (the dead-letter topic held by the
// broker keeps the slot before the transaction's end).
func TestTwoTablesDeadLetterNamesTable(t *testing.T) {
	f := newFixtureTables(t, func(c *config.Config) { c.Relay.OnError.SetAll(config.PolicyDLQ) })
	testenv.Exec(t, f.dsn, `ALTER TABLE billing.outbox ALTER COLUMN aggregatetype DROP NOT NULL`)
	f.createProbe(t)
	run := f.start(t)
	insertRowInto(t, f.dsn, tableA, "order", "warmup", `{}`) // the topic exists, the stream runs
	f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)

	held := holdTopic(t, f, f.cfg.Relay.DeadLetterTopic)
	x := execTx(t, f.dsn,
		`INSERT INTO public.outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'k1', 'T', '{"n": 1}')`,
		`INSERT INTO billing.outbox (id, aggregatetype, aggregateid, type, payload) VALUES ('00000000-0000-4000-8000-0000000000b1', NULL, 'k1', 'T', '{"n": 2}')`,
		`INSERT INTO public.outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'k1', 'T', '{"n": 3}')`)
	end := f.txEnd(t, x)
	recs := f.broker.ReadAll(t, []string{"outbox.event.order"}, 3, 30*time.Second)
	if got := string(recs[1].Value) + " " + string(recs[2].Value); got != `{"n": 1} {"n": 3}` {
		t.Errorf("public.outbox's rows of the transaction: %s, want {\"n\": 1} {\"n\": 3}", got)
	}
	waitHits(t, held, 2)
	checkHeldBelow(t, f, end)
	held.Remove()
	testenv.WaitConfirmed(t, f.dsn, "walrelay", end, 30*time.Second)
	dl := f.broker.ReadAll(t, []string{f.cfg.Relay.DeadLetterTopic}, 1, 30*time.Second)
	for h, want := range map[string]string{
		deadletter.HeaderSourceTable: tableB,
		deadletter.HeaderOutboxID:    "00000000-0000-4000-8000-0000000000b1",
	} {
		if got, _ := header(dl[0], h); got != want {
			t.Errorf("dead letter header %s = %q, want %q", h, got, want)
		}
	}
	if err := run.stop(); err != nil {
		t.Fatalf("relay: %v", err)
	}
}
