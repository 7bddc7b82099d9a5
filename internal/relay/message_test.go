package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/deadletter"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/testenv"
)

// messagePrefix is outbox.message_prefix in these tests.
const messagePrefix = "outbox"

func withMessages(c *config.Config) { c.Outbox.MessagePrefix = messagePrefix }

// emitEvent is the statement that emits a table-less outbox event: id,
// aggregate type and id, and a payload {"seq": seq}.
func emitEvent(id, typ, aggregate string, seq int) string {
	return fmt.Sprintf(`SELECT pg_logical_emit_message(true, '%s', '{"id":"%s","aggregatetype":"%s","aggregateid":"%s","type":"Happened","payload":{"seq":%d}}')`,
		messagePrefix, id, typ, aggregate, seq)
}

// insertSeq is the statement that inserts an outbox row with payload
// {"seq": seq}.
func insertSeq(typ, aggregate string, seq int) string {
	return fmt.Sprintf(`INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('%s', '%s', 'Happened', '{"seq": %d}')`, typ, aggregate, seq)
}

// seqOf is the "seq" of a record's payload.
func seqOf(t *testing.T, r *kgo.Record) int {
	t.Helper()
	var p struct{ Seq *int }
	if err := json.Unmarshal(r.Value, &p); err != nil || p.Seq == nil {
		t.Fatalf("record value %q has no seq: %v", r.Value, err)
	}
	return *p.Seq
}

// messageTxEnd is the end LSN of transaction xid as pgoutput with messages
// reports it (a transaction holding only messages has no Begin without
// them), read from the probe slot.
func (f *fixture) messageTxEnd(t *testing.T, xid uint32) pglogrepl.LSN {
	t.Helper()
	lsn := testenv.QueryValue[string](t, f.dsn, `
		SELECT lsn::text FROM pg_logical_slot_peek_binary_changes('probe', NULL, NULL,
			'proto_version', '1', 'publication_names', 'walrelay_outbox', 'messages', 'true')
		WHERE xid::text = $1 AND get_byte(data, 0) = 67 -- 'C'ommit`, fmt.Sprint(xid))
	return mustLSN(t, lsn)
}

// Logical-message events and outbox rows of one aggregate, alternating
// within and across transactions, reach the aggregate's partition in
// commit order, and the slot is confirmed past them.
func TestMessagesKeepCommitOrderWithRows(t *testing.T) {
	f := newFixture(t, withMessages)
	run := f.start(t)
	seq := 0
	next := func() int { seq++; return seq }
	var stmts [][]string
	for i := range 30 {
		var tx []string
		for j := range 1 + i%4 {
			if (i+j)%2 == 0 {
				tx = append(tx, emitEvent(fmt.Sprintf("m-%d-%d", i, j), "order", "A-1", next()))
			} else {
				tx = append(tx, insertSeq("order", "A-1", next()))
			}
		}
		stmts = append(stmts, tx)
	}
	for _, tx := range stmts {
		execTx(t, f.dsn, tx...)
	}
	recs := f.broker.ReadAll(t, []string{"outbox.event.order"}, seq, 30*time.Second)
	if len(recs) != seq {
		t.Fatalf("%d records, want %d", len(recs), seq)
	}
	messages := 0
	for i, r := range recs {
		if r.Partition != recs[0].Partition || string(r.Key) != "A-1" {
			t.Fatalf("record %d: key %q on partition %d, want A-1 on %d", i, r.Key, r.Partition, recs[0].Partition)
		}
		if got := seqOf(t, r); got != i+1 {
			t.Fatalf("record %d has seq %d, want %d: not in commit order", i, got, i+1)
		}
		if id := testenv.Header(r, "id"); strings.HasPrefix(id, "m-") {
			messages++
			if want := fmt.Sprintf(`{"seq":%d}`, i+1); string(r.Value) != want {
				t.Errorf("message event value %s, want the payload as written %s", r.Value, want)
			}
		}
	}
	if messages == 0 || messages == seq {
		t.Fatalf("%d of %d records are messages: the test needs both styles", messages, seq)
	}
	f.waitCaughtUp(t, 10*time.Second)
	// Every message counts as a published event of its topic.
	if v, _ := testenv.FindMetric(t, f.reg, "walrelay_events_published_total", map[string]string{"topic": "outbox.event.order"}); v != float64(seq) {
		t.Errorf("walrelay_events_published_total = %v, want %d", v, seq)
	}
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}

