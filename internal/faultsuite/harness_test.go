package faultsuite

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/internal/verify"
)

const (
	deadLetterTopic = "walrelay.deadletter"
	topicPrefix     = "outbox.event."
)

// soak reports whether the long variant runs (make soak).
func soak() bool { return os.Getenv("WALRELAY_SOAK") != "" }

// pick returns normal, or long under WALRELAY_SOAK.
func pick[T any](normal, long T) T {
	if soak() {
		return long
	}
	return normal
}

// slotState is the slot's confirmed_flush_lsn, the server's current WAL
// LSN and the slot's active walsender pid (0 if none).
type slotState struct {
	confirmed, current pglogrepl.LSN
	activePID          int
}

func readSlot(ctx context.Context, dsn string) (slotState, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return slotState{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var c, w string
	var pid *int
	err = conn.QueryRow(ctx, `SELECT coalesce(confirmed_flush_lsn, '0/0')::text, pg_current_wal_lsn()::text, active_pid
		FROM pg_replication_slots WHERE slot_name = $1`, slotFor(dsn)).Scan(&c, &w, &pid)
	if err != nil {
		return slotState{}, err
	}
	var s slotState
	if s.confirmed, err = pglogrepl.ParseLSN(c); err != nil {
		return s, err
	}
	if s.current, err = pglogrepl.ParseLSN(w); err != nil {
		return s, err
	}
	if pid != nil {
		s.activePID = *pid
	}
	return s, nil
}

func mustSlot(t *testing.T, dsn string) slotState {
	t.Helper()
	s, err := readSlot(t.Context(), dsn)
	if err != nil {
		t.Fatalf("reading slot %s: %v", slotFor(dsn), err)
	}
	return s
}

// waitConfirmed waits until confirmed_flush_lsn reaches target and returns
// how long it took from `since`: a recovery time. Connection errors (the
// server restarting) are retried until the timeout.
func waitConfirmed(t *testing.T, dsn string, target pglogrepl.LSN, since time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	testenv.WaitConfirmed(t, dsn, slotFor(dsn), target, timeout)
	return time.Since(since)
}

// kafkaTopics lists the outbox topics and the dead-letter topic.
func kafkaTopics(ctx context.Context, adm *kadm.Client) ([]string, error) {
	td, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, name := range td.Names() {
		if strings.HasPrefix(name, topicPrefix) || name == deadLetterTopic {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// listEnds lists the end offsets of the outbox and dead-letter topics,
// retrying for a while: right after a leader moves the broker answers
// NOT_LEADER_FOR_PARTITION and kadm does not retry per-partition errors.
// The end is the high watermark, or with committed the last stable offset
// (what a read_committed consumer reads up to: the first offset of the
// oldest open Kafka transaction, else the high watermark).
// Topics in extra are listed too.
func listEnds(ctx context.Context, adm *kadm.Client, committed bool, extra ...string) (kadm.ListedOffsets, error) {
	list := adm.ListEndOffsets
	if committed {
		list = adm.ListCommittedOffsets
	}
	var err error
	for range 100 {
		var topics []string
		if topics, err = kafkaTopics(ctx, adm); err == nil {
			topics = append(topics, extra...)
			if len(topics) == 0 {
				return nil, nil
			}
			var ends kadm.ListedOffsets
			if ends, err = list(ctx, topics...); err == nil {
				if err = ends.Error(); err == nil {
					return ends, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil, err
}

// endOffsetSum is the number of records appended to the outbox and
// dead-letter topics so far (with exactly-once delivery, records of
// aborted and open Kafka transactions and transaction markers included).
func endOffsetSum(ctx context.Context, adm *kadm.Client) (int64, error) {
	ends, err := listEnds(ctx, adm, false)
	var sum int64
	ends.Each(func(o kadm.ListedOffset) { sum += o.Offset })
	return sum, err
}

// kafkaRead is everything read back from the broker.
type kafkaRead struct {
	records []verify.Record
	// deadLetterClasses counts dead-letter records by walrelay.error.class.
	deadLetterClasses map[string]int
	// markers are the transaction markers read (exactly-once delivery),
	// to tell which producer committed or aborted where.
	markers []marker
	// note says, with exactly-once delivery, what a read_uncommitted
	// consumer would have read beyond (verifyRun).
	note string
}

// marker is a Kafka transaction marker (a control record): where a
// producer's transaction on that partition committed or aborted.
type marker struct {
	topic     string
	partition int32
	offset    int64
	producer  verify.Producer
	commit    bool
}

// readKafka reads every outbox and dead-letter topic from the start up to
// the end offsets listed when it starts. Call it once the slot caught up:
// everything confirmed is acknowledged and so below those offsets.
//
// With committed it reads as a read_committed consumer
// (kgo.FetchIsolationLevel(kgo.ReadCommitted())), what exactly-once
// delivery promises: records of aborted Kafka transactions are not
// returned, and it reads up to the last stable offsets. Either way it
// keeps the transaction markers (kgo.KeepControlRecords) to know when a
// partition is read to its end (with exactly-once delivery its last
// offset is usually a marker) and returns them.
func readKafka(t *testing.T, brokers []string, committed bool) kafkaRead {
	t.Helper()
	return readTopics(t, brokers, committed, nil)
}

// readTopics is readKafka over the outbox and dead-letter topics plus
// extra (e.g. the checkpoint topic, whose records go into no verification
// but whose markers count).
func readTopics(t *testing.T, brokers []string, committed bool, extra []string) kafkaRead {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatalf("kafka admin client: %v", err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	ends, err := listEnds(ctx, adm, committed, extra...)
	if err != nil {
		t.Fatalf("listing end offsets: %v", err)
	}
	want := map[string]map[int32]kgo.Offset{}
	remaining := map[string]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			if want[o.Topic] == nil {
				want[o.Topic] = map[int32]kgo.Offset{}
			}
			want[o.Topic][o.Partition] = kgo.NewOffset().AtStart()
			remaining[fmt.Sprintf("%s/%d", o.Topic, o.Partition)] = o.Offset
		}
	})
	out := kafkaRead{deadLetterClasses: map[string]int{}}
	if len(want) == 0 {
		return out
	}
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ConsumePartitions(want), kgo.FetchMaxWait(200 * time.Millisecond), kgo.KeepControlRecords()}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("kafka consumer: %v", err)
	}
	defer cl.Close()
	for len(remaining) > 0 {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading kafka: %d partitions not read to their end within the timeout: %v", len(remaining), remaining)
		}
		fetches.EachError(func(topic string, p int32, err error) { t.Logf("fetching %s[%d]: %v", topic, p, err) })
		fetches.EachRecord(func(r *kgo.Record) {
			k := fmt.Sprintf("%s/%d", r.Topic, r.Partition)
			if end, ok := remaining[k]; ok && r.Offset+1 >= end {
				delete(remaining, k)
			}
			if r.Attrs.IsControl() {
				// Key: version int16, type int16 (0 abort, 1 commit).
				out.markers = append(out.markers, marker{topic: r.Topic, partition: r.Partition, offset: r.Offset,
					producer: verify.Producer{ID: r.ProducerID, Epoch: r.ProducerEpoch}, commit: len(r.Key) >= 4 && r.Key[3] == 1})
				return
			}
			if !slices.Contains(extra, r.Topic) {
				out.records = append(out.records, toVerify(r, &out))
			}
		})
	}
	return out
}

// toVerify converts a record read back for the verifier, counting a dead
// letter's class in read.
func toVerify(r *kgo.Record, read *kafkaRead) verify.Record {
	sum := md5.Sum(r.Value)
	vr := verify.Record{Key: string(r.Key), Digest: hex.EncodeToString(sum[:]), Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		ProducerID: r.ProducerID, ProducerEpoch: r.ProducerEpoch}
	if r.Topic == deadLetterTopic {
		vr.DeadLetter = true
		vr.ID = testenv.Header(r, "walrelay.outbox.id")
		read.deadLetterClasses[testenv.Header(r, "walrelay.error.class")]++
	} else {
		vr.ID = testenv.Header(r, "id")
	}
	return vr
}

// result is one row of the suite's table.
type result struct {
	scenario   string
	committed  int
	delivered  int
	lost       int
	duplicates int
	recovery   time.Duration // max observed; 0 when not applicable
	notes      string
	readNote   string // kafkaRead.note, after notes
}

// results collects the rows of the scenarios that ran.
type results struct {
	mu   sync.Mutex
	rows []result
}

func (r *results) add(row result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rows = append(r.rows, row)
}

// markdown renders the table, rows in the order given by order (others
// after, by name).
func (r *results) markdown(order []string) string {
	r.mu.Lock()
	rows := slices.Clone(r.rows)
	r.mu.Unlock()
	rank := func(name string) int {
		if i := slices.Index(order, name); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortStableFunc(rows, func(a, b result) int {
		if d := rank(a.scenario) - rank(b.scenario); d != 0 {
			return d
		}
		return strings.Compare(a.scenario, b.scenario)
	})
	var b strings.Builder
	b.WriteString("| scenario | rows committed | delivered | lost | duplicates | max recovery | notes |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---|\n")
	for _, row := range rows {
		rec := "-"
		if row.recovery > 0 {
			rec = row.recovery.Round(time.Millisecond).String()
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %s | %s |\n", row.scenario, row.committed, row.delivered, row.lost, row.duplicates, rec, row.notes)
	}
	return b.String()
}

// verifyRun stops the writers, waits for the slot to catch up, reads Kafka
// back and verifies it against the ledger. It fails the test on any loss,
// invented record or order violation, and with exactly-once delivery on
// any duplicate too, and returns the report and what was read.
//
// With exactly-once delivery what it verifies is what a read_committed
// consumer reads, dead letters included. It also reads everything as a
// read_uncommitted consumer would and notes (not asserts) the records of
// aborted Kafka transactions there and the duplicates they would be: the
// measure of what the transactions kept from consumers.
func verifyRun(t *testing.T, dsn string, brokers []string, w *workload, d delivery) (verify.Report, kafkaRead) {
	t.Helper()
	var rolledBack []string
	if w != nil {
		w.stop()
		committed, failed, rb := w.stats()
		rolledBack = rb
		t.Logf("writers: %d transactions committed, %d failed, %d rolled-back rows", committed, failed, len(rb))
		if committed == 0 {
			t.Fatal("writers committed nothing: the scenario proves nothing")
		}
		if len(rb) == 0 {
			t.Error("writers rolled nothing back: the rollback check would be vacuous")
		}
	}
	testenv.WaitCaughtUp(t, dsn, slotFor(dsn), 2*time.Minute)
	read := readKafka(t, brokers, d == exactlyOnce)
	ledger := readLedger(t, dsn)
	rep := verify.Check(ledger, rolledBack, read.records)
	t.Logf("verify (%s): %s", d.reader(), rep)
	check := rep.Err
	if d == exactlyOnce {
		check = rep.ErrExactlyOnce
		all := readKafka(t, brokers, false)
		dirty := verify.Check(ledger, rolledBack, all.records)
		read.note = fmt.Sprintf("read_uncommitted: %d records of aborted Kafka transactions, %d duplicates", len(all.records)-len(read.records), dirty.Duplicates)
		t.Logf("verify (read_uncommitted, not asserted): %s", dirty)
		if u := unmarkedTransactions(all); len(u) > 0 {
			// Reported first, as what it is: records a read_committed
			// consumer misses after it are the broker's doing.
			t.Errorf("BROKER ARTIFACT, not a walrelay loss: %d Kafka transactions ended without a COMMIT or ABORT marker (kfake's crash recovery; docs/reliability.md, \"The test broker's limits\"): read_committed consumers skip every later record of their producer ids; first: %s", len(u), u[0])
			read.note += fmt.Sprintf("; broker artifact: %d transactions without a marker", len(u))
		}
	}
	if err := check(); err != nil {
		t.Error(err)
	}
	if rep.Committed == 0 {
		t.Error("the ledger is empty: the scenario proves nothing")
	}
	return rep, read
}
