package relay_test

import (
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
)

// One transaction writing both outbox tables, one key: the records keep
// the transaction's order across the tables (one topic, one partition:
// 1, 2, 3), as pgoutput sends the changes in WAL order whatever their
// table. A second transaction routes A's row and B's row to two topics; the
// slot is confirmed to its end only once both are acknowledged: with B's
// topic held by the broker, A's record lands and the position stays
// before the transaction's end.
func TestTwoTablesOrderAndConfirmAcrossTables(t *testing.T) {
	f := newFixtureTables(t, nil)
	f.createProbe(t)
	run := f.start(t)

	x1 := execTx(t, f.dsn,
		`INSERT INTO public.outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'k1', 'T', '{"n": 1}')`,
		`INSERT INTO billing.outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'k1', 'T', '{"n": 2}')`,
		`INSERT INTO public.outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'k1', 'T', '{"n": 3}')`)
	recs := f.broker.ReadAll(t, []string{"outbox.event.order"}, 3, 30*time.Second)
	for i, want := range []string{`{"n": 1}`, `{"n": 2}`, `{"n": 3}`} {
		if got := string(recs[i].Value); got != want || recs[i].Partition != recs[0].Partition {
			t.Errorf("record %d: %s on partition %d; want %s on partition %d", i, got, recs[i].Partition, want, recs[0].Partition)
		}
	}
	testenv.WaitConfirmed(t, f.dsn, "walrelay", f.txEnd(t, x1), 30*time.Second)

	held := holdTopic(t, f, "outbox.event.beta")
	x2 := execTx(t, f.dsn,
		`INSERT INTO public.outbox (aggregatetype, aggregateid, type, payload) VALUES ('alpha', 'k2', 'T', '{"n": 4}')`,
		`INSERT INTO billing.outbox (aggregatetype, aggregateid, type, payload) VALUES ('beta', 'k2', 'T', '{"n": 5}')`)
	end := f.txEnd(t, x2)
	f.broker.ReadAll(t, []string{"outbox.event.alpha"}, 1, 30*time.Second)
	waitHits(t, held, 2)
	checkHeldBelow(t, f, end)
	held.Remove()
	testenv.WaitConfirmed(t, f.dsn, "walrelay", end, 30*time.Second)
	if recs := f.broker.ReadAll(t, []string{"outbox.event.beta"}, 1, 30*time.Second); string(recs[0].Value) != `{"n": 5}` {
		t.Errorf("outbox.event.beta holds %s, want {\"n\": 5}", recs[0].Value)
	}
	if err := run.stop(); err != nil {
		t.Fatalf("relay: %v", err)
	}
}
