package relay_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/deadletter"
	"github.com/walrelay/walrelay/internal/partition"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/setup"
	"github.com/walrelay/walrelay/internal/testenv"
)

// hourly is the partition scheme of the tests below: hourly partitions,
// two ahead.
func hourly() *setup.Partitions {
	return &setup.Partitions{Column: "created_at", Interval: time.Hour, Ahead: 2, Now: time.Now()}
}

func partitionedConfig(c *config.Config) {
	c.Outbox.Partitioned = true
	c.Outbox.PartitionInterval = time.Hour
	c.Outbox.PartitionsAhead = 2
}

// insertAt inserts n rows of aggregatetype typ with created_at at (nil:
// now()) in one transaction and returns their ids.
func insertAt(t *testing.T, conn *pgx.Conn, typ string, at *time.Time, n int) []string {
	t.Helper()
	var ids []string
	err := pgx.BeginFunc(t.Context(), conn, func(tx pgx.Tx) error {
		for i := range n {
			var id string
			if err := tx.QueryRow(t.Context(), `INSERT INTO outbox (aggregatetype, aggregateid, type, payload, created_at)
				VALUES ($1, $2, 'Happened', '{"n": 1}', coalesce($3, now())) RETURNING id::text`, typ, fmt.Sprint("agg-", i%3), at).Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("inserting into the outbox: %v", err)
	}
	return ids
}

// A partitioned outbox loses no event while partitions come and go under
// the running relay: rows of the current partition, of a partition the
// test creates while the relay streams, and of a partition the maintainer
// recreates after the test dropped it, every one arrives, and each is
// published under the outbox's own name (the root's relation), not a
// partition's.
func TestPartitionedOutboxLosesNothing(t *testing.T) {
	f := newFixtureWith(t, hourly(), partitionedConfig)
	run := f.start(t)
	mcfg := f.cfg
	mcfg.Outbox.PruneInterval = 200 * time.Millisecond // below the option's minimum: faster rounds
	m := partition.NewMaintainer(mcfg, f.logs.logger())
	mctx, stopMaintainer := context.WithCancel(context.Background())
	maintained := make(chan error, 1)
	go func() { maintained <- m.Run(mctx) }()
	t.Cleanup(func() { stopMaintainer(); <-maintained })

	scheme, _ := partition.NewScheme("public.outbox", "created_at", time.Hour)
	ahead := scheme.Partition(scheme.Start(time.Now()).Add(2 * time.Hour))

	var (
		mu   sync.Mutex
		want []string
	)
	add := func(ids []string) { mu.Lock(); want = append(want, ids...); mu.Unlock() }

	// A writer keeps committing into the current partition throughout.
	writerCtx, stopWriter := context.WithCancel(t.Context())
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		conn := testenv.Connect(t, f.dsn)
		for i := 0; writerCtx.Err() == nil; i++ {
			typ := []string{"order", "customer"}[i%2]
			add(insertAt(t, conn, typ, nil, 1+i%3))
			time.Sleep(5 * time.Millisecond)
		}
	}()

	conn := testenv.Connect(t, f.dsn)
	add(insertAt(t, conn, "order", nil, 5))
	f.broker.ReadAll(t, []string{"outbox.event.order"}, 5, 30*time.Second) // streaming

	// The test creates a partition a month ahead while the relay streams,
	// and a transaction writes into it and the current one at once.
	far := time.Now().Add(30 * 24 * time.Hour)
	testenv.Exec(t, f.dsn, fmt.Sprintf(`CREATE TABLE outbox_far PARTITION OF outbox FOR VALUES FROM ('%s') TO ('%s')`,
		far.Add(-time.Hour).UTC().Format(time.RFC3339), far.Add(time.Hour).UTC().Format(time.RFC3339)))
	err := pgx.BeginFunc(t.Context(), conn, func(tx pgx.Tx) error {
		for _, at := range []any{nil, far, nil, far} {
			var id string
			if err := tx.QueryRow(t.Context(), `INSERT INTO outbox (aggregatetype, aggregateid, type, payload, created_at)
				VALUES ('customer', 'c-1', 'Moved', '{}', coalesce($1, now())) RETURNING id::text`, at).Scan(&id); err != nil {
				return err
			}
			add([]string{id})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// The maintainer recreates a partition ahead that was dropped; rows
	// written into it then arrive like the others.
	before := len(f.logs.lines("created outbox partition"))
	testenv.Exec(t, f.dsn, fmt.Sprintf(`DROP TABLE %s`, pgx.Identifier{ahead.Schema, ahead.Name}.Sanitize()))
	f.logs.waitLog(t, "created outbox partition", map[string]string{"partition": "public." + ahead.Name}, 30*time.Second)
	if after := len(f.logs.lines("created outbox partition")); after <= before {
		t.Fatalf("the maintainer logged no new partition")
	}
	at := ahead.From.Add(time.Minute)
	add(insertAt(t, conn, "order", &at, 7))

	// A row the router refuses goes to the dead-letter topic naming the
	// outbox, not the partition its row is stored in.
	var poison string
	if err := conn.QueryRow(t.Context(), `INSERT INTO outbox (aggregatetype, aggregateid, type, payload, created_at)
		VALUES ('bad topic!', 'p-1', 'Bad', '{}', $1) RETURNING id::text`, far).Scan(&poison); err != nil {
		t.Fatal(err)
	}

	time.Sleep(300 * time.Millisecond)
	stopWriter()
	<-writerDone

	mu.Lock()
	expected := append([]string(nil), want...)
	mu.Unlock()
	recs := f.broker.ReadAll(t, []string{"outbox.event.order", "outbox.event.customer"}, len(expected), 60*time.Second)
	got := map[string]int{}
	for _, r := range recs {
		id, _ := header(r, "id")
		got[id]++
	}
	var missing []string
	for _, id := range expected {
		if got[id] == 0 {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d of %d events never arrived: %v", len(missing), len(expected), missing)
	}
	dls := f.broker.ReadAll(t, []string{f.cfg.Relay.DeadLetterTopic}, 1, 30*time.Second)
	if table, _ := header(dls[0], deadletter.HeaderSourceTable); table != "public.outbox" {
		t.Errorf("dead letter of a row in partition outbox_far names table %q, want public.outbox", table)
	}
	if id, _ := header(dls[0], deadletter.HeaderEventID); id != poison {
		t.Errorf("dead letter of %q, want %q", id, poison)
	}
	f.waitCaughtUp(t, 30*time.Second)
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d events in %d records, partition %s recreated by the maintainer", len(expected), len(recs), ahead.Name)
}

// A publication of a partitioned table without publish_via_partition_root
// would send each row under its partition's name: walrelay refuses to
// start and says the fix. Rows written before the fix are still in the
// slot under their partitions' relations, and are published once it is
// applied.
func TestStartupRefusesPartitionsPublishedUnderTheirOwnNames(t *testing.T) {
	f := newFixtureWith(t, hourly(), partitionedConfig)
	testenv.Exec(t, f.dsn, `ALTER PUBLICATION walrelay_outbox SET (publish_via_partition_root = false)`)
	conn := testenv.Connect(t, f.dsn)
	before := insertAt(t, conn, "order", nil, 3)

	err := f.start(t).wait(30 * time.Second)
	const fix = `ALTER PUBLICATION "walrelay_outbox" SET (publish_via_partition_root = true);`
	if !errors.Is(err, relay.ErrPublicationLeaves) || !strings.Contains(err.Error(), fix) || !strings.Contains(err.Error(), "public.outbox_p") {
		t.Fatalf("Run = %v, want %v naming a partition and saying %s", err, relay.ErrPublicationLeaves, fix)
	}

	testenv.Exec(t, f.dsn, `ALTER PUBLICATION walrelay_outbox SET (publish_via_partition_root = true)`)
	after := insertAt(t, conn, "order", nil, 2)
	run := f.start(t)
	recs := f.broker.ReadAll(t, []string{"outbox.event.order"}, len(before)+len(after), 30*time.Second)
	got := map[string]bool{}
	for _, r := range recs {
		id, _ := header(r, "id")
		got[id] = true
	}
	for _, id := range append(before, after...) {
		if !got[id] {
			t.Errorf("event %s (written before the fix: %v) never arrived", id, strings.Contains(strings.Join(before, " "), id))
		}
	}
	f.waitCaughtUp(t, 30*time.Second)
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}
