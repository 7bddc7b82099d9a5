package main

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/operator"
	"github.com/walrelay/walrelay/internal/partition"
	"github.com/walrelay/walrelay/internal/testenv"
	sqlfiles "github.com/walrelay/walrelay/sql"
)

// `walrelay setup --outbox.partitioned=true` creates a partitioned outbox
// (and again reports everything as existing); `walrelay check` reports its
// partitions and fails or warns, with the fix, when partitions are
// missing or the publication sends partitions under their own names.
func TestSetupAndCheckPartitionedOutbox(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	broker := testenv.Kafka(t)
	env := childEnv("WALRELAY_POSTGRES_DSN="+dsn, "WALRELAY_KAFKA_BROKERS="+strings.Join(broker.Addrs(), ","))
	scheme, _ := partition.NewScheme("public.outbox", "created_at", 24*time.Hour)
	now := time.Now()

	out := wantOK(t, env, "setup", "--outbox.partitioned=true")
	for _, want := range []string{"table       public.outbox", "partitions  " + scheme.Name(scheme.Start(now)) + ".." + scheme.Name(scheme.Start(now).Add(72*time.Hour)), "publication walrelay_outbox", "slot        walrelay"} {
		if !strings.Contains(out, want+" ") || strings.Contains(out, "already exists") {
			t.Errorf("first setup lacks %q created:\n%s", want, out)
		}
	}
	if again := wantOK(t, env, "setup", "--outbox.partitioned=true"); strings.Count(again, "already exists") != 5 { // table, partitions, publication, records, slot
		t.Errorf("second setup:\n%s", again)
	}
	// A daily scheme run across UTC midnight may count one more.
	c, _ := checkJSON(t, env)
	c.want(t, "outbox partitions", operator.OK, []string{"partitioned by range of created_at with 4 partitions up to ", "; 3 ahead of now"}, nil)
	c.want(t, "publication walrelay_outbox", operator.OK, []string{"through the partition root"}, nil)
	if !c.OK {
		t.Errorf("check fails after setup: %+v", c.Items)
	}

	drop := func(start time.Time) {
		testenv.Exec(t, dsn, "DROP TABLE "+scheme.Name(start))
	}
	drop(scheme.Start(now).Add(72 * time.Hour))
	c, code := checkJSON(t, env)
	c.want(t, "outbox partitions", operator.Warn, []string{"2 ahead of now, fewer than outbox.partitions_ahead (3)"}, []string{"walrelay setup --outbox.partitioned=true", "could not create the outbox's partitions ahead"})
	if code != 0 {
		t.Errorf("check with a partition ahead missing exits %d, want 0 (a warning)", code)
	}

	drop(scheme.Start(now))
	c, code = checkJSON(t, env)
	c.want(t, "outbox partitions", operator.Fail, []string{"none holds now", "INSERTs into the outbox fail"}, []string{"walrelay setup --outbox.partitioned=true"})
	if code != 1 {
		t.Errorf("check with no partition for now exits %d, want 1", code)
	}

	testenv.Exec(t, dsn, "CREATE TABLE outbox_default PARTITION OF outbox DEFAULT")
	c, _ = checkJSON(t, env)
	c.want(t, "outbox partitions", operator.Warn, []string{"one of them DEFAULT", "none but the DEFAULT partition holds now"}, nil)

	testenv.Exec(t, dsn, "ALTER PUBLICATION walrelay_outbox SET (publish_via_partition_root = false)")
	c, code = checkJSON(t, env)
	c.want(t, "publication walrelay_outbox", operator.Fail, []string{"publishes the partitions of public.outbox under their own names", "walrelay run refuses to start"},
		[]string{`ALTER PUBLICATION "walrelay_outbox" SET (publish_via_partition_root = true);`})
	if code != 1 {
		t.Errorf("check with publish_via_partition_root off exits %d, want 1", code)
	}

	// A plain outbox is reported as such.
	plain := testenv.Postgres(t).NewDatabase(t)
	testenv.Exec(t, plain, sqlfiles.OutboxTable) // slot names are cluster-wide: the first database has walrelay
	c, _ = checkJSON(t, childEnv("WALRELAY_POSTGRES_DSN="+plain, "WALRELAY_KAFKA_BROKERS="+strings.Join(broker.Addrs(), ",")))
	c.want(t, "outbox partitions", operator.OK, []string{"plain table"}, nil)
	c, _ = checkJSON(t, childEnv("WALRELAY_POSTGRES_DSN="+plain, "WALRELAY_KAFKA_BROKERS="+strings.Join(broker.Addrs(), ","), "WALRELAY_OUTBOX_PARTITIONED=true"))
	c.want(t, "outbox partitions", operator.Warn, []string{"plain table, although outbox.partitioned is set"}, nil)
}

