package relay_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/eoscheckpoint"
	"github.com/walrelay/walrelay/internal/heartbeat"
	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/setup"
	"github.com/walrelay/walrelay/internal/testenv"
)

// Issue 32, item 3: a server restored from a crash-consistent copy of its
// data directory keeps its system id and timeline, but not the
// transactions committed after the copy; its new transactions take the
// LSNs those had. The exactly-once checkpoint written before the restore
// covers LSNs the restored server reuses: a relay that trusted it would
// skip the restored server's new rows as published, and confirm the slot
// past them. The relay must prove the checkpoint on this WAL first (its
// last transaction re-sent as the checkpoint names it), and publish
// everything when it cannot: every row committed on the restored server
// reaches a read_committed consumer.
func TestExactlyOnceSameTimelineRestoreLosesNothing(t *testing.T) {
	c := testenv.PrivateCluster(t, localpg.Options{})
	dsn := c.DSN("")
	names := setup.Names{Schema: "public", Table: "outbox", Publication: "walrelay_outbox", Slot: "walrelay"}
	if _, err := setup.Run(t.Context(), testenv.Connect(t, dsn), names); err != nil {
		t.Fatalf("setup: %v", err)
	}
	f := &fixture{dsn: dsn, broker: testenv.Kafka(t), logs: &logBuffer{}}
	cfg := config.Default()
	cfg.Postgres.DSN = dsn
	cfg.Postgres.StatusInterval = 100 * time.Millisecond
	cfg.Postgres.MinBackoff = 50 * time.Millisecond
	cfg.Postgres.MaxBackoff = time.Second
	cfg.Kafka.Brokers = f.broker.Addrs()
	cfg.Kafka.TopicPartitions = 4
	cfg.Relay.ShutdownTimeout = 10 * time.Second
	exactlyOnce(&cfg)
	f.cfg = cfg
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("relay log:\n%s", f.logs.String())
		}
	})
	topics := []string{"outbox.event.restore"}
	// relay runs a relay until every id inserted (one transaction each)
	// is on Kafka and the slot caught up, then stops it.
	relayRows := func(ids ...string) {
		t.Helper()
		run := f.start(t)
		for _, id := range ids {
			execTx(t, dsn, insertEvent("restore", id))
		}
		waitKeys(t, f, topics, ids, 30*time.Second)
		f.waitCaughtUp(t, 30*time.Second)
		if err := run.stop(); err != nil {
			t.Fatalf("stopping the relay: %v", err)
		}
	}

	relayRows("pre-1", "pre-2")
	// A crash-consistent copy, as a volume or VM snapshot takes it.
	ctx := t.Context()
	if err := c.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	snapshot := filepath.Join(filepath.Dir(c.DataDir()), "snapshot")
	copyDir(t, c.DataDir(), snapshot)
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	// Five rows relayed after the copy: the checkpoint moves past it. The
	// server restarted after a crash: its slot is back where it was last
	// saved, behind the checkpoint, and the slot sends the checkpoint's
	// last transaction again. That proves it: nothing is published twice.
	relayRows("old-1", "old-2", "old-3", "old-4", "old-5")
	waitKeys(t, f, topics, []string{"pre-1", "pre-2", "old-1", "old-2", "old-3", "old-4", "old-5"}, 30*time.Second)
	if !strings.Contains(f.logs.String(), "the checkpoint is proven on this server's WAL") {
		t.Errorf("the relay did not prove the checkpoint on the server restarted after a crash")
	}
	cp, found := f.checkpoint(t)
	if !found {
		t.Fatal("no checkpoint after relaying")
	}
	t.Logf("checkpoint before the restore: lsn %s, last %+v", cp.LSN, cp.Last)

	// Restore the copy, and write on it.
	if err := c.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(c.DataDir()); err != nil {
		t.Fatal(err)
	}
	copyDir(t, snapshot, c.DataDir())
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	fresh := []string{"new-1", "new-2", "new-3", "new-4", "new-5"}
	below := 0
	for i, id := range fresh {
		execTx(t, dsn, insertEvent("restore", id))
		if i == 2 {
			// A heartbeat among them: with nothing in flight its position
			// would be confirmed, were the checkpoint trusted already.
			testenv.Exec(t, dsn, `SELECT pg_logical_emit_message(false, $1, '')`, heartbeat.Prefix)
		}
		if mustLSN(t, testenv.QueryValue[string](t, dsn, `SELECT pg_current_wal_lsn()::text`)) <= cp.LSN {
			below++ // committed below the checkpoint's LSN: a trusting relay skips it
		}
	}
	if below == 0 {
		t.Fatalf("no row of the restored server committed below the checkpoint's LSN %s; the test proves nothing", cp.LSN)
	}
	// The restored server's WAL passes the checkpoint's LSN (WAL the
	// publication does not cover), so that the checkpoint looks usable.
	for mustLSN(t, testenv.QueryValue[string](t, dsn, `SELECT pg_current_wal_lsn()::text`)) <= cp.LSN {
		testenv.Exec(t, dsn, `CREATE TABLE IF NOT EXISTS filler (x int); INSERT INTO filler SELECT generate_series(1, 100)`)
	}
	t.Logf("%d of the restored server's %d new rows committed below the checkpoint's LSN", below, len(fresh))

	run := f.start(t)
	got := readKeys(t, f, topics, fresh, 30*time.Second)
	lost := 0
	for _, id := range fresh {
		if got[id] == 0 {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of the %d rows committed on the restored server were lost (read_committed saw %v)", lost, len(fresh), got)
	}
	// The restored slot sends pre-1 and pre-2 again; the checkpoints
	// written after them, still on the topic, are proven on the restored
	// WAL on the way (their last transactions are the copy's): they stay
	// skipped.
	dups := 0
	for id, n := range got {
		if n > 1 {
			dups += n - 1
			t.Errorf("%s published %d times: an earlier checkpoint proven on the restored WAL covers it", id, n)
		}
	}
	t.Logf("restored server: lost %d of %d, duplicates %d", lost, len(fresh), dups)
	if !strings.Contains(f.logs.String(), "an earlier checkpoint is proven on this server's WAL") {
		t.Errorf("the relay did not prove an earlier checkpoint on the restored WAL")
	}
	disproved := false
	for _, line := range strings.Split(f.logs.String(), "\n") {
		if !strings.Contains(line, "the checkpoint is not proven on this server's WAL: ") {
			continue
		}
		disproved = true
		t.Logf("relay: %s", line)
		// Until disproved, nothing past the slot's position was confirmed:
		// the session starts again from the slot, which sends again what
		// was passed over.
		var l struct {
			Slot      string `json:"slot_confirmed_flush_lsn"`
			Confirmed string `json:"confirmed"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if l.Confirmed != l.Slot {
			t.Errorf("while proving the checkpoint the relay confirmed %s, past the slot's position %s", l.Confirmed, l.Slot)
		}
	}
	if !disproved {
		t.Errorf("the relay did not log that the checkpoint is not proven on this server's WAL")
	}
	f.waitCaughtUp(t, 30*time.Second)
	if err := run.stop(); err != nil {
		t.Fatalf("stopping the relay: %v", err)
	}
}

// copyDir copies a (stopped) data directory with its owners and modes.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		t.Fatalf("copying %s to %s: %v: %s", from, to, err, out)
	}
}

// readKeys reads topics as a read_committed consumer until every key in
// want arrived or timeout passes, and returns how many records each key
// has.
func readKeys(t *testing.T, f *fixture, topics []string, want []string, timeout time.Duration) map[string]int {
	t.Helper()
	b := f.broker.As(kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	deadline := time.Now().Add(timeout)
	for {
		got := map[string]int{}
		for _, r := range b.ReadAll(t, topics, 0, time.Second) {
			got[string(r.Key)]++
		}
		all := true
		for _, k := range want {
			all = all && got[k] > 0
		}
		if all || time.Now().After(deadline) {
			return got
		}
	}
}

// waitKeys is readKeys that fails the test unless every key arrived
// exactly once.
func waitKeys(t *testing.T, f *fixture, topics []string, want []string, timeout time.Duration) {
	t.Helper()
	got := readKeys(t, f, topics, want, timeout)
	for _, k := range want {
		if got[k] != 1 {
			t.Fatalf("key %s is on Kafka %d times, want once (read_committed saw %v)", k, got[k], got)
		}
	}
}

// A checkpoint ahead of the slot that names no last transaction (written
// by a walrelay older than the field) cannot be proven on this WAL: it is
// not used, and everything the slot sends is published (duplicates,
// never a loss), with a warning that says why.
func TestExactlyOnceCheckpointWithoutLastIsNotTrusted(t *testing.T) {
	f := newFixture(t, exactlyOnce)
	f.createProbe(t)
	insertRow(t, f.dsn, "order", "o-1", `{"n": 1}`)
	_, x2 := insertRow(t, f.dsn, "order", "o-2", `{"n": 2}`)
	sys, tli := f.systemID(t), f.timeline(t)
	cp := eoscheckpoint.Checkpoint{LSN: f.txEnd(t, x2), SystemID: sys, Timeline: tli, Written: time.Now()}
	f.commitCheckpoint(t, cp)

	run := f.start(t)
	got := readKeys(t, f, []string{"outbox.event.order"}, []string{"o-1", "o-2"}, 30*time.Second)
	if got["o-1"] != 1 || got["o-2"] != 1 {
		t.Errorf("read_committed saw %v, want o-1 and o-2 once each: a checkpoint that cannot be proven skips nothing", got)
	}
	if !strings.Contains(f.logs.String(), "the checkpoint is not proven on this server's WAL: it names no last transaction to prove it by") {
		t.Errorf("the relay did not warn that the checkpoint names no last transaction to prove it by")
	}
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}

// A checkpoint ahead of the slot whose last transaction the slot never
// sends (the walsender passes the checkpoint's LSN without it: here it
// names a transaction this server does not have) is disproved by the
// keepalives' WAL end: the rows the relay passed over provisionally are
// published, none lost, and none was confirmed before.
func TestExactlyOnceCheckpointDisprovedByTheWALEnd(t *testing.T) {
	f := newFixture(t, exactlyOnce)
	f.createProbe(t)
	_, x1 := insertRow(t, f.dsn, "order", "o-1", `{"n": 1}`)
	insertRow(t, f.dsn, "order", "o-2", `{"n": 2}`)
	// WAL the publication does not cover, after the rows.
	testenv.Exec(t, f.dsn, `CREATE TABLE filler (x int); INSERT INTO filler SELECT generate_series(1, 100)`)
	end := mustLSN(t, testenv.QueryValue[string](t, f.dsn, `SELECT pg_current_wal_lsn()::text`))
	sys, tli := f.systemID(t), f.timeline(t)
	// Its last transaction would have committed just before end, in the
	// filler's WAL, where this server has none.
	cp := eoscheckpoint.Checkpoint{LSN: end, SystemID: sys, Timeline: tli,
		Last: &eoscheckpoint.Last{CommitLSN: end - 0x30, Xid: x1 + 1000, CommitTime: time.Now()}, Written: time.Now()}
	f.commitCheckpoint(t, cp)

	run := f.start(t)
	got := readKeys(t, f, []string{"outbox.event.order"}, []string{"o-1", "o-2"}, 30*time.Second)
	if got["o-1"] != 1 || got["o-2"] != 1 {
		t.Errorf("read_committed saw %v, want o-1 and o-2 once each: a disproved checkpoint skips nothing", got)
	}
	if !strings.Contains(f.logs.String(), "without sending the checkpoint's last transaction") {
		t.Errorf("the relay did not say the stream passed the checkpoint's LSN without its last transaction")
	}
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}
