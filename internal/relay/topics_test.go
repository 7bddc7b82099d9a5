package relay_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/deadletter"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/testenv"
)

// leastPrivilege is a kfake broker with ACLs: the principal walrelay may
// write to (and so describe) the outbox topics and the dead-letter topic,
// which exist, and may not create topics or read their configs.
func leastPrivilege() []kfake.Opt {
	allow := func(name string, pattern kmsg.ACLResourcePatternType, op kmsg.ACLOperation) kfake.ACL {
		return kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: name, Pattern: pattern, Operation: op, Allow: true}
	}
	return []kfake.Opt{
		kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser("PLAIN", "admin", "admin"),
		kfake.User("PLAIN", "walrelay", "walrelay-secret",
			allow("outbox.event.", kmsg.ACLResourcePatternTypePrefixed, kmsg.ACLOperationWrite),
			allow("outbox.event.", kmsg.ACLResourcePatternTypePrefixed, kmsg.ACLOperationDescribe),
			allow("walrelay.deadletter", kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationWrite),
			allow("walrelay.deadletter", kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationDescribe),
		),
		kfake.SeedTopics(4, "outbox.event.order", "walrelay.deadletter"),
	}
}

// A principal without CREATE producing to existing topics is the normal
// production setup: with kafka.create_topics on (the default), its refused
// creation of a topic that exists is no error. A topic that does not exist
// is topic_rejected, with a message naming the missing ACL.
func TestRelayLeastPrivilegeTopics(t *testing.T) {
	for _, policy := range []string{config.PolicyDLQ, config.PolicyStop} {
		t.Run(policy, func(t *testing.T) {
			f := newFixture(t, func(c *config.Config) {
				c.Relay.OnError.SetAll(policy)
				c.Kafka.SASL = config.KafkaSASL{Mechanism: "PLAIN", Username: "walrelay", Password: "walrelay-secret"}
			}, leastPrivilege()...)
			if f.broker.Cluster == nil {
				t.Skip("needs kfake for ACLs")
			}
			f.broker = f.broker.As(kgo.SASL(plain.Auth{User: "admin", Pass: "admin"}.AsMechanism())) // the test reads as the superuser
			f.createProbe(t)
			run := f.start(t)

			execTx(t, f.dsn, insertEvent("order", "o-1"), insertEvent("order", "o-2"))
			if got := f.broker.ReadAll(t, []string{"outbox.event.order"}, 2, 30*time.Second); len(got) != 2 {
				t.Fatalf("read %d records, want 2", len(got))
			}
			f.waitCaughtUp(t, 15*time.Second)

			missingXID := execTx(t, f.dsn, insertEvent("missing", "m-1"))
			missingEnd := f.txEnd(t, missingXID)
			line := f.logs.waitLog(t, "kafka refused a record", map[string]string{"class": "topic_rejected", "policy": policy}, 30*time.Second)
			if msg, _ := line["err"].(string); !strings.Contains(msg, "grant CREATE") || !strings.Contains(msg, "outbox.event.missing") {
				t.Errorf("refusal %q does not name the topic and the CREATE ACL", msg)
			}
			if policy == config.PolicyStop {
				if err := run.wait(30 * time.Second); !errors.Is(err, relay.ErrStopped) {
					t.Fatalf("Run = %v, want ErrStopped", err)
				}
				if confirmed, _ := f.slot(t); confirmed >= missingEnd {
					t.Errorf("confirmed_flush_lsn %s passed the refused row's transaction end %s", confirmed, missingEnd)
				}
				return
			}
			dl := f.broker.ReadAll(t, []string{"walrelay.deadletter"}, 1, 30*time.Second)
			if got, _ := header(dl[0], deadletter.HeaderOriginalTopic); got != "outbox.event.missing" {
				t.Errorf("dead letter for topic %q, want outbox.event.missing", got)
			}
			execTx(t, f.dsn, insertEvent("order", "o-3"))
			f.broker.ReadAll(t, []string{"outbox.event.order"}, 3, 30*time.Second)
			f.waitCaughtUp(t, 15*time.Second)
			if err := run.stop(); err != nil {
				t.Fatalf("relay stopped with error: %v", err)
			}
		})
	}
}