// A rolled-back transaction's message, and a rolled-back savepoint's,
// never appear; non-transactional messages with the prefix and messages
// with other prefixes are ignored; heartbeats still move the slot.
func TestMessagesRolledBackOrForeignNeverAppear(t *testing.T) {
	f := newFixture(t, func(c *config.Config) {
		withMessages(c)
		c.Relay.HeartbeatInterval = 200 * time.Millisecond
	})
	run := f.start(t)
	ctx := t.Context()
	conn := testenv.Connect(t, f.dsn)
	defer conn.Close(context.WithoutCancel(ctx))

	// A whole transaction rolled back.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, emitEvent("gone-tx", "order", "A", 0)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// A savepoint rolled back inside a committed transaction.
	execTx(t, f.dsn,
		emitEvent("kept-1", "order", "A", 1),
		`SAVEPOINT s`,
		emitEvent("gone-savepoint", "order", "A", 0),
		`ROLLBACK TO SAVEPOINT s`,
		emitEvent("kept-2", "order", "A", 2))
	// Not transactional, or another prefix.
	testenv.Exec(t, f.dsn, `SELECT pg_logical_emit_message(false, 'outbox', '{"id":"gone-nontx","aggregatetype":"order","aggregateid":"A","payload":{}}')`)
	execTx(t, f.dsn, `SELECT pg_logical_emit_message(true, 'outbox2', '{"id":"gone-prefix","aggregatetype":"order","aggregateid":"A","payload":{}}')`,
		`SELECT pg_logical_emit_message(true, 'outbo', '{"id":"gone-prefix2","aggregatetype":"order","aggregateid":"A","payload":{}}')`)
	execTx(t, f.dsn, emitEvent("kept-3", "order", "A", 3))

	recs := f.broker.ReadAll(t, []string{"outbox.event.order"}, 3, 30*time.Second)
	got, _ := ids(append(recs, f.broker.ReadAll(t, []string{"outbox.event.order"}, 0, 500*time.Millisecond)[len(recs):]...))
	if want := []string{"kept-1", "kept-2", "kept-3"}; !slices.Equal(got, want) {
		t.Fatalf("published %v, want %v", got, want)
	}
	f.logs.waitLog(t, "non-transactional logical message with the outbox prefix ignored", nil, 10*time.Second)

	// Heartbeats keep the slot moving past WAL of other tables.
	f.waitCaughtUp(t, 10*time.Second)
	testenv.Exec(t, f.dsn, `CREATE TABLE unrelated (id int)`)
	testenv.Exec(t, f.dsn, `INSERT INTO unrelated SELECT generate_series(1, 1000)`)
	_, written := f.slot(t)
	f.waitCaughtUp(t, 15*time.Second)
	if confirmed, _ := f.slot(t); confirmed < written {
		t.Fatalf("confirmed_flush_lsn %s did not pass %s", confirmed, written)
	}
	if n := len(f.logs.lines("heartbeat")); n == 0 && f.metrics == nil {
		t.Log("no heartbeat log lines")
	}
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}

