package relay_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/testenv"
)

// interleavedTx is one transaction of n rows alternating between
// public.outbox and billing.outbox (row s, 1-based, in public when s is
// odd), payload {"s": s, "pad": 200 bytes}, 7 keys, aggregatetype order.
func interleavedTx(n int) string {
	return fmt.Sprintf(`DO $$ BEGIN FOR s IN 1..%d LOOP
		IF s %% 2 = 1 THEN
			INSERT INTO public.outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'o-' || (s / 2 %% 7), 'T', jsonb_build_object('s', s, 'pad', repeat('p', 200)));
		ELSE
			INSERT INTO billing.outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'o-' || (s / 2 %% 7), 'T', jsonb_build_object('s', s, 'pad', repeat('p', 200)));
		END IF;
	END LOOP; END $$`, n)
}

// checkKeyOrder checks that each key's records carry increasing "s":
// the transaction's order across both tables.
func checkKeyOrder(t *testing.T, recs []*kgo.Record) {
	t.Helper()
	last := map[string]int{}
	for _, r := range recs {
		var v struct{ S int }
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("value %s: %v", r.Value, err)
		}
		if prev := last[string(r.Key)]; v.S <= prev {
			t.Fatalf("key %s: row %d after row %d: not in the transaction's order", r.Key, v.S, prev)
		}
		last[string(r.Key)] = v.S
	}
}

// A session lost in the middle of a transaction writing both tables
// resumes it after the rows already handed to the producer, counted
// across the tables: no row of either table is published twice, none is
// missing, and each key keeps the transaction's order. The transaction is
// larger than what the socket buffers hold, so that the relay cannot read
// it to its end after the walsender is gone.
func TestTwoTablesResumeTransactionAfterReconnect(t *testing.T) {
	const rows = 40000
	f := newFixtureTables(t, func(c *config.Config) { c.Relay.MaxInFlightRecords = 500 })
	run := f.start(t)
	insertRowInto(t, f.dsn, tableB, "warmup", "w", `{}`)
	f.broker.ReadAll(t, []string{"outbox.event.warmup"}, 1, 30*time.Second)

	testenv.Exec(t, f.dsn, interleavedTx(rows))
	atBreak := f.breakMidTransaction(t, "outbox.event.order", rows)
	f.logs.waitLog(t, "resuming a transaction after reconnecting", nil, 30*time.Second)
	recs := f.broker.ReadAll(t, []string{"outbox.event.order"}, rows, 60*time.Second)
	all, dup := ids(recs)
	if len(all) != rows || len(dup) != 0 {
		t.Errorf("%d records with %d duplicates, want %d once each (break after %v published)", len(all), len(dup), rows, atBreak)
	}
	checkKeyOrder(t, recs)
	f.waitCaughtUp(t, 30*time.Second)
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}

// Exactly-once delivery with a transaction writing both tables, larger
// than the in-flight cap: its Kafka transactions checkpoint how many of
// its rows they hold, counted across the tables. Stopped in the middle, the
// relay confirms nothing of it; the next one continues after the
// checkpointed rows: every row of both tables reaches a read_committed
// consumer once, each key in the transaction's order.
func TestTwoTablesExactlyOnceResumesInsideATransaction(t *testing.T) {
	const rows = 3000
	f := newFixtureTables(t, func(c *config.Config) {
		exactlyOnce(c)
		c.Relay.MaxInFlightRecords = 100
		c.Relay.ShutdownTimeout = 0
	})
	recs, _, run := f.resumeInsideTransaction(t, interleavedTx(rows), rows)
	checkKeyOrder(t, recs)
	if err := run.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}
