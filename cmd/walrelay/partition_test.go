package main

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/pkg/admin"
	"github.com/walrelay/walrelay/pkg/partition"
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
	if again := wantOK(t, env, "setup", "--outbox.partitioned=true"); strings.Count(again, "already exists") != 4 {
		t.Errorf("second setup:\n%s", again)
	}
	// A daily scheme run across UTC midnight may count one more.
	c, _ := checkJSON(t, env)
	c.want(t, "outbox partitions", admin.OK, []string{"partitioned by range of created_at with 4 partitions up to ", "; 3 ahead of now"}, nil)
	c.want(t, "publication walrelay_outbox", admin.OK, []string{"through the partition root"}, nil)
	if !c.OK {
		t.Errorf("check fails after setup: %+v", c.Items)
	}

	drop := func(start time.Time) {
		testenv.Exec(t, dsn, "DROP TABLE "+scheme.Name(start))
	}
	drop(scheme.Start(now).Add(72 * time.Hour))
	c, code := checkJSON(t, env)
	c.want(t, "outbox partitions", admin.Warn, []string{"2 ahead of now, fewer than outbox.partitions_ahead (3)"}, []string{"walrelay setup --outbox.partitioned=true", "could not create the outbox's partitions ahead"})
	if code != 0 {
		t.Errorf("check with a partition ahead missing exits %d, want 0 (a warning)", code)
	}

	drop(scheme.Start(now))
	c, code = checkJSON(t, env)
	c.want(t, "outbox partitions", admin.Fail, []string{"none holds now", "INSERTs into the outbox fail"}, []string{"walrelay setup --outbox.partitioned=true"})
	if code != 1 {
		t.Errorf("check with no partition for now exits %d, want 1", code)
	}

	testenv.Exec(t, dsn, "CREATE TABLE outbox_default PARTITION OF outbox DEFAULT")
	c, _ = checkJSON(t, env)
	c.want(t, "outbox partitions", admin.Warn, []string{"one of them DEFAULT", "none but the DEFAULT partition holds now"}, nil)

	testenv.Exec(t, dsn, "ALTER PUBLICATION walrelay_outbox SET (publish_via_partition_root = false)")
	c, code = checkJSON(t, env)
	c.want(t, "publication walrelay_outbox", admin.Fail, []string{"publishes the partitions of public.outbox under their own names", "walrelay run refuses to start"},
		[]string{`ALTER PUBLICATION "walrelay_outbox" SET (publish_via_partition_root = true);`})
	if code != 1 {
		t.Errorf("check with publish_via_partition_root off exits %d, want 1", code)
	}

	// A plain outbox is reported as such.
	plain := testenv.Postgres(t).NewDatabase(t)
	testenv.Exec(t, plain, sqlfiles.OutboxTable) // slot names are cluster-wide: the first database has walrelay
	c, _ = checkJSON(t, childEnv("WALRELAY_POSTGRES_DSN="+plain, "WALRELAY_KAFKA_BROKERS="+strings.Join(broker.Addrs(), ",")))
	c.want(t, "outbox partitions", admin.OK, []string{"plain table"}, nil)
	c, _ = checkJSON(t, childEnv("WALRELAY_POSTGRES_DSN="+plain, "WALRELAY_KAFKA_BROKERS="+strings.Join(broker.Addrs(), ","), "WALRELAY_OUTBOX_PARTITIONED=true"))
	c.want(t, "outbox partitions", admin.Warn, []string{"plain table, although outbox.partitioned is set"}, nil)
}