// `walrelay run` keeps a partitioned outbox's partitions created ahead: a
// partition ahead that disappears is created again within a round, logged,
// and the events written into it are relayed.
func TestRunKeepsPartitionsAhead(t *testing.T) {
	e := newE2E(t)
	env := append(e.env, "WALRELAY_OUTBOX_PARTITIONED=true", "WALRELAY_OUTBOX_PARTITION_INTERVAL=1h", "WALRELAY_OUTBOX_PARTITIONS_AHEAD=2", "WALRELAY_OUTBOX_PRUNE_INTERVAL=1s")
	wantOK(t, env, "setup")
	scheme, _ := partition.NewScheme("public.outbox", "created_at", time.Hour)
	ahead := scheme.Partition(scheme.Start(time.Now()).Add(2 * time.Hour))
	testenv.Exec(t, e.dsn, "DROP TABLE "+pgx.Identifier{ahead.Schema, ahead.Name}.Sanitize())

	relay := startChild(t, env, "run")
	waitStreaming(t, relay, e.dsn)
	created := func() bool {
		for _, l := range strings.Split(relay.stderr.String(), "\n") {
			if strings.Contains(l, `"msg":"created outbox partition"`) && strings.Contains(l, `"partition":"public.`+ahead.Name+`"`) {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(30 * time.Second); !created(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) || relay.exited() {
			t.Fatalf("walrelay run did not create %s:\n%s", ahead.Name, relay.stderr.String())
		}
	}
	testenv.Exec(t, e.dsn, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload, created_at) VALUES ('order', 'o-1', 'Placed', '{}', $1)`, ahead.From.Add(time.Minute))
	recs := e.broker.ReadAll(t, []string{e.prefix + ".order"}, 1, 30*time.Second)
	if got := testenv.QueryValue[string](t, e.dsn, `SELECT id::text FROM outbox`); testenv.Header(recs[0], "id") != got {
		t.Errorf("relayed event %q, want %q", testenv.Header(recs[0], "id"), got)
	}
	stopRelay(t, relay)
}

// walrelay outbox prune creates the partitions ahead that are missing,
// whether or not the slot lets it remove anything: a missing partition
// fails inserts now, and creating one needs no confirmation.
func TestOutboxPruneCreatesPartitionsAhead(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	env := childEnv("WALRELAY_POSTGRES_DSN="+dsn, "WALRELAY_OUTBOX_RETENTION=168h")
	scheme, _ := partition.NewScheme("public.outbox", "created_at", 24*time.Hour)
	wantOK(t, env, "setup", "--outbox.partitioned=true")
	last := scheme.Name(scheme.Start(time.Now()).Add(72 * time.Hour))
	testenv.Exec(t, dsn, "DROP TABLE "+last)

	// Nothing streams from the slot: the prune itself cannot go on (exit
	// 1), and the partition is created all the same.
	stdout, stderr, code := walrelay(t, env, "outbox", "prune", "--wait", "300ms")
	wantFailure(t, stdout, stderr, code, 1, "has not confirmed the fence")
	if !strings.Contains(stdout, "created partitions ahead: public."+last) {
		t.Errorf("stdout does not name the partition created:\n%s", stdout)
	}
	if n := testenv.QueryValue[int64](t, dsn, `SELECT count(*) FROM pg_class WHERE relname = $1`, last); n != 1 {
		t.Errorf("partition %s: %d tables, want 1", last, n)
	}
	// A dry run creates nothing.
	testenv.Exec(t, dsn, "DROP TABLE "+last)
	walrelay(t, env, "outbox", "prune", "--dry-run", "--wait", "300ms")
	if n := testenv.QueryValue[int64](t, dsn, `SELECT count(*) FROM pg_class WHERE relname = $1`, last); n != 0 {
		t.Errorf("a dry run created %s", last)
	}
}
