package relay_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/deadletter"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/testenv"
)

// insertReturningID inserts one outbox row in its own transaction and
// returns its id and xid.
func insertReturningID(t *testing.T, dsn, aggregatetype string) (id string, xid uint32) {
	t.Helper()
	var typ any = aggregatetype
	if aggregatetype == "<NULL>" {
		typ = nil
	}
	return insertRow(t, dsn, typ, "a-1", `{"bad": true}`)
}

// Every row the router rejects gets the configured behaviour and a log
// line naming its LSN and outbox id; none is dropped silently.
func TestRelayRejectedRows(t *testing.T) {
	rows := []struct {
		name, aggregatetype, class string
	}{
		{"null aggregatetype", "<NULL>", "routing_value_missing"},
		{"empty aggregatetype", "", "routing_value_missing"},
		{"aggregatetype makes an illegal topic", "bad topic!", "topic_invalid"},
	}
	for _, row := range rows {
		for _, policy := range []string{config.PolicyDLQ, config.PolicyLog, config.PolicyStop} {
			t.Run(row.name+"/"+policy, func(t *testing.T) {
				f := newFixture(t, func(c *config.Config) { c.Relay.OnError.SetAll(policy) })
				testenv.Exec(t, f.dsn, `ALTER TABLE outbox ALTER COLUMN aggregatetype DROP NOT NULL`)
				f.createProbe(t)
				run := f.start(t)

				badID, badXID := insertReturningID(t, f.dsn, row.aggregatetype)
				goodID, _ := insertReturningID(t, f.dsn, "order")
				badEnd := f.txEnd(t, badXID)

				line := f.logs.waitLog(t, "cannot route outbox row", map[string]string{"outbox_id": badID, "class": row.class, "policy": policy}, 30*time.Second)
				if line["lsn"] == "" || line["lsn"] == nil {
					t.Errorf("log line has no lsn: %v", line)
				}

				switch policy {
				case config.PolicyStop:
					err := run.wait(30 * time.Second)
					if !errors.Is(err, relay.ErrStopped) || !strings.Contains(err.Error(), badID) {
						t.Fatalf("Run returned %v, want ErrStopped naming %s", err, badID)
					}
					if got := f.broker.ReadAll(t, []string{"outbox.event.order"}, 0, time.Second); len(got) != 0 {
						t.Errorf("%d records published after the row that stops the relay", len(got))
					}
					if confirmed, _ := f.slot(t); confirmed >= badEnd {
						t.Errorf("confirmed_flush_lsn %s passed the unpublished row's transaction end %s", confirmed, badEnd)
					}
				case config.PolicyDLQ:
					dlq := f.broker.ReadAll(t, []string{f.cfg.Relay.DeadLetterTopic}, 1, 30*time.Second)
					if got, _ := header(dlq[0], deadletter.HeaderOutboxID); got != badID {
						t.Errorf("dead-letter record for %q, want %s", got, badID)
					}
					if got, _ := header(dlq[0], deadletter.HeaderErrorClass); got != row.class {
						t.Errorf("dead-letter class %q, want %s", got, row.class)
					}
					if got, _ := header(dlq[0], deadletter.HeaderLSN); got == "" {
						t.Error("dead-letter record has no LSN header")
					}
					if !strings.Contains(string(dlq[0].Value), `"payload":{"bad": true}`) {
						t.Errorf("dead-letter value %s lacks the original payload", dlq[0].Value)
					}
					fallthrough
				case config.PolicyLog:
					good := f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)
					if got, _ := header(good[0], "id"); got != goodID {
						t.Errorf("record after the bad row is %s, want %s", got, goodID)
					}
					f.waitCaughtUp(t, 10*time.Second)
					if err := run.stop(); err != nil {
						t.Fatalf("relay stopped with error: %v", err)
					}
				}
			})
		}
	}
}

// UPDATEs of outbox rows follow table.op.invalid.behavior, with a log line
// naming the LSN and outbox id.
func TestRelayUpdateOnOutbox(t *testing.T) {
	for _, tc := range []struct {
		behavior, level string
		stops           bool
	}{
		{"warn", "WARN", false},
		{"error", "ERROR", false},
		{"fatal", "ERROR", true},
	} {
		t.Run(tc.behavior, func(t *testing.T) {
			f := newFixture(t, func(c *config.Config) { c.Router.InvalidOpBehavior = tc.behavior })
			testenv.Exec(t, f.dsn, `ALTER PUBLICATION walrelay_outbox SET (publish = 'insert, update, delete')`)
			run := f.start(t)
			id, _ := insertReturningID(t, f.dsn, "order")
			f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)
			testenv.Exec(t, f.dsn, `UPDATE outbox SET type = 'Changed' WHERE id = $1`, id)
			testenv.Exec(t, f.dsn, `DELETE FROM outbox WHERE id = $1`, id)
			next, _ := insertReturningID(t, f.dsn, "order")

			line := f.logs.waitLog(t, "UPDATE on the outbox table", map[string]string{"outbox_id": id, "level": tc.level}, 30*time.Second)
			if line["lsn"] == nil {
				t.Errorf("log line has no lsn: %v", line)
			}
			if tc.stops {
				if err := run.wait(30 * time.Second); !errors.Is(err, relay.ErrStopped) {
					t.Fatalf("Run returned %v, want ErrStopped", err)
				}
				return
			}
			recs := f.broker.ReadAll(t, []string{"outbox.event.order"}, 2, 30*time.Second)
			if got, _ := header(recs[1], "id"); got != next {
				t.Errorf("second record %s, want the row inserted after the update (%s)", got, next)
			}
			if len(f.logs.lines("DELETE on the outbox table ignored")) != 1 {
				t.Error("DELETE was not logged at debug level")
			}
			if err := run.stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A router option naming a column the table lacks fails at startup, with
// the column's name, before anything is streamed.
func TestRelayFailsAtStartupOnMissingColumn(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Router.FieldEventKey = "aggregate_id" })
	run := f.start(t)
	err := run.wait(30 * time.Second)
	if err == nil || !run.exited() {
		t.Fatalf("Run = %v, want a startup error", err)
	}
	for _, want := range []string{`"aggregate_id"`, "table.field.event.key", "public.outbox"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}