// Transient admin errors on a topic's first use (NOT_CONTROLLER from
// CreateTopics for seconds) are retried and never stop the relay, and the
// wait never stalls the stream's standby status updates: with
// wal_sender_timeout at 2s, the walsender never times the session out
// while the topic waits, and other topics keep flowing.
func TestRelayTransientAdminErrorsDoNotStallTheStream(t *testing.T) {
	f := newFixture(t, func(c *config.Config) {
		c.Postgres.DSN = withServerOption(t, c.Postgres.DSN, "-c wal_sender_timeout=2s")
		c.Postgres.StatusInterval = 500 * time.Millisecond
	})
	if f.broker.Cluster == nil {
		t.Skip("needs kfake for its faults")
	}
	const slow = "outbox.event.slow"
	h := f.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.CreateTopics}, Topic: slow, Err: kerr.NotController, Count: -1})
	run := f.start(t)

	execTx(t, f.dsn, insertEvent("slow", "s-1"))
	for i := range 5 {
		time.Sleep(time.Second)
		execTx(t, f.dsn, insertEvent("order", "o-"+string(rune('0'+i))))
	}
	if run.exited() {
		t.Fatalf("relay stopped: %v", run.err)
	}
	// The other topic's records went through while the slow one waited.
	f.broker.ReadAll(t, []string{"outbox.event.order"}, 5, 10*time.Second)
	if h.Hits() < 2 {
		t.Fatalf("CreateTopics faulted %d times: the scenario did not hold the topic", h.Hits())
	}
	h.Remove()
	f.broker.ReadAll(t, []string{slow}, 1, 60*time.Second)
	f.waitCaughtUp(t, 15*time.Second)
	if n := testenv.MetricValue(t, f.reg, "walrelay_reconnects_total", nil); n != 0 {
		t.Errorf("%v reconnects: the stream stalled while the topic was prepared", n)
	}
	if run.exited() {
		t.Fatalf("relay stopped: %v", run.err)
	}
	if err := run.stop(); err != nil {
		t.Fatalf("relay stopped with error: %v", err)
	}
}

// Routed topics are bounded: past relay.max_topics, or outside
// relay.topic_pattern, a row is topic_invalid (dead-lettered here), and the
// events_published_total series are bounded with them.
func TestRelayBoundsRoutedTopics(t *testing.T) {
	f := newFixture(t, func(c *config.Config) {
		c.Relay.MaxTopics = 2
		c.Relay.TopicPattern = `outbox\.event\.[a-z]+`
	})
	run := f.start(t)
	execTx(t, f.dsn, insertEvent("order", "a"), insertEvent("customer", "b"), insertEvent("invoice", "c"), insertEvent("Order", "d"), insertEvent("order", "e"))
	f.broker.ReadAll(t, []string{"outbox.event.order"}, 2, 30*time.Second)
	f.broker.ReadAll(t, []string{"outbox.event.customer"}, 1, 30*time.Second)
	dl := f.broker.ReadAll(t, []string{f.cfg.Relay.DeadLetterTopic}, 2, 30*time.Second)
	want := map[string]string{"outbox.event.invoice": "relay.max_topics", "outbox.event.Order": "relay.topic_pattern"}
	for _, r := range dl {
		topic, _ := header(r, deadletter.HeaderOriginalTopic)
		class, _ := header(r, deadletter.HeaderErrorClass)
		msg, _ := header(r, deadletter.HeaderErrorMessage)
		if class != "topic_invalid" || !strings.Contains(msg, want[topic]) {
			t.Errorf("dead letter for %q: class %q, message %q; want topic_invalid naming %s", topic, class, msg, want[topic])
		}
		delete(want, topic)
	}
	if len(want) != 0 {
		t.Errorf("no dead letter for %v", want)
	}
	f.waitCaughtUp(t, 15*time.Second)
	for _, topic := range []string{"outbox.event.invoice", "outbox.event.Order"} {
		if _, ok := testenv.FindMetric(t, f.reg, "walrelay_events_published_total", map[string]string{"topic": topic}); ok {
			t.Errorf("a series for refused topic %s", topic)
		}
	}
	if err := run.stop(); err != nil {
		t.Fatalf("relay stopped with error: %v", err)
	}
}

// withServerOption adds a server option (libpq's options) to dsn, in URL
// or keyword/value form.
func withServerOption(t *testing.T, dsn, option string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("parsing test DSN: %v", err)
		}
		q := u.Query()
		q.Set("options", strings.TrimSpace(q.Get("options")+" "+option))
		u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // pgconn reads + as itself
		return u.String()
	}
	return dsn + " options='" + option + "'"
}
