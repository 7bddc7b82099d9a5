package main

import (
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/dbzoffset"
	"github.com/walrelay/walrelay/internal/testenv"
)

// pgMessage is one pgoutput message as the slot would stream it: lsn is
// its XLogData start, the LSN Debezium records for it (PgJDBC's
// getLastReceiveLSN); the SQL peek reports the same write position.
type pgMessage struct {
	lsn pglogrepl.LSN
	xid uint32
	msg pglogrepl.Message
}

// peekSlot returns the slot's pending pgoutput messages for the outbox
// publication, without consuming them.
func peekSlot(t *testing.T, dsn, slot string) []pgMessage {
	t.Helper()
	rows, err := testenv.Connect(t, dsn).Query(t.Context(), `
		SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL,
			'proto_version', '1', 'publication_names', 'walrelay_outbox')`, slot)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []pgMessage
	for rows.Next() {
		var lsn string
		var xid int64
		var data []byte
		if err := rows.Scan(&lsn, &xid, &data); err != nil {
			t.Fatal(err)
		}
		m, err := pglogrepl.Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, pgMessage{testenv.ParseLSN(t, lsn), uint32(xid), m})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// debeziumOffsets replays Debezium's bookkeeping over the messages
// (PostgresStreamingChangeEventSource.processReplicationMessages with
// pgoutput, where every message is the last for its LSN): the offset
// value each INSERT event carries, in order, and the one a heartbeat
// carries after each COMMIT, by transaction xid. The bytes are what
// Connect stores: PostgresOffsetContext.getOffset()'s HashMap in its
// iteration order, by JsonConverter (see internal/dbzoffset's tests).
func debeziumOffsets(msgs []pgMessage) (inserts []string, afterCommit map[uint32]string) {
	afterCommit = map[uint32]string{}
	var lastCommit, prev pglogrepl.LSN
	var n int
	var xid uint32
	const ts = 1761123456789012
	for _, m := range msgs {
		switch m.msg.(type) {
		case *pglogrepl.BeginMessage:
			xid = m.xid
		case *pglogrepl.InsertMessage:
			if m.lsn == prev { // incrementLsnEventsProcessed
				n++
			} else {
				n, prev = 1, m.lsn
			}
			inserts = append(inserts, fmt.Sprintf(`{"lsn_proc":%d,"lsn_events_processed":%d,"messageType":"INSERT","lsn_commit":%d,"lsn":%d,"txId":%d,"ts_usec":%d}`,
				m.lsn, n, lastCommit, m.lsn, xid, ts))
		case *pglogrepl.CommitMessage:
			lastCommit, n = m.lsn, 0 // commitMessage, resetLsnEventsProcessed
			afterCommit[xid] = fmt.Sprintf(`{"lsn_proc":%d,"messageType":"COMMIT","lsn_commit":%d,"lsn":%d,"txId":%d,"ts_usec":%d}`,
				m.lsn, m.lsn, m.lsn, xid, ts)
		}
	}
	return inserts, afterCommit
}

// takeoverEnv is an e2e environment with a backlog of five transactions
// (1, 2, 3, 1 and 2 outbox rows) in slot walrelay, Debezium's offsets for
// it, and Connect's offsets topic.
type takeoverEnv struct {
	*e2e
	ids     [][]string // outbox ids by transaction, in commit order
	xids    []uint32
	inserts []string // Debezium's offset after each row, in order
	commits []string // Debezium's heartbeat offset after each commit
	offsets string   // the offsets topic
}

func newTakeoverEnv(t *testing.T) *takeoverEnv {
	t.Helper()
	e := &takeoverEnv{e2e: newE2E(t), offsets: "my_connect_offsets"}
	setupOutbox(t, e.dsn)
	for _, n := range []int{1, 2, 3, 1, 2} {
		types := []string{"order", "customer", "order"}[:n]
		e.ids = append(e.ids, insertEvents(t, e.dsn, types...))
	}
	msgs := peekSlot(t, e.dsn, "walrelay")
	var afterCommit map[uint32]string
	e.inserts, afterCommit = debeziumOffsets(msgs)
	for _, m := range msgs {
		if _, ok := m.msg.(*pglogrepl.BeginMessage); ok {
			e.xids = append(e.xids, m.xid)
			e.commits = append(e.commits, afterCommit[m.xid])
		}
	}
	if len(e.xids) != 5 || len(e.inserts) != 9 {
		t.Fatalf("backlog: %d transactions, %d inserts; want 5 and 9", len(e.xids), len(e.inserts))
	}
	e.broker.CreateTopic(t, e.offsets, 25)
	return e
}

// writeOffset writes one record to the offsets topic as Connect does (a
// "" value is a tombstone).
func (e *takeoverEnv) writeOffset(t *testing.T, key, value string) {
	t.Helper()
	r := &kgo.Record{Topic: e.offsets, Key: []byte(key)}
	if value != "" {
		r.Value = []byte(value)
	}
	if err := e.broker.Client(t).ProduceSync(t.Context(), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// slotCopy copies slot walrelay (same position) for one case.
func (e *takeoverEnv) slotCopy(t *testing.T, name string) {
	t.Helper()
	testenv.Exec(t, e.dsn, `SELECT pg_copy_logical_replication_slot('walrelay', $1)`, name)
}

// caseEnv is the environment of one takeover: its slot and topics.
func (e *takeoverEnv) caseEnv(slot, prefix string) []string {
	return append(append([]string{}, e.env...),
		"WALRELAY_POSTGRES_SLOT="+slot,
		"WALRELAY_ROUTER_ROUTE_TOPIC_REPLACEMENT="+prefix+".${routedByValue}")
}

// published returns how often each outbox id is on the case's topics,
// having read at least want records.
func (e *takeoverEnv) published(t *testing.T, prefix string, want int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for _, r := range e.broker.ReadAll(t, []string{prefix + ".order", prefix + ".customer"}, want, 30*time.Second) {
		got[testenv.Header(r, "id")]++
	}
	return got
}

// wantExactly fails unless got holds each of want once and nothing else.
func wantExactly(t *testing.T, got map[string]int, want []string) {
	t.Helper()
	for _, id := range want {
		if got[id] != 1 {
			t.Errorf("event %s published %d times, want once", id, got[id])
		}
	}
	if len(got) != len(want) {
		t.Errorf("published %d distinct events %v, want exactly %d", len(got), got, len(want))
	}
}

func flatten(ids [][]string) []string {
	var out []string
	for _, tx := range ids {
		out = append(out, tx...)
	}
	return out
}

// runTakeover runs `walrelay debezium takeover` until the slot has caught
// up with the server, then stops it with SIGTERM.
func (e *takeoverEnv) runTakeover(t *testing.T, env []string, slot string, args ...string) *child {
	t.Helper()
	c := startChild(t, env, append([]string{"debezium", "takeover", "--offsets-topic", e.offsets}, args...)...)
	testenv.WaitCaughtUp(t, e.dsn, slot, 60*time.Second)
	c.signal(t, syscall.SIGTERM)
	if code := c.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("takeover exited %d\n%s", code, c.stderr.String())
	}
	return c
}

// Postgres skips a transaction, when it starts decoding at a slot's
// position, exactly when the transaction's commit record starts before
// that position: a slot at a commit record's start still sends it, one
// byte later no longer. So a slot moved to lsn_commit (a commit record's
// end) skips exactly the transactions committed at or before it.
func TestPostgresSkipsCommitsStartingBeforeTheSlot(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	setupOutbox(t, dsn)
	insertEvents(t, dsn, "order")
	insertEvents(t, dsn, "order")
	var commit *pglogrepl.CommitMessage
	for _, m := range peekSlot(t, dsn, "walrelay") {
		if c, ok := m.msg.(*pglogrepl.CommitMessage); ok {
			if m.lsn != c.TransactionEndLSN {
				t.Fatalf("the Commit message's position %s is not its TransactionEndLSN %s", m.lsn, c.TransactionEndLSN)
			}
			if commit == nil {
				commit = c
			}
		}
	}
	for _, tc := range []struct {
		name string
		to   pglogrepl.LSN
		sent bool
	}{
		{"at the commit record's start", commit.CommitLSN, true},
		{"one byte after its start", commit.CommitLSN + 1, false},
		{"at its end (lsn_commit)", commit.TransactionEndLSN, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slot := testenv.UniqueName(t, "s")
			testenv.Exec(t, dsn, `SELECT pg_copy_logical_replication_slot('walrelay', $1)`, slot)
			testenv.Exec(t, dsn, `SELECT pg_replication_slot_advance($1, $2::pg_lsn)`, slot, tc.to.String())
			commits := 0
			for _, m := range peekSlot(t, dsn, slot) {
				if c, ok := m.msg.(*pglogrepl.CommitMessage); ok && c.CommitLSN == commit.CommitLSN {
					commits++
				}
			}
			if (commits == 1) != tc.sent {
				t.Errorf("slot at %s: the transaction committed at %s-%s is sent %d times; want sent=%v", tc.to, commit.CommitLSN, commit.TransactionEndLSN, commits, tc.sent)
			}
		})
	}
}

// A takeover from an offset as Debezium writes it publishes exactly the
// events after the connector's position: none before it, none lost.
func TestDebeziumTakeover(t *testing.T) {
	e := newTakeoverEnv(t)
	for i, tc := range []struct {
		name   string
		offset string
		want   []string
	}{
		// A heartbeat after the second transaction's COMMIT.
		{"after a commit", e.commits[1], flatten(e.ids[2:])},
		// After the second row of the three-row transaction; lsn_commit
		// is the second transaction's end.
		{"inside the multi-row transaction", e.inserts[4], append([]string{e.ids[2][2]}, flatten(e.ids[3:])...)},
		// After the last row of the second transaction: lsn_commit lags
		// (the first transaction's end), the rows of the second are passed
		// over inside it.
		{"after the last row of a transaction", e.inserts[2], flatten(e.ids[2:])},
	} {
		t.Run(tc.name, func(t *testing.T) {
			connector := fmt.Sprintf("outbox-%d", i)
			slot := fmt.Sprintf("takeover_%d", i)
			prefix := fmt.Sprintf("%s.c%d", e.prefix, i)
			e.slotCopy(t, slot)
			e.writeOffset(t, fmt.Sprintf(`["%s",{"server":"dbserver1"}]`, connector), tc.offset)
			env := e.caseEnv(slot, prefix)

			out := wantOK(t, env, "debezium", "takeover", "--offsets-topic", e.offsets, "--connector", connector, "--dry-run")
			for _, id := range flatten(e.ids) {
				if skipped := !containsString(tc.want, id); strings.Contains(out, id) != skipped {
					t.Errorf("--dry-run lists %s: %v, want %v:\n%s", id, !skipped, skipped, out)
				}
			}
			if got := slotLSN(t, e.dsn, slot); got != slotLSN(t, e.dsn, "walrelay") {
				t.Fatalf("--dry-run moved the slot to %s", got)
			}

			e.runTakeover(t, env, slot, "--connector", connector, "--topic-prefix", "dbserver1")
			wantExactly(t, e.published(t, prefix, len(tc.want)), tc.want)
		})
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// A takeover killed before Kafka acknowledged anything, run again: the
// slot stays where the first run moved it, the rows the connector had
// published in its open transaction are passed over again, and everything
// after is published once. Run a third time, after the relay confirmed
// past that transaction, it passes over nothing and publishes only what
// is new.
func TestDebeziumTakeoverAgainAfterACrash(t *testing.T) {
	e := newTakeoverEnv(t)
	if e.broker.Cluster == nil {
		t.Skip("needs kfake to refuse produce requests")
	}
	const slot = "walrelay"
	env := e.caseEnv(slot, e.prefix)
	e.writeOffset(t, `["outbox",{"server":"dbserver1"}]`, e.inserts[4])
	want := append([]string{e.ids[2][2]}, flatten(e.ids[3:])...)

	// Produce requests fail (retriably) until refuse is cleared.
	var refuse atomic.Bool
	refuse.Store(true)
	e.broker.Cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.broker.Cluster.KeepControl()
		if !refuse.Load() {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.(*kmsg.ProduceRequest).Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.NotEnoughReplicas.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	c := startChild(t, env, "debezium", "takeover", "--offsets-topic", e.offsets, "--connector", "outbox")
	offset, err := dbzoffset.Parse([]byte(e.inserts[4]))
	if err != nil {
		t.Fatal(err)
	}
	through := offset.LSNCommit
	testenv.WaitConfirmed(t, e.dsn, slot, through, 30*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(c.stderr.String(), "taking over inside the transaction") {
		if time.Now().After(deadline) {
			t.Fatalf("the relay did not reach the open transaction:\n%s", c.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // let it try to produce
	c.signal(t, syscall.SIGKILL)
	c.wait(t, 10*time.Second)
	if got := testenv.ParseLSN(t, slotLSN(t, e.dsn, slot)); got != through {
		t.Fatalf("after the crash the slot is at %s, want lsn_commit %s (nothing was acknowledged)", got, through)
	}
	refuse.Store(false)

	c = e.runTakeover(t, env, slot, "--connector", "outbox")
	if !strings.Contains(c.stderr.String(), "the slot is at or past the connector's lsn_commit already") {
		t.Errorf("the second takeover should leave the slot where it is:\n%s", c.stderr.String())
	}
	wantExactly(t, e.published(t, e.prefix, len(want)), want)

	newer := insertEvents(t, e.dsn, "order", "customer")
	c = e.runTakeover(t, env, slot, "--connector", "outbox")
	if !strings.Contains(c.stderr.String(), "nothing to pass over") {
		t.Errorf("a takeover run again after the relay confirmed the open transaction should pass over nothing:\n%s", c.stderr.String())
	}
	wantExactly(t, e.published(t, e.prefix, len(want)+len(newer)), append(want, newer...))
}

// Refusals: a slot in use (the connector still runs), no offset for the
// connector, an offset deleted (tombstone). Each exits 1 with one line
// saying what to do, and leaves the slot alone.
func TestDebeziumTakeoverRefuses(t *testing.T) {
	e := newTakeoverEnv(t)
	e.writeOffset(t, `["reset",{"server":"dbserver1"}]`, e.inserts[4])
	e.writeOffset(t, `["reset",{"server":"dbserver1"}]`, "")
	e.writeOffset(t, `["running",{"server":"dbserver1"}]`, e.inserts[4])
	before := slotLSN(t, e.dsn, "walrelay")

	pid, release := holdSlot(t, e.dsn, "walrelay")
	stdout, stderr, code := walrelay(t, e.env, "debezium", "takeover", "--offsets-topic", e.offsets, "--connector", "running")
	wantFailure(t, stdout, stderr, code, 1, `slot "walrelay" is held by pid `+fmt.Sprint(pid), "stop the Debezium connector first", "PUT /connectors/running/stop")
	release()

	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"no offset", []string{"--connector", "other"}, 1, []string{"no offset for the connector", `["other",{"server":…}]`, "--connector"}},
		{"tombstone", []string{"--connector", "reset"}, 1, []string{"offset was reset", "tombstone"}},
		{"wrong prefix", []string{"--connector", "running", "--topic-prefix", "dbserver2"}, 1, []string{`["running",{"server":"dbserver2"}]`}},
		{"no such topic", []string{"--connector", "running", "--offsets-topic", "connect-offsets"}, 1, []string{`offsets topic does not exist: "connect-offsets"`}},
		{"no connector", nil, 2, []string{"--connector is required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"debezium", "takeover", "--offsets-topic", e.offsets}, tc.args...)
			stdout, stderr, code := walrelay(t, e.env, args...)
			wantFailure(t, stdout, stderr, code, tc.code, tc.want...)
		})
	}
	if got := slotLSN(t, e.dsn, "walrelay"); got != before {
		t.Errorf("a refused takeover moved the slot from %s to %s", before, got)
	}
}
