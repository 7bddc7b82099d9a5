package relay_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/deadletter"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/testenv"
)

// Records the broker refuses for good follow relay.on_error per class,
// with a log line naming the LSN and outbox id; none is dropped silently
// and a stopped relay never confirms the refused row.
func TestRelayBrokerRefusals(t *testing.T) {
	scenarios := []struct {
		name  string
		class string
		// setup installs the refusal and returns the payload of the bad row.
		setup func(t *testing.T, f *fixture) (payload string)
	}{
		{"record larger than kafka.batch_max_bytes", "record_too_large", func(t *testing.T, f *fixture) string {
			return `{"big": "` + strings.Repeat("x", 8000) + `"}`
		}},
		{"broker answers MESSAGE_TOO_LARGE", "record_too_large", func(t *testing.T, f *fixture) string {
			f.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "outbox.event.bad", Err: kerr.MessageTooLarge, Count: -1})
			return `{"n": 1}`
		}},
		{"broker refuses the topic (authorization)", "topic_rejected", func(t *testing.T, f *fixture) string {
			f.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "outbox.event.bad", Err: kerr.TopicAuthorizationFailed, Count: -1})
			return `{"n": 1}`
		}},
		{"topic creation refused by policy", "topic_rejected", func(t *testing.T, f *fixture) string {
			f.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.CreateTopics}, Topic: "outbox.event.bad", Err: kerr.PolicyViolation, Count: -1})
			return `{"n": 1}`
		}},
	}
	// In exactly-once mode as well: a refused record's dead letter goes
	// into the Kafka transaction of its row, and a read_committed consumer
	// sees it and the rows after it.
	for _, sc := range scenarios {
		for _, mode := range []string{config.PolicyDLQ, config.PolicyLog, config.PolicyStop, config.PolicyDLQ + "/" + config.ExactlyOnce, config.PolicyLog + "/" + config.ExactlyOnce, config.PolicyStop + "/" + config.ExactlyOnce} {
			policy, delivery, _ := strings.Cut(mode, "/")
			t.Run(sc.name+"/"+mode, func(t *testing.T) {
				f := newFixture(t, func(c *config.Config) {
					c.Relay.OnError.SetAll(policy)
					c.Kafka.BatchMaxBytes = 4096
					if delivery != "" {
						c.Relay.Delivery = delivery
					}
				})
				reader := f.broker
				if delivery != "" {
					reader = f.broker.As(kgo.FetchIsolationLevel(kgo.ReadCommitted()))
				}
				if f.broker.Cluster == nil {
					t.Skip("needs kfake for fault injection")
				}
				f.createProbe(t)
				payload := sc.setup(t, f)
				run := f.start(t)

				var badID string
				conn := testenv.Connect(t, f.dsn)
				tx, err := conn.Begin(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if err := tx.QueryRow(t.Context(), `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('bad', 'k-1', 'T', $1) RETURNING id::text`, payload).Scan(&badID); err != nil {
					t.Fatal(err)
				}
				var xid uint32
				if err := tx.QueryRow(t.Context(), `SELECT txid_current()::text::bigint`).Scan(&xid); err != nil {
					t.Fatal(err)
				}
				if err := tx.Commit(t.Context()); err != nil {
					t.Fatal(err)
				}
				goodID, _ := insertReturningID(t, f.dsn, "order")
				badEnd := f.txEnd(t, xid)

				line := f.logs.waitLog(t, "kafka refused", map[string]string{"outbox_id": badID, "class": sc.class, "policy": policy}, 30*time.Second)
				if line["lsn"] == nil {
					t.Errorf("log line has no lsn: %v", line)
				}
				switch policy {
				case config.PolicyStop:
					if err := run.wait(30 * time.Second); !errors.Is(err, relay.ErrStopped) {
						t.Fatalf("Run = %v, want ErrStopped", err)
					}
					if confirmed, _ := f.slot(t); confirmed >= badEnd {
						t.Errorf("confirmed_flush_lsn %s passed the refused row's transaction end %s", confirmed, badEnd)
					}
					return
				case config.PolicyDLQ:
					dlq := reader.ReadAll(t, []string{f.cfg.Relay.DeadLetterTopic}, 1, 30*time.Second)
					for h, want := range map[string]string{deadletter.HeaderOutboxID: badID, deadletter.HeaderErrorClass: sc.class, deadletter.HeaderOriginalTopic: "outbox.event.bad", "id": badID} {
						if got, _ := header(dlq[0], h); got != want {
							t.Errorf("dead-letter header %s = %q, want %q", h, got, want)
						}
					}
					if got, _ := header(dlq[0], deadletter.HeaderOriginalSize); got != fmt.Sprint(len(payload)) {
						t.Errorf("dead-letter header %s = %q, want the payload's %d bytes", deadletter.HeaderOriginalSize, got, len(payload))
					}
					if len(payload) > int(f.cfg.Kafka.BatchMaxBytes) {
						// Too large for the dead-letter topic too: left out.
						if dlq[0].Value != nil {
							t.Errorf("dead letter of a record too large for any topic carries %d value bytes", len(dlq[0].Value))
						}
					} else if string(dlq[0].Value) != payload {
						t.Errorf("dead-letter value %s, want the original %s", dlq[0].Value, payload)
					}
				}
				good := reader.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)
				if got, _ := header(good[0], "id"); got != goodID {
					t.Errorf("record after the refused one is %s, want %s", got, goodID)
				}
				f.waitCaughtUp(t, 15*time.Second)
				if err := run.stop(); err != nil {
					t.Fatalf("relay stopped with error: %v", err)
				}
			})
		}
	}
}
