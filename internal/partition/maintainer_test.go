package partition_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/partition"
	"github.com/walrelay/walrelay/internal/testenv"
)

// logLines is the JSON log lines in buf whose message contains msg.
func logLines(buf *testenv.SyncBuffer, msg string) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(buf.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && strings.Contains(m["msg"].(string), msg) {
			out = append(out, m)
		}
	}
	return out
}

// waitFor polls until cond holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// startMaintainer runs a Maintainer for cfg until the test ends, with
// rounds every 100ms, and returns its log.
func startMaintainer(t *testing.T, cfg config.Config) *testenv.SyncBuffer {
	t.Helper()
	cfg.Outbox.PruneInterval = 100 * time.Millisecond
	logs := &testenv.SyncBuffer{}
	m := partition.NewMaintainer(cfg, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run after a stop = %v, want nil", err)
		}
	})
	return logs
}

// The Maintainer creates the partitions ahead of a partitioned outbox; a
// round that cannot (a long transaction holds a lock on the outbox) gives
// up at the lock timeout instead of queueing the application's inserts
// behind it for the whole statement timeout, says so, and the next round
// after the lock is released creates them.
func TestMaintainerRetriesAfterLockTimeout(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	s := createRoot(t, dsn, "public.outbox", time.Hour)
	cfg := config.Default()
	cfg.Postgres.DSN = dsn
	cfg.Outbox.PartitionInterval = time.Hour
	cfg.Outbox.PartitionsAhead = 2
	cfg.Outbox.PruneStatementTimeout = 5 * time.Minute

	holder := testenv.Connect(t, dsn)
	tx, err := holder.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), `LOCK TABLE outbox IN ACCESS SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	logs := startMaintainer(t, cfg)
	waitFor(t, "a round to give up", func() bool { return len(logLines(logs, "could not create the outbox's partitions ahead")) >= 2 })
	warn := logLines(logs, "could not create the outbox's partitions ahead")[0]
	if e, _ := warn["err"].(string); !strings.Contains(e, "lock timeout") {
		t.Errorf("a round behind a lock failed with %q, want the lock timeout (not the %s statement timeout)", e, cfg.Outbox.PruneStatementTimeout)
	}
	if n := testenv.QueryValue[int](t, dsn, `SELECT count(*)::int FROM pg_inherits WHERE inhparent = 'outbox'::regclass`); n != 0 {
		t.Errorf("%d partitions while the lock was held", n)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "three partitions created", func() bool { return len(logLines(logs, "created outbox partition")) == 3 })
	now := time.Now()
	for i, l := range logLines(logs, "created outbox partition") {
		// A round across the hour may name the next hour's; allow it.
		want := s.Partition(s.Start(now).Add(time.Duration(i) * time.Hour)).Name
		if got, _ := l["partition"].(string); got != "public."+want && got != "public."+s.Partition(s.Start(now).Add(time.Duration(i-1)*time.Hour)).Name {
			t.Errorf("created %s, want public.%s", got, want)
		}
	}
	testenv.Exec(t, dsn, `INSERT INTO outbox (aggregatetype, aggregateid, type) VALUES ('a', '1', 't')`)
}

// A plain outbox, or one partitioned otherwise, is left alone and said so
// once; a partition name over Postgres's limit is an error only for a
// partitioned outbox.
func TestMaintainerLeavesOtherTablesAlone(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	long := strings.Repeat("x", 60)
	testenv.Exec(t, dsn, `
		CREATE TABLE plain (id int, created_at timestamptz);
		CREATE TABLE listed (kind text, created_at timestamptz) PARTITION BY LIST (kind);
		CREATE TABLE `+long+` (id int, created_at timestamptz NOT NULL) PARTITION BY RANGE (created_at);
		CREATE TABLE `+strings.Repeat("y", 60)+` (id int, created_at timestamptz)`)
	for _, tc := range []struct{ table, want string }{
		{"plain", "the outbox is a plain table"},
		{"listed", `the outbox is partitioned by list (kind), not by range of outbox.time_column "created_at"`},
		{"missing", "the outbox table does not exist"},
		{strings.Repeat("y", 60), "the outbox is a plain table"},
		{long, "could not create the outbox's partitions ahead"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			cfg := config.Default()
			cfg.Postgres.DSN = dsn
			cfg.Postgres.Table = config.StringList{tc.table}
			logs := startMaintainer(t, cfg)
			waitFor(t, "a round", func() bool { return len(logLines(logs, tc.want)) > 0 })
			time.Sleep(300 * time.Millisecond) // a few more rounds
			if n := len(logLines(logs, tc.want)); n != 1 && tc.table != long {
				t.Errorf("%q logged %d times, want once", tc.want, n)
			}
			if tc.table == long {
				if e, _ := logLines(logs, tc.want)[0]["err"].(string); !strings.Contains(e, "over Postgres's limit of 63") {
					t.Errorf("error %q, want the name limit", e)
				}
			} else if w := logLines(logs, "could not"); len(w) > 0 {
				t.Errorf("warned: %v", w)
			}
		})
	}
}

// One Maintainer keeps the partitions ahead of every partitioned table of
// postgres.table, in two schemas, and leaves a plain one alone; a table it
// cannot keep (partition names over Postgres's limit) is an error naming
// that table, and the tables listed after it get their partitions all the
// same.
func TestMaintainerEveryTable(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	long := "billing." + strings.Repeat("z", 60)
	testenv.Exec(t, dsn, `CREATE SCHEMA billing;
		CREATE TABLE billing.plain (id int, created_at timestamptz);
		CREATE TABLE `+long+` (id int, created_at timestamptz NOT NULL) PARTITION BY RANGE (created_at)`)
	roots := []string{"public.outbox", "billing.outbox"}
	for _, table := range roots {
		createRoot(t, dsn, table, 24*time.Hour)
	}
	cfg := config.Default()
	cfg.Postgres.DSN = dsn
	cfg.Postgres.Table = config.StringList{"public.outbox", long, "billing.outbox", "billing.plain"}
	cfg.Outbox.PartitionInterval = 24 * time.Hour
	cfg.Outbox.PartitionsAhead = 2
	logs := &testenv.SyncBuffer{}
	m := partition.NewMaintainer(cfg, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))

	created, err := m.Round(t.Context())
	if err == nil || !strings.HasPrefix(err.Error(), long+": ") || !strings.Contains(err.Error(), "over Postgres's limit of 63") || strings.Count(err.Error(), "\n") != 0 {
		t.Errorf("Round: %v; want the error of %s alone (its partition names are too long)", err, long)
	}
	perRoot := map[string]int{}
	for _, p := range created {
		perRoot[p.Schema]++
	}
	if perRoot["public"] != 3 || perRoot["billing"] != 3 || len(created) != 6 {
		t.Errorf("created %v; want 3 partitions (now and 2 ahead) of each of %q", created, roots)
	}
	for _, table := range roots {
		if n := testenv.QueryValue[int](t, dsn, `SELECT count(*)::int FROM pg_inherits WHERE inhparent = $1::regclass`, table); n != 3 {
			t.Errorf("%s has %d partitions, want 3", table, n)
		}
	}
	if n := len(logLines(logs, "the outbox is a plain table")); n != 1 {
		t.Errorf("billing.plain said plain %d times, want once", n)
	}

	// The next round has nothing to create and says the same error.
	created, err = m.Round(t.Context())
	if len(created) != 0 || err == nil || !strings.HasPrefix(err.Error(), long+": ") {
		t.Errorf("second round: created %v, %v; want nothing and %s's error", created, err, long)
	}
}
