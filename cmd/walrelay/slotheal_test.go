package main

import (
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
)

// walrelay slot heal (issue 33 item 5, the command form of
// outbox.on_slot_loss: heal): on a dropped slot walrelay had a record of,
// it creates the slot again and first republishes the outbox rows the
// record does not prove delivered (here every row: the record has no
// fence, no relay ran), then refuses a second heal (nothing to heal).
// slot create --accept-gap reports the gap it accepts.
func TestSlotHealAndAcceptGap(t *testing.T) {
	e := newE2E(t)
	e.setup(t, "created")
	for _, topic := range e.topics() {
		e.broker.CreateTopic(t, topic, 4)
	}
	conn := testenv.Connect(t, e.dsn)
	ids, _, err := writeTx(t.Context(), conn, 30)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, e.dsn, `SELECT pg_drop_replication_slot('walrelay')`)

	stdout, stderr, code := walrelay(t, e.env, "slot", "heal")
	if code != 0 || !strings.Contains(stdout, "healed slot walrelay (missing): created it at") || !strings.Contains(stdout, "republished 30 outbox rows") {
		t.Fatalf("walrelay slot heal: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	got := map[string]bool{}
	for _, r := range e.readAll(t) {
		for _, h := range r.Headers {
			if h.Key == "id" {
				got[string(h.Value)] = true
			}
		}
	}
	for _, id := range ids {
		if !got[id] {
			t.Errorf("row %s is not on Kafka after the heal", id)
		}
	}
	if !slotExists(t, e.dsn, "walrelay") {
		t.Fatal("the heal did not create the slot")
	}
	if note := testenv.QueryValue[string](t, e.dsn, `SELECT note || ' ' || (jumped_at IS NULL)::text FROM walrelay_slot_positions WHERE slot_name = 'walrelay'`); !strings.HasPrefix(note, "healed ") || !strings.HasSuffix(note, " true") {
		t.Errorf("record after the heal: %q, want a heal note and no jump", note)
	}
	stdout, stderr, code = walrelay(t, e.env, "slot", "heal")
	if code != 1 || !strings.Contains(stderr, "walrelay: nothing to heal") {
		t.Errorf("a second walrelay slot heal: exit %d, want 1 and nothing to heal\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	// The other way on: accept the gap, reported.
	if _, _, err := writeTx(t.Context(), conn, 5); err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, e.dsn, `SELECT pg_drop_replication_slot('walrelay')`)
	stdout, stderr, code = walrelay(t, e.env, "slot", "create", "walrelay", "--accept-gap")
	if code != 0 || !strings.Contains(stdout, "gap accepted: walrelay's record was at") || !strings.Contains(stdout, "the outbox holds 35 rows") {
		t.Fatalf("walrelay slot create --accept-gap: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// walrelay slot heal with relay.delivery=exactly_once: the republished
// rows are in Kafka transactions (a read_committed consumer sees each
// once), and a second heal of the slot dropped again finds every row of
// the gap on Kafka (read_committed, after its fence) and republishes none.
func TestSlotHealExactlyOnce(t *testing.T) {
	e := newE2E(t)
	e.setup(t, "created")
	for _, topic := range e.topics() {
		e.broker.CreateTopic(t, topic, 4)
	}
	env := append(append([]string(nil), e.env...), "WALRELAY_RELAY_DELIVERY=exactly_once")
	conn := testenv.Connect(t, e.dsn)
	ids, _, err := writeTx(t.Context(), conn, 30)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"republished 30 outbox rows", "republished 0 outbox rows"} {
		testenv.Exec(t, e.dsn, `SELECT pg_drop_replication_slot('walrelay')`)
		stdout, stderr, code := walrelay(t, env, "slot", "heal")
		if code != 0 || !strings.Contains(stdout, "healed slot walrelay (missing): created it at") || !strings.Contains(stdout, want) {
			t.Fatalf("walrelay slot heal #%d: exit %d, want %q\nstdout:\n%s\nstderr:\n%s", i+1, code, want, stdout, stderr)
		}
	}
	b := e.broker.As(kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	recs := b.ReadAll(t, e.topics(), len(ids), 30*time.Second)
	recs = append(recs, b.ReadAll(t, e.topics(), 0, time.Second)[len(recs):]...)
	got := map[string]int{}
	for _, r := range recs {
		got[testenv.Header(r, "id")]++
	}
	for _, id := range ids {
		if got[id] != 1 {
			t.Errorf("row %s read %d times by a read_committed consumer, want once", id, got[id])
		}
	}
	t.Logf("read_committed: %d records for %d rows", len(recs), len(ids))
}

// walrelay slot heal with exactly-once delivery, killed (SIGKILL) after
// Kafka committed the gap and before the heal was recorded and the slot
// made permanent (the record's row is held locked, so the heal waits
// there): the slot is still missing, and the next heal fences, finds
// every row of the gap on Kafka and republishes none. A read_committed
// consumer sees each row once.
func TestSlotHealExactlyOnceKilledAfterCommit(t *testing.T) {
	e := newE2E(t)
	e.setup(t, "created")
	for _, topic := range e.topics() {
		e.broker.CreateTopic(t, topic, 4)
	}
	env := append(append([]string(nil), e.env...), "WALRELAY_RELAY_DELIVERY=exactly_once")
	conn := testenv.Connect(t, e.dsn)
	ids, _, err := writeTx(t.Context(), conn, 30)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, e.dsn, `SELECT pg_drop_replication_slot('walrelay')`)
	if e.broker.Cluster == nil {
		t.Skip("needs the in-process kfake broker (fault injection)")
	}
	// The heal's first commit waits until the record's row is locked (the
	// heal read the record before: it is past that).
	committing, locked := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e.broker.Cluster.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.broker.Cluster.KeepControl()
		if req.(*kmsg.EndTxnRequest).Commit {
			once.Do(func() {
				close(committing)
				<-locked
			})
		}
		return nil, nil, false
	})
	c := startChild(t, env, "slot", "heal")
	select {
	case <-committing:
	case <-time.After(30 * time.Second):
		t.Fatalf("the heal committed nothing in 30s\nstderr:\n%s", c.stderr.String())
	}
	hold, err := testenv.Connect(t, e.dsn).Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hold.Exec(t.Context(), `SELECT FROM walrelay_slot_positions WHERE slot_name = 'walrelay' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	close(locked)
	b := e.broker.As(kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if got := len(b.ReadAll(t, e.topics(), len(ids), 30*time.Second)); got != len(ids) {
		t.Fatalf("read_committed: %d records of the heal, want %d", got, len(ids))
	}
	for deadline := time.Now().Add(30 * time.Second); !testenv.QueryValue[bool](t, e.dsn, `SELECT EXISTS (SELECT FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%walrelay_slot_positions%')`); {
		if time.Now().After(deadline) || c.exited() {
			t.Fatalf("the heal did not reach the record's row (exited: %v)\nstderr:\n%s", c.exited(), c.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.signal(t, syscall.SIGKILL)
	c.wait(t, 10*time.Second)
	if err := hold.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if slotExists(t, e.dsn, "walrelay") {
		t.Fatal("the killed heal left a slot")
	}
	stdout, stderr, code := walrelay(t, env, "slot", "heal")
	if code != 0 || !strings.Contains(stdout, "republished 0 outbox rows") || !strings.Contains(stdout, "30 more were on Kafka already") {
		t.Fatalf("walrelay slot heal after the killed one: exit %d, want 0 rows republished and 30 on Kafka\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	recs := b.ReadAll(t, e.topics(), len(ids), 30*time.Second)
	recs = append(recs, b.ReadAll(t, e.topics(), 0, time.Second)[len(recs):]...)
	got := map[string]int{}
	for _, r := range recs {
		got[testenv.Header(r, "id")]++
	}
	for _, id := range ids {
		if got[id] != 1 {
			t.Errorf("row %s read %d times by a read_committed consumer, want once", id, got[id])
		}
	}
	t.Logf("killed after the kafka commit; healed again: %s; read_committed: %d records for %d rows", strings.TrimSpace(stdout), len(recs), len(ids))
}
