package testenv_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestPostgresLogical(t *testing.T) {
	pg := testenv.Postgres(t)
	if got := testenv.QueryValue[string](t, pg.AdminDSN(), "SHOW wal_level"); got != "logical" {
		t.Fatalf("wal_level = %q, want logical", got)
	}
	if got := testenv.QueryValue[bool](t, pg.AdminDSN(), "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"); !got {
		t.Fatal("AdminDSN user is not a superuser")
	}
	t.Logf("backend %s", pg.Backend())
}

func TestNewDatabaseIsolationAndCleanup(t *testing.T) {
	pg := testenv.Postgres(t)
	var dbName, slotDB string

	t.Run("isolated", func(t *testing.T) {
		a := pg.NewDatabase(t)
		b := pg.NewDatabase(t)
		if a == b {
			t.Fatalf("NewDatabase returned the same DSN twice: %s", a)
		}
		testenv.Exec(t, a, "CREATE TABLE only_in_a (id int)")
		if n := testenv.QueryValue[int](t, b, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'"); n != 0 {
			t.Errorf("table created in one database is visible in another")
		}
		dbName = testenv.QueryValue[string](t, a, "SELECT current_database()")
	})

	t.Run("slot", func(t *testing.T) {
		dsn := pg.NewDatabase(t)
		slotDB = testenv.QueryValue[string](t, dsn, "SELECT current_database()")
		testenv.Exec(t, dsn, "SELECT pg_create_logical_replication_slot('idle_slot', 'pgoutput')")

		// Keep a second slot active through a walsender, as a relay
		// under test would; cleanup must terminate it to drop the slot.
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["replication"] = "database"
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatalf("opening replication connection: %v", err)
		}
		t.Cleanup(func() { _ = conn.Close(context.Background()) }) // terminated by NewDatabase's cleanup first
		if _, err := conn.PgConn().Exec(ctx, "CREATE_REPLICATION_SLOT active_slot LOGICAL pgoutput").ReadAll(); err != nil {
			t.Fatalf("creating slot: %v", err)
		}
		testenv.Exec(t, dsn, "CREATE PUBLICATION pub FOR ALL TABLES")
		conn.PgConn().Frontend().Send(&pgproto3.Query{String: "START_REPLICATION SLOT active_slot LOGICAL 0/0 (proto_version '1', publication_names 'pub')"})
		if err := conn.PgConn().Frontend().Flush(); err != nil {
			t.Fatalf("starting replication: %v", err)
		}
		waitFor(t, 10*time.Second, func() bool {
			return testenv.QueryValue[bool](t, pg.AdminDSN(),
				"SELECT coalesce(bool_or(active), false) FROM pg_replication_slots WHERE database = $1 AND slot_name = 'active_slot'", slotDB)
		}, "slot active_slot to become active")
	})

	for _, db := range []string{dbName, slotDB} {
		if n := testenv.QueryValue[int](t, pg.AdminDSN(), "SELECT count(*) FROM pg_database WHERE datname = $1", db); n != 0 {
			t.Errorf("database %s still exists after its test ended", db)
		}
	}
	if n := testenv.QueryValue[int](t, pg.AdminDSN(), "SELECT count(*) FROM pg_replication_slots WHERE database = $1", slotDB); n != 0 {
		t.Errorf("%d replication slots of %s survive its cleanup", n, slotDB)
	}
}