// Content that is not a JSON object with an id is a payload_invalid row
// error under relay.on_error: a dead letter holding the content (dlq), a
// log line (log), or a stop with the transaction unconfirmed (stop).
func TestMessageBadContentFollowsOnError(t *testing.T) {
	const bad = `{"aggregatetype":"order","payload":{"no":"id"}}`
	for _, policy := range []string{config.PolicyDLQ, config.PolicyLog, config.PolicyStop} {
		t.Run(policy, func(t *testing.T) {
			f := newFixture(t, func(c *config.Config) {
				withMessages(c)
				c.Relay.OnError.SetAll(policy)
			})
			f.createProbe(t)
			run := f.start(t)
			badXID := execTx(t, f.dsn, fmt.Sprintf(`SELECT pg_logical_emit_message(true, 'outbox', '%s')`, bad))
			execTx(t, f.dsn, emitEvent("good", "order", "A", 1))
			badEnd := f.messageTxEnd(t, badXID)

			line := f.logs.waitLog(t, "cannot route outbox message", map[string]string{"class": "payload_invalid", "policy": policy, "table": "message:outbox"}, 30*time.Second)
			if line["lsn"] == nil {
				t.Errorf("log line has no lsn: %v", line)
			}
			switch policy {
			case config.PolicyStop:
				if err := run.wait(30 * time.Second); !errors.Is(err, relay.ErrStopped) {
					t.Fatalf("Run returned %v, want ErrStopped", err)
				}
				if got := f.broker.ReadAll(t, []string{"outbox.event.order"}, 0, time.Second); len(got) != 0 {
					t.Errorf("%d records published after the message that stops the relay", len(got))
				}
				if confirmed, _ := f.slot(t); confirmed >= badEnd {
					t.Errorf("confirmed_flush_lsn %s passed the unpublished message's transaction end %s", confirmed, badEnd)
				}
				return
			case config.PolicyDLQ:
				dl := f.broker.ReadAll(t, []string{f.cfg.Relay.DeadLetterTopic}, 1, 30*time.Second)[0]
				if string(dl.Value) != bad {
					t.Errorf("dead-letter value %s, want the message content %s", dl.Value, bad)
				}
				for k, want := range map[string]string{
					deadletter.HeaderErrorClass:  "payload_invalid",
					deadletter.HeaderSourceTable: "message:outbox",
				} {
					if got, _ := header(dl, k); got != want {
						t.Errorf("dead-letter header %s = %q, want %q", k, got, want)
					}
				}
				if got, _ := header(dl, deadletter.HeaderLSN); got == "" {
					t.Error("dead letter has no LSN")
				}
			}
			good := f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)
			if got := testenv.Header(good[0], "id"); got != "good" {
				t.Errorf("record after the bad message is %s, want good", got)
			}
			f.waitCaughtUp(t, 10*time.Second)
			if err := run.stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Terminating the walsender while transactions mixing rows and messages
// stream (some large enough to be cut in the middle) loses nothing and,
// in one process, publishes nothing twice; with exactly-once delivery a
// read_committed consumer sees every event once.
func TestMessagesSurviveWalsenderTerminated(t *testing.T) {
	for _, mode := range []string{config.AtLeastOnce, config.ExactlyOnce} {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, func(c *config.Config) {
				withMessages(c)
				c.Relay.Delivery = mode
				c.Relay.MaxInFlightRecords = 20
			})
			slow := f.slowProduce(10 * time.Millisecond)
			run := f.start(t)
			// The writer goes on until two terminations landed inside a
			// transaction (the resume path), then writes a few more.
			const perTx = 100 // half rows, half messages
			var stop atomic.Bool
			var txs atomic.Int64
			writerDone := make(chan struct{})
			go func() {
				defer close(writerDone)
				for i := 0; !stop.Load() || i < int(txs.Load())+3; i++ {
					testenv.Exec(t, f.dsn, fmt.Sprintf(`DO $$ BEGIN
						FOR j IN 1..%d LOOP
							IF j %% 2 = 0 THEN
								INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'o-' || (j %% 5), 'T', '{}');
							ELSE
								PERFORM pg_logical_emit_message(true, 'outbox', json_build_object('id', 'm-%d-' || j, 'aggregatetype', 'order', 'aggregateid', 'o-' || (j %% 5), 'payload', json_build_object('j', j))::text);
							END IF;
						END LOOP; END $$`, perTx, i))
					if !stop.Load() {
						txs.Store(int64(i + 1))
					}
				}
			}()
			terminated, deadline := 0, time.Now().Add(40*time.Second)
			for len(f.logs.lines("replication session lost inside a transaction")) < 2 {
				if time.Now().After(deadline) {
					t.Fatalf("no two terminations inside a transaction in 40s (%d terminations)", terminated)
				}
				time.Sleep(150 * time.Millisecond)
				terminated += int(testenv.QueryValue[int64](t, f.dsn, `SELECT count(pg_terminate_backend(active_pid)) FROM pg_replication_slots WHERE slot_name = 'walrelay' AND active_pid IS NOT NULL`))
			}
			stop.Store(true)
			<-writerDone
			slow.Store(false)
			want := int(testenv.QueryValue[int64](t, f.dsn, `SELECT count(*) FROM outbox`)) * 2
			f.waitCaughtUp(t, 60*time.Second) // everything acknowledged (and committed)
			all, dup := ids(f.readSettled(t, mode == config.ExactlyOnce, want))
			distinct := len(all) - len(dup)
			messages := 0
			for _, id := range all {
				if strings.HasPrefix(id, "m-") {
					messages++
				}
			}
			if distinct != want || len(dup) > 0 || messages-countPrefix(dup, "m-") != want/2 {
				t.Fatalf("%d distinct events (%d messages) with %d duplicates (first %v), want %d (%d messages) once each",
					distinct, messages, len(dup), dup[:min(len(dup), 5)], want, want/2)
			}
			t.Logf("%d events, %d terminations, %d resumed inside a transaction", want, terminated, len(f.logs.lines("resuming a transaction after reconnecting")))
			if err := run.stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// readSettled reads outbox.event.order (read_committed when committed)
// until want records arrived, then once more for a while: duplicates would
// come after the first want records. The longer read wins (on a loaded
// machine the second may stop short of the first). Call it once the slot
// caught up: everything is acknowledged then.
func (f *fixture) readSettled(t *testing.T, committed bool, want int) []*kgo.Record {
	t.Helper()
	b := f.broker
	if committed {
		b = b.As(kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	recs := b.ReadAll(t, []string{"outbox.event.order"}, want, 60*time.Second)
	if more := b.ReadAll(t, []string{"outbox.event.order"}, 0, 2*time.Second); len(more) > len(recs) {
		recs = more
	}
	return recs
}

func countPrefix(ids []string, prefix string) int {
	n := 0
	for _, id := range ids {
		if strings.HasPrefix(id, prefix) {
			n++
		}
	}
	return n
}

// With exactly-once delivery, a relay stopped inside a large transaction
// mixing rows and messages, and started again, resumes from the
// checkpoint's count of handled events (rows and messages alike): a
// read_committed consumer sees each event once.
func TestExactlyOnceResumesInsideAMixedTransaction(t *testing.T) {
	const events = 2000 // half rows, half messages
	f := newFixture(t, func(c *config.Config) {
		withMessages(c)
		exactlyOnce(c)
		c.Relay.MaxInFlightRecords = 100
		c.Relay.ShutdownTimeout = 0
	})
	f.createProbe(t)
	x := execTx(t, f.dsn, fmt.Sprintf(`DO $$ BEGIN
		FOR j IN 1..%d LOOP
			IF j %% 2 = 0 THEN
				INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'o-' || (j %% 7), 'T', '{}');
			ELSE
				PERFORM pg_logical_emit_message(true, 'outbox', json_build_object('id', 'm-' || j, 'aggregatetype', 'order', 'aggregateid', 'o-' || (j %% 7), 'payload', '{}'::json)::text);
			END IF;
		END LOOP; END $$`, events))
	end := f.messageTxEnd(t, x)
	slow := f.slowProduce(20 * time.Millisecond)
	run := f.start(t)
	f.waitOpenCheckpoint(t, 301)
	if err := run.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	cp, _ := f.checkpoint(t)
	t.Logf("stopped with %d of %d events checkpointed", cp.Open.Rows, events)
	slow.Store(false)
	run = f.start(t)
	testenv.WaitConfirmed(t, f.dsn, "walrelay", end, 60*time.Second)
	all, dup := ids(f.readSettled(t, true, events))
	if len(all) != events || len(dup) > 0 || countPrefix(all, "m-") != events/2 {
		t.Errorf("read_committed consumer got %d records (%d messages) with %d duplicates (first %v), want %d (%d messages) once each",
			len(all), countPrefix(all, "m-"), len(dup), dup[:min(len(dup), 5)], events, events/2)
	}
	if err := run.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}
