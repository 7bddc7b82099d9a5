package faultsuite

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/walrelay/walrelay/internal/verify"
)

// envZombieUnfenced, set to 1, runs TestZombieCannotCommit with the
// process that takes over under another kafka.transactional_id, so that it
// fences nothing: the test must then fail (the zombie commits its open
// transaction, and keeps running). It exists to show the test can fail.
const envZombieUnfenced = "WALRELAY_FAULT_ZOMBIE_UNFENCED"

// TestZombieCannotCommit: a walrelay process with exactly-once delivery
// that froze with records in an open Kafka transaction and lost the slot
// meanwhile (a zombie) can commit nothing once another process took over.
//
// Active A runs with writers committing. A is frozen with SIGSTOP at a
// moment it has records in an open Kafka transaction on the broker (some
// partition's last stable offset below its high watermark;
// freezeInTransaction). Its walsender is terminated (standing for
// wal_sender_timeout, after which Postgres drops a client that stopped
// answering), and standby B is started: it takes the slot, fences the
// transactional id (which aborts A's open transaction) and publishes from
// A's last committed checkpoint. Once B has committed records past
// everything A had written, A is continued with SIGCONT. Then:
//
//   - A logs that it was fenced, starts again in-process (a first fence
//     does not stop the process) and, B holding the slot, becomes a
//     standby that fences nobody; it stops cleanly on SIGTERM;
//   - A committed nothing after the freeze: no commit marker of A's
//     producer (its producer id with an epoch up to the highest it had
//     written with; epochs only grow, and B's are higher) at or past the
//     high watermark of the freeze, on any partition of the outbox,
//     dead-letter and checkpoint topics, so none after B's first committed
//     record either; and no record of A's at or past the last stable
//     offset of the freeze (its open transaction) reaches a read_committed
//     consumer;
//   - B keeps running and stops cleanly, and per partition the producers
//     (id and epoch) of committed records never interleave;
//   - a read_committed consumer reads every committed event exactly once
//     (verifyRun), dead letters included.
//
// Records carry no producer header: the producer of a record is franz-go's
// Record.ProducerID and ProducerEpoch, from its batch.
func TestZombieCannotCommit(t *testing.T) {
	buildRelay(t)
	f := newFixture(t, exactlyOnce)
	envB := f.env
	if os.Getenv(envZombieUnfenced) == "1" {
		envB = append(slices.Clone(f.env), "WALRELAY_KAFKA_TRANSACTIONAL_ID=walrelay-zombie-test-other-id")
		t.Logf("%s=1: B runs under another transactional id and fences nothing; this test must fail", envZombieUnfenced)
	}
	w := startWorkload(t, f.dsn, defaultLoad)
	a := startRelay(t, "a", f.env)
	waitPublished(t, f.adm, 500, time.Minute)

	open := freezeInTransaction(t, a, f.adm)
	frozen := time.Now()
	// What A wrote: it is the only producer so far.
	hwm, err := listEnds(t.Context(), f.adm, false, checkpointTopic)
	if err != nil {
		t.Fatalf("listing high watermarks: %v", err)
	}
	lso, err := listEnds(t.Context(), f.adm, true, checkpointTopic)
	if err != nil {
		t.Fatalf("listing last stable offsets: %v", err)
	}
	before := readTopics(t, f.broker.Addrs(), false, []string{checkpointTopic})
	zombie, err := producerOf(before)
	if err != nil {
		t.Fatalf("A's producer: %v", err)
	}
	target := mustSlot(t, f.dsn).current
	pid := terminateWalsender(t, f.dsn)
	t.Logf("A (pid %d) frozen as producer %d up to epoch %d, records of an open transaction on %d partitions; its walsender %d terminated",
		a.pid(), zombie.ID, zombie.Epoch, len(open), pid)

	b := startRelay(t, "b", envB)
	// B takes over: it confirms the WAL A had been sent, and commits
	// records past everything A had written.
	waitConfirmed(t, f.dsn, target, frozen, 2*time.Minute)
	waitCommittedPast(t, f.adm, sumOffsets(hwm), time.Minute)
	requireRunning(t, b, "after taking over")
	t.Logf("B took over and committed past A's writes %s after the freeze", time.Since(frozen).Round(time.Millisecond))

	// The zombie wakes up with records in a transaction B's fence
	// aborted. Writers keep committing meanwhile.
	logged := logSize(a.logPath)
	a.signal(t, syscall.SIGCONT)
	deadline := time.Now().Add(30 * time.Second)
	for !a.logHas(fencedLog) || !a.logHas(restartLog) {
		if !a.running() || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !a.logHas(fencedLog) || !a.logHas(restartLog) || !a.running() {
		t.Errorf("zombie A did not log %q and %q within 30s of SIGCONT and run on (running %t); killing it", fencedLog, restartLog, a.running())
		a.kill()
		time.Sleep(time.Second) // B publishes on after the zombie is gone
	} else {
		waitStandby(t, a)
		time.Sleep(time.Second) // B publishes on with the woken zombie a standby
		waitStandby(t, a)
		if err := a.stop(30 * time.Second); err != nil {
			t.Errorf("zombie A, a standby, did not stop cleanly: %v", err)
		}
	}
	requireRunning(t, b, "after the zombie was continued")
	t.Logf("zombie A's log after SIGCONT:\n%s", logFrom(a.logPath, logged))

	rep, _ := f.verify(t, w)
	after := readTopics(t, f.broker.Addrs(), true, []string{checkpointTopic})
	if err := b.stop(30 * time.Second); err != nil {
		t.Errorf("B did not stop cleanly: %v", err)
	}

	isZombie := func(p verify.Producer) bool { return p.ID == zombie.ID && p.Epoch <= zombie.Epoch }
	aborted, committed, bCommitted := 0, 0, map[string]bool{}
	for _, m := range after.markers {
		k := fmt.Sprintf("%s[%d]", m.topic, m.partition)
		end, _ := hwm.Lookup(m.topic, m.partition)
		switch {
		case isZombie(m.producer) && m.offset >= end.Offset && m.commit:
			committed++
			t.Errorf("zombie A committed after the freeze: commit marker of producer %s at %s@%d (high watermark at the freeze %d)", m.producer, k, m.offset, end.Offset)
		case isZombie(m.producer) && m.offset >= end.Offset:
			aborted++
		case !isZombie(m.producer) && m.commit:
			bCommitted[k] = true
		}
	}
	for _, r := range after.records {
		k := fmt.Sprintf("%s[%d]", r.Topic, r.Partition)
		stable, _ := lso.Lookup(r.Topic, r.Partition)
		if isZombie(verify.ProducerOf(r)) && r.Offset >= stable.Offset {
			t.Errorf("a record of zombie A reaches read_committed consumers: %s (%s@%d; last stable offset at the freeze %d)", r.ID, k, r.Offset, stable.Offset)
		}
	}
	if aborted == 0 {
		t.Errorf("no abort marker of zombie A after the freeze: its open transaction on %v was not aborted", open)
	}
	if len(bCommitted) == 0 {
		t.Error("B committed nothing after the freeze")
	}
	if bad := verify.ProducerInterleavings(after.records); len(bad) > 0 {
		t.Errorf("committed records of two producers interleave: %d, e.g. %v", len(bad), bad[:min(5, len(bad))])
	}
	t.Logf("after the freeze: zombie A (producer %d, epochs ≤ %d) wrote %d abort markers and %d commit markers; B committed on %d partitions; read_committed: %s",
		zombie.ID, zombie.Epoch, aborted, committed, len(bCommitted), rep)
}

// producerOf returns the producer of every record and marker read, the
// highest epoch; an error when more than one producer id wrote.
func producerOf(read kafkaRead) (verify.Producer, error) {
	var all []verify.Producer
	for _, r := range read.records {
		all = append(all, verify.ProducerOf(r))
	}
	for _, m := range read.markers {
		all = append(all, m.producer)
	}
	if len(all) == 0 {
		return verify.Producer{}, fmt.Errorf("nothing written")
	}
	p := slices.MaxFunc(all, func(a, b verify.Producer) int { return cmp.Compare(a.Epoch, b.Epoch) })
	for _, q := range all {
		if q.ID != p.ID {
			return p, fmt.Errorf("producer ids %d and %d both wrote", p.ID, q.ID)
		}
	}
	return p, nil
}

// sumOffsets adds up listed offsets.
func sumOffsets(l kadm.ListedOffsets) int64 {
	var n int64
	l.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// waitCommittedPast waits until the last stable offsets of the outbox,
// dead-letter and checkpoint topics add up to more than n.
func waitCommittedPast(t *testing.T, adm *kadm.Client, n int64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		l, err := listEnds(t.Context(), adm, true, checkpointTopic)
		if err == nil && sumOffsets(l) > n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("last stable offsets add up to %d after %s, want more than %d (last error: %v)", sumOffsets(l), timeout, n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logSize is the size of a log file so far.
func logSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// logFrom returns what a log file has from offset on.
func logFrom(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return strings.TrimRight(string(b[min(offset, int64(len(b))):]), "\n")
}
