package faultsuite

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/eoscheckpoint"
	"github.com/walrelay/walrelay/internal/testenv"
)

// otherDeploymentTimeout is the transaction timeout of the other
// deployment in testSharedCheckpointOpenTxn: the broker aborts the
// transaction it leaves open that long after it began.
const otherDeploymentTimeout = 5 * time.Second

// testSharedCheckpointOpenTxn: a second deployment (another database and
// slot, so another transactional id) writes its checkpoints to the same
// default relay.checkpoint_topic, and is killed between producing its
// checkpoint and committing, leaving a transaction open there until its
// transaction timeout (5s). Meanwhile the relay under test commits newer
// checkpoints above it, in the middle of a Postgres transaction of 3,000
// rows relayed over many Kafka transactions (relay.max_in_flight_records
// 100), while writers commit; it is SIGKILLed then, and started again
// while the other transaction is still open. Cycles of that, then a final
// run.
//
// With exactly-once delivery a restart must not resume from the last
// checkpoint below the other deployment's open transaction (all a read to
// the last stable offset sees): it would publish again what its newer
// checkpoints covered. It waits for that transaction to end, reading
// nothing from the slot, then resumes from its newest checkpoint:
// duplicates 0. The scenario counts the kills at risk: the relay had
// committed at least three Kafka transactions above the other
// deployment's open record and the slot was not yet confirmed past the
// large transaction, so that only the newest checkpoints know how much of
// it is on Kafka. The at-least-once row runs the same workload (it reads
// no checkpoint).
func testSharedCheckpointOpenTxn(t *testing.T, row *result, d delivery) {
	f := newFixture(t, d)
	env := append(slices.Clone(f.env), "WALRELAY_RELAY_MAX_IN_FLIGHT_RECORDS=100")
	createCheckpointTopic(t, f.adm)
	w := startWorkload(t, f.dsn, defaultLoad)
	cycles := pick(4, 12)
	const bulk = 3000
	atRisk, heldAtStart := 0, 0
	var maxRec time.Duration
	other := int64(-1) // the offset of the other deployment's last open record
	for i := range cycles {
		if other >= 0 && checkpointStable(t, f.adm) <= other {
			heldAtStart++
		}
		p := startRelay(t, fmt.Sprintf("run%02d", i), env)
		if _, err := waitAcked(t, p); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		other = openOtherDeployment(t, f, i)
		before := published(t, f.adm)
		walAfter := commitBulk(t, f.dsn, i, bulk)
		// The relay commits Kafka transactions above the other's open
		// record (each a checkpoint and its marker on the checkpoint
		// topic); at least once, 300 more records on the broker.
		deadline := time.Now().Add(time.Minute)
		for {
			var done bool
			if d == exactlyOnce {
				done = checkpointEnd(t, f.adm) >= other+1+6
			} else {
				done = published(t, f.adm) >= before+300
			}
			if done {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %d: the relay did not get on with the large transaction within a minute", i)
			}
			requireRunning(t, p, "before its SIGKILL")
			time.Sleep(10 * time.Millisecond)
		}
		s := mustSlot(t, f.dsn)
		p.kill()
		open := checkpointStable(t, f.adm) <= other
		if d == exactlyOnce && open && s.confirmed < walAfter {
			atRisk++
		}
		t.Logf("run %02d: killed with the other deployment's record at checkpoint offset %d (still open: %t), checkpoint end %d, slot at %s (large transaction before %s)",
			i, other, open, checkpointEnd(t, f.adm), s.confirmed, walAfter)
	}
	heldFinal := checkpointStable(t, f.adm) <= other
	final := mustSlot(t, f.dsn)
	p := startRelay(t, "final", env)
	maxRec = max(maxRec, waitConfirmed(t, f.dsn, final.current, p.started, 2*time.Minute))
	rep, read := f.verify(t, w)
	stopClean(t, p)
	fill(row, rep, read)
	row.recovery = maxRec
	if heldFinal {
		heldAtStart++
	}
	row.notes = fmt.Sprintf("%d SIGKILLs, each in a transaction of %d rows relayed 100 records per Kafka transaction, with another deployment's transaction (timeout %s) open on the shared checkpoint topic; %d of %d starts with it still open",
		cycles, bulk, otherDeploymentTimeout, heldAtStart, cycles)
	if d == exactlyOnce {
		row.notes += fmt.Sprintf("; %d kills at risk (3+ Kafka transactions committed above the open one, slot behind the large transaction)", atRisk)
	} else {
		row.notes += " (at least once reads no checkpoint: a kill re-sends what the slot had not confirmed)"
	}
	row.notes += "; recovery = final start → WAL confirmed"
	if d == exactlyOnce && atRisk < cycles/2 {
		t.Errorf("only %d of %d kills at risk: the scenario is too weak", atRisk, cycles)
	}
	if heldAtStart == 0 {
		t.Errorf("no start found the other deployment's transaction still open: the scenario is too weak")
	}
}

