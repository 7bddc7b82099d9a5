package faultsuite

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/eoscheckpoint"
	"github.com/walrelay/walrelay/internal/kafkalog"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/testenv"
)

// delivery is the relay.delivery a scenario runs walrelay with
// (WALRELAY_RELAY_DELIVERY), and so how the suite reads Kafka back.
type delivery string

const (
	// atLeastOnce: a read_uncommitted read; duplicates are reported.
	atLeastOnce delivery = config.AtLeastOnce
	// exactlyOnce: a read_committed read, dead letters included;
	// duplicates fail the scenario.
	exactlyOnce delivery = config.ExactlyOnce
)

// deliveries are the modes every scenario runs in, a row each.
var deliveries = []delivery{atLeastOnce, exactlyOnce}

// row is the name of scenario's row in mode d: at-least-once rows keep
// the scenario's name, exactly-once ones add " (exactly-once)".
func (d delivery) row(scenario string) string {
	if d == exactlyOnce {
		return scenario + " (exactly-once)"
	}
	return scenario
}

// reader is the consumer the suite verifies as.
func (d delivery) reader() string {
	if d == exactlyOnce {
		return "read_committed"
	}
	return "read_uncommitted"
}

// checkpointTopic is relay.checkpoint_topic's default, which the suite
// runs with.
var checkpointTopic = config.Default().Relay.CheckpointTopic

// transactionalID is the transactional id the relays of dsn's slot use
// (the derived one: the suite sets no kafka.transactional_id), as
// walrelay run derives it from the server.
func transactionalID(t *testing.T, dsn string) string {
	t.Helper()
	cfg := config.Default()
	cfg.Postgres.Slot = slotFor(dsn)
	conn := testenv.Connect(t, dsn)
	defer conn.Close(context.WithoutCancel(t.Context()))
	id, err := postgres.TransactionalID(t.Context(), conn, cfg)
	if err != nil {
		t.Fatalf("deriving the transactional id: %v", err)
	}
	return id.ID
}

// readCheckpoint returns the last checkpoint the relays with transactional
// id txnID committed (read_committed), the zero Checkpoint when there is
// none yet. It reads to the last stable offset (kafkalog.ReadToEnd), not
// as eoscheckpoint.Read does: a killed relay's transaction stays open on
// the topic until the next run fences it, and only this relay writes
// there, so what is below it is all it committed.
func readCheckpoint(ctx context.Context, brokers []string, txnID string) (eoscheckpoint.Checkpoint, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var last []byte
	_, err := kafkalog.ReadToEnd(ctx, checkpointTopic, []kgo.Opt{kgo.SeedBrokers(brokers...)}, func(r *kgo.Record) {
		if string(r.Key) == txnID {
			last = r.Value
		}
	})
	if errors.Is(err, kafkalog.ErrNoTopic) || (err == nil && last == nil) {
		return eoscheckpoint.Checkpoint{}, nil
	}
	if err != nil {
		return eoscheckpoint.Checkpoint{}, err
	}
	return eoscheckpoint.Parse(last)
}

// openTransaction reports the partitions (outbox, dead-letter and
// checkpoint topics) whose last stable offset is below the high
// watermark: records of a Kafka transaction still open are on them.
func openTransaction(ctx context.Context, adm *kadm.Client) (map[string]int64, error) {
	hwm, err := listEnds(ctx, adm, false, checkpointTopic)
	if err != nil {
		return nil, err
	}
	lso, err := listEnds(ctx, adm, true, checkpointTopic)
	if err != nil {
		return nil, err
	}
	open := map[string]int64{}
	hwm.Each(func(o kadm.ListedOffset) {
		if s, ok := lso.Lookup(o.Topic, o.Partition); ok && s.Offset < o.Offset {
			open[fmt.Sprintf("%s[%d]", o.Topic, o.Partition)] = o.Offset - s.Offset
		}
	})
	return open, nil
}

// freezeInTransaction stops p with SIGSTOP at a moment it has records in
// an open Kafka transaction on the broker (some partition's last stable
// offset below its high watermark). Under load that is most moments; when
// a stop finds none, p is continued and stopped again a little later. It
// returns the partitions with their open records, and fails the test after
// a minute of trying.
func freezeInTransaction(t *testing.T, p *relayProc, adm *kadm.Client) map[string]int64 {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for tries := 1; ; tries++ {
		requireRunning(t, p, "before its SIGSTOP")
		p.signal(t, syscall.SIGSTOP)
		// In flight when it stopped: produce requests the broker has not
		// answered yet land now.
		time.Sleep(100 * time.Millisecond)
		open, err := openTransaction(t.Context(), adm)
		if err != nil {
			t.Fatalf("listing offsets: %v", err)
		}
		if len(open) > 0 {
			t.Logf("walrelay %s stopped (SIGSTOP, try %d) with a Kafka transaction open: records past the last stable offset %v", p.name, tries, open)
			return open
		}
		p.signal(t, syscall.SIGCONT)
		if time.Now().After(deadline) {
			t.Fatalf("walrelay %s never had a Kafka transaction open when stopped (%d tries)", p.name, tries)
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// terminateWalsender ends the slot's walsender with pg_terminate_backend
// and returns its pid. It stands for wal_sender_timeout: the walsender of
// a frozen process notices its client is gone only after that (60s by
// default), and a frozen process holds the slot until then.
func terminateWalsender(t *testing.T, dsn string) int {
	t.Helper()
	s := mustSlot(t, dsn)
	if s.activePID == 0 {
		t.Fatalf("slot %s has no active walsender to terminate", slotFor(dsn))
	}
	conn, err := pgconn.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	if _, err := conn.Exec(t.Context(), fmt.Sprintf("SELECT pg_terminate_backend(%d)", s.activePID)).ReadAll(); err != nil {
		t.Fatalf("terminating walsender %d: %v", s.activePID, err)
	}
	return s.activePID
}

// fencedLog is what a walrelay process fenced by a newer one logs when it
// stops its exactly-once pipeline (internal/relay).
const fencedLog = "fenced: another walrelay process now produces with this transactional id; stopping without confirming anything more"

// restartLog is what it logs then, starting the pipeline again
// in-process (internal/relay: it exits only when fenced twice within
// minutes).
const restartLog = "restarting the exactly-once pipeline in-process"

// requireFenced continues a frozen process and requires it, within
// timeout, to log that it was fenced and starts again in-process, then to
// become a standby (the process that fenced it holds the slot; it fences
// only once it holds the slot, so it fences nobody back), and to stop
// cleanly on SIGTERM.
func requireFenced(t *testing.T, p *relayProc, timeout time.Duration) {
	t.Helper()
	p.signal(t, syscall.SIGCONT)
	deadline := time.Now().Add(timeout)
	for !p.logHas(fencedLog) || !p.logHas(restartLog) {
		requireRunning(t, p, "once fenced")
		if time.Now().After(deadline) {
			t.Errorf("walrelay %s, fenced, did not log %q and %q within %s", p.name, fencedLog, restartLog, timeout)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitStandby(t, p)
	stopClean(t, p)
}