func TestStopImmediateRestartKeepsData(t *testing.T) {
	pg := testenv.Postgres(t)
	c := pg.RequireCluster(t) // not parallel: it stops the shared server
	dsn := pg.NewDatabase(t)
	testenv.Exec(t, dsn, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('x')")
	if err := c.Stop(t.Context(), "immediate"); err != nil {
		t.Fatalf("Stop(immediate): %v", err)
	}
	if err := c.Restart(t.Context()); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if got := testenv.QueryValue[string](t, dsn, "SELECT v FROM kept"); got != "x" {
		t.Fatalf("after crash and restart got %q", got)
	}
}

func TestKafkaRoundtrip(t *testing.T) {
	broker := testenv.Kafka(t, kfake.SeedTopics(3, "orders"))
	if broker.Cluster == nil {
		t.Log("using external kafka")
		broker.CreateTopic(t, "orders", 3)
	}
	other := testenv.UniqueName(t, "other")
	broker.CreateTopic(t, other, 1)

	cl := broker.Client(t, kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	const n = 20
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%4), Value: fmt.Appendf(nil, "v%d", i)})
	}
	recs = append(recs, &kgo.Record{Topic: other, Value: []byte("o")})
	if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatalf("producing: %v", err)
	}

	got := broker.ReadAll(t, []string{"orders", other}, n+1, 10*time.Second)
	if len(got) != n+1 {
		t.Fatalf("ReadAll returned %d records, want %d", len(got), n+1)
	}
	// Per key, values arrive in produce order.
	last := map[string]int{}
	for _, r := range got {
		if r.Topic != "orders" {
			continue
		}
		var v int
		fmt.Sscanf(string(r.Value), "v%d", &v)
		if prev, ok := last[string(r.Key)]; ok && v < prev {
			t.Errorf("key %s: v%d after v%d", r.Key, v, prev)
		}
		last[string(r.Key)] = v
	}

	if extra := broker.ReadAll(t, []string{other}, 0, 300*time.Millisecond); len(extra) != 1 {
		t.Errorf("ReadAll(want=0) returned %d records, want the 1 present", len(extra))
	}
}

// fakeTB records Fatalf instead of stopping the test.
type fakeTB struct {
	testing.TB
	fatal string
}

func (f *fakeTB) Fatalf(format string, args ...any) { f.fatal = fmt.Sprintf(format, args...) }

func TestReadAllTimeoutSummary(t *testing.T) {
	broker := testenv.Kafka(t, kfake.SeedTopics(2, "few"))
	if broker.Cluster == nil {
		t.Skip("needs kfake")
	}
	cl := broker.Client(t, kgo.DefaultProduceTopic("few"))
	if err := cl.ProduceSync(t.Context(), &kgo.Record{Value: []byte("1")}, &kgo.Record{Value: []byte("2")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ftb := &fakeTB{TB: t}
	got := broker.ReadAll(ftb, []string{"few"}, 5, 500*time.Millisecond)
	if len(got) != 2 {
		t.Errorf("got %d records, want 2", len(got))
	}
	if ftb.fatal == "" {
		t.Fatal("ReadAll did not fail the test on timeout")
	}
	t.Logf("failure message: %s", ftb.fatal)
	for _, want := range []string{"read 2 of 5", "few["} {
		if !strings.Contains(ftb.fatal, want) {
			t.Errorf("failure message %q lacks %q", ftb.fatal, want)
		}
	}
}

func TestUniqueName(t *testing.T) {
	for _, tc := range []struct{ name, prefix string }{
		{"Simple", "t"},
		{"With Spaces/and-Slashes", "db"},
		{"VeryLongNameThatGoesOnAndOnAndOnAndOnAndOnAndOnAndOnAndOnAndOnAndOn", "t"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := testenv.UniqueName(t, tc.prefix), testenv.UniqueName(t, tc.prefix)
			if a == b {
				t.Errorf("two calls gave %q", a)
			}
			if len(a) > 63 {
				t.Errorf("%q is longer than 63 bytes", a)
			}
			for _, r := range a {
				if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
					t.Errorf("%q holds %q", a, r)
				}
			}
		})
	}
}

func waitFor(t *testing.T, d time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// MajorBinDir finds Debian's 15 and make pg-majors' 17, whatever
// $WALRELAY_PG_BIN says.
func TestMajorBinDir(t *testing.T) {
	for _, major := range []int{15, 17} {
		t.Run(fmt.Sprint(major), func(t *testing.T) {
			dir := testenv.MajorBinDir(t, major)
			out, err := exec.Command(filepath.Join(dir, "postgres"), "--version").Output()
			if err != nil {
				t.Fatalf("running %s/postgres: %v", dir, err)
			}
			if want := fmt.Sprintf(") %d.", major); !strings.Contains(string(out), want) {
				t.Fatalf("MajorBinDir(%d) = %s, whose postgres says %q", major, dir, out)
			}
		})
	}
}

func TestAtLeastMajor(t *testing.T) {
	t.Setenv("WALRELAY_PG_BIN", "")
	dir := testenv.AtLeastMajor(t, 17)
	if out, err := exec.Command(filepath.Join(dir, "postgres"), "--version").Output(); err != nil || !strings.Contains(string(out), ") 17.") {
		t.Fatalf("AtLeastMajor(17) = %s: %q, %v", dir, out, err)
	}
}