// createCheckpointTopic creates the checkpoint topic as walrelay does
// (one partition, compacted), so that the other deployment can write to it
// before, or without (at least once), the relay under test.
func createCheckpointTopic(t *testing.T, adm *kadm.Client) {
	t.Helper()
	compact := "compact"
	resp, err := adm.CreateTopic(t.Context(), 1, 1, map[string]*string{"cleanup.policy": &compact}, checkpointTopic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("creating %s: %v", checkpointTopic, err)
	}
}

// openOtherDeployment produces a checkpoint of another deployment in a
// transaction, and closes its client without ending the transaction (the
// process killed before its commit): the broker aborts it after
// otherDeploymentTimeout. It returns the record's offset.
func openOtherDeployment(t *testing.T, f *fixture, i int) int64 {
	t.Helper()
	id := "walrelay-otherdb-walrelay"
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.broker.Addrs()...), kgo.TransactionalID(id), kgo.TransactionTimeout(otherDeploymentTimeout))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("the other deployment's transaction: %v", err)
	}
	cp := eoscheckpoint.Checkpoint{LSN: pglogrepl.LSN(0x1000000 + i), SystemID: "1", Timeline: 1, Database: "otherdb", Slot: "walrelay", Written: time.Now()}
	r, err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: checkpointTopic, Key: []byte(id), Value: cp.Marshal()}).First()
	if err != nil {
		t.Fatalf("the other deployment's checkpoint: %v", err)
	}
	return r.Offset
}

// commitBulk commits one transaction of n outbox rows (keys bulk<i>-0 to
// -99) and their ledger, and returns the WAL position after it.
func commitBulk(t *testing.T, dsn string, i, n int) pglogrepl.LSN {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn := testenv.Connect(t, dsn)
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `
WITH o AS (INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
      SELECT 'bulk', 'bulk' || $2::int || '-' || (i % 100), 'Imported', jsonb_build_object('i', i)
      FROM generate_series(0, $1::int - 1) i ORDER BY i
      RETURNING id, aggregateid, (payload->>'i')::int AS i, md5(payload::text) AS digest)
INSERT INTO expected SELECT id, 'bulk', aggregateid, i / 100 + 1, digest FROM o`, n, i); err != nil {
		t.Fatalf("committing the large transaction: %v", err)
	}
	var lsn string
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	return testenv.ParseLSN(t, lsn)
}

// checkpointEnd is the checkpoint topic's high watermark.
func checkpointEnd(t *testing.T, adm *kadm.Client) int64 {
	t.Helper()
	return checkpointOffset(t, adm.ListEndOffsets)
}

// checkpointStable is the checkpoint topic's last stable offset: at or
// below the other deployment's record while its transaction is open.
func checkpointStable(t *testing.T, adm *kadm.Client) int64 {
	t.Helper()
	return checkpointOffset(t, adm.ListCommittedOffsets)
}

// checkpointOffset is the offset list returns for the checkpoint topic's
// partition.
func checkpointOffset(t *testing.T, list func(context.Context, ...string) (kadm.ListedOffsets, error)) int64 {
	t.Helper()
	l, err := list(t.Context(), checkpointTopic)
	if err == nil {
		err = l.Error()
	}
	if err != nil {
		t.Fatalf("listing %s: %v", checkpointTopic, err)
	}
	o, _ := l.Lookup(checkpointTopic, 0)
	return o.Offset
}

// waitAcked waits until p has its first record acknowledged (committed,
// exactly once), and returns how long after its start.
func waitAcked(t *testing.T, p *relayProc) (time.Duration, error) {
	t.Helper()
	for {
		n, err := p.metricSum(t.Context(), "walrelay_events_published_total")
		if err == nil && n > 0 {
			return time.Since(p.started), nil
		}
		if time.Since(p.started) > time.Minute {
			return 0, fmt.Errorf("walrelay %s had no record acknowledged within a minute (last error: %v)", p.name, err)
		}
		requireRunning(t, p, "before its first ack")
		time.Sleep(20 * time.Millisecond)
	}
}
