package main

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/testenv"
)

// Tests of several outbox tables per relay (issue 37) for setup and the
// slot commands: public.outbox and billing.outbox, two schemas, so that
// the record's place (the first table's schema) is exercised.

// rowQuerier is a connection (each statement its own transaction) or an
// open transaction.
type rowQuerier interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}

// insertInto inserts one outbox row into table with q and returns its id.
func insertInto(ctx context.Context, q rowQuerier, table, aggregateid string) (string, error) {
	var id string
	err := q.QueryRow(ctx, `INSERT INTO `+table+` (aggregatetype, aggregateid, type, payload)
		VALUES ('order', $1, 'Happened', '{}') RETURNING id::text`, aggregateid).Scan(&id)
	return id, err
}

// mustInsertInto is insertInto on the test's goroutine, failing the test
// on an error.
func mustInsertInto(t *testing.T, q rowQuerier, table, aggregateid string) string {
	t.Helper()
	id, err := insertInto(t.Context(), q, table, aggregateid)
	if err != nil {
		t.Fatalf("inserting into %s: %v", table, err)
	}
	return id
}

// recordIDs is the id header of each record, counted.
func recordIDs(t *testing.T, e *e2e) map[string]int {
	t.Helper()
	got := map[string]int{}
	for _, r := range e.readAll(t) {
		for _, h := range r.Headers {
			if h.Key == "id" {
				got[string(h.Value)]++
			}
		}
	}
	return got
}

// setup adds billing.outbox to the publication while walrelay run streams
// public.outbox under continuous inserts, and while a transaction that
// writes both tables is open: setup waits for it (blocked on its lock of
// billing.outbox) while the transaction writes more rows and commits; then
// it adds the table and warns of the rows billing.outbox held, that
// transaction's included, with their count and window. Every
// public.outbox row reaches Kafka exactly once (the stream of the table
// already published is not disturbed), a transaction writing
// billing.outbox after setup returned is streamed, and walrelay verify
// --republish over the warning's window puts the held rows on Kafka: in
// the end every billing.outbox row is there exactly once. setup, run
// again, changes nothing.
//
// Without the wait, the open transaction's billing.outbox rows written
// before the ALTER were lost to decoding although it committed after it
// (PostgreSQL 14 to 18: pgoutput decodes a change with the catalog of its
// place in the WAL), with only a warning naming the writer.
func TestSetupAddsTableWhileRunStreams(t *testing.T) {
	e := newE2E(t)
	oneTable := append(append([]string(nil), e.env...), "WALRELAY_POSTGRES_TABLE=public.outbox")
	twoTables := append(append([]string(nil), e.env...), "WALRELAY_POSTGRES_TABLE=public.outbox,billing.outbox")
	if out := wantOK(t, oneTable, "setup"); strings.Contains(out, "billing") {
		t.Fatalf("setup of public.outbox alone:\n%s", out)
	}
	// billing.outbox exists before it is listed: the application writes
	// to it (in the open transaction below) before setup adds it.
	testenv.Exec(t, e.dsn, `CREATE SCHEMA billing`)
	testenv.Exec(t, e.dsn, `CREATE TABLE billing.outbox (LIKE public.outbox INCLUDING ALL)`)
	for _, topic := range e.topics() {
		e.broker.CreateTopic(t, topic, 4)
	}
	run := startChild(t, oneTable, "run")
	waitStreaming(t, run, e.dsn)

	// Continuous inserts into public.outbox, one row per transaction.
	var (
		mu     sync.Mutex
		aIDs   []string
		wg     sync.WaitGroup
		werr   error
		ctx    = t.Context()
		stop   = make(chan struct{})
		writer = testenv.Connect(t, e.dsn)
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			id, err := insertInto(ctx, writer, "public.outbox", "a")
			if err != nil {
				werr = err
				return
			}
			mu.Lock()
			aIDs = append(aIDs, id)
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()

	// The open transaction: a row of each table before setup starts.
	open := testenv.Connect(t, e.dsn)
	tx, err := open.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	a1 := mustInsertInto(t, tx, "public.outbox", "a")
	b0 := mustInsertInto(t, tx, "billing.outbox", "b")

	// setup waits for the open transaction: blocked on a lock of
	// billing.outbox, the publication without it.
	setupRun := startChild(t, twoTables, "setup")
	waitLockWait(t, e.dsn, setupRun, "billing.outbox")
	if got := testenv.QueryValue[string](t, e.dsn, `SELECT string_agg(schemaname || '.' || tablename, ' ') FROM pg_publication_tables WHERE pubname = 'walrelay_outbox'`); got != "public.outbox" {
		t.Errorf("while setup waits, the publication holds %q, want public.outbox alone", got)
	}

	// More rows in the open transaction, then its commit: setup goes on.
	b1 := mustInsertInto(t, tx, "billing.outbox", "b")
	a2 := mustInsertInto(t, tx, "public.outbox", "a")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if code := setupRun.wait(t, 60*time.Second); code != 0 || setupRun.stderr.String() != "" {
		t.Fatalf("walrelay setup: exit %d\nstdout:\n%s\nstderr:\n%s", code, setupRun.stdout.String(), setupRun.stderr.String())
	}
	out := setupRun.stdout.String()
	var (
		added        bool
		since, until string
	)
	held := regexp.MustCompile(`^warning billing\.outbox holds 2 rows committed before it was added \(created_at \S+ to \S+\): not streamed; publish them with walrelay verify --republish --since (\S+) --until (\S+), or walrelay snapshot`)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		line = strings.Join(strings.Fields(line), " ")
		if m := held.FindStringSubmatch(line); m != nil {
			since, until = m[1], m[2]
			continue
		}
		switch {
		case line == "publication walrelay_outbox billing.outbox added":
			added = true
		case strings.HasPrefix(line, "warning"):
			t.Errorf("setup warned: %s", line)
		}
	}
	if !added || since == "" {
		t.Fatalf("setup does not list the addition of billing.outbox (%t) and warn of the 2 rows it held, with their window (%t):\n%s", added, since != "", out)
	}

	// A transaction writing billing.outbox after setup returned.
	var bIDs []string
	err = pgx.BeginFunc(ctx, open, func(tx pgx.Tx) error {
		for range 5 {
			id, err := insertInto(ctx, tx, "billing.outbox", "b")
			if err != nil {
				return err
			}
			bIDs = append(bIDs, id)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // more public.outbox rows after it all
	close(stop)
	wg.Wait()
	if werr != nil {
		t.Fatalf("inserting into public.outbox: %v", werr)
	}
	aIDs = append(aIDs, a1, a2)

	_, current := e.slot(t)
	e.waitConfirmed(t, current, 60*time.Second)
	got := recordIDs(t, e)
	for _, id := range aIDs {
		if got[id] != 1 {
			t.Errorf("public.outbox row %s is on Kafka %d times, want once", id, got[id])
		}
	}
	for _, id := range bIDs {
		if got[id] != 1 {
			t.Errorf("billing.outbox row %s (written after setup returned) is on Kafka %d times, want once", id, got[id])
		}
	}
	t.Logf("%d public.outbox rows, %d billing.outbox rows after setup; the 2 rows held before, streamed: %d and %d times",
		len(aIDs), len(bIDs), got[b0], got[b1])

	// verify --republish over the warning's window publishes the held rows
	// (with the relay streaming: verify's fence is confirmed through it).
	rep, _, code := walrelay(t, twoTables, "verify", "--republish", "--since", since, "--until", until)
	if code != 0 || !strings.Contains(rep, " acknowledged, 0 failed\n") {
		t.Errorf("walrelay verify --republish --since %s --until %s: exit %d\n%s", since, until, code, rep)
	}
	t.Logf("walrelay verify --republish --since %s --until %s:\n%s", since, until, rep)
	got = recordIDs(t, e)
	for _, id := range append([]string{b0, b1}, bIDs...) {
		if got[id] != 1 {
			t.Errorf("billing.outbox row %s is on Kafka %d times after verify --republish, want once", id, got[id])
		}
	}
	for _, id := range aIDs {
		if got[id] != 1 {
			t.Errorf("public.outbox row %s is on Kafka %d times after verify --republish, want once", id, got[id])
		}
	}

	run.signal(t, syscall.SIGTERM)
	if code := run.wait(t, 30*time.Second); code != 0 {
		t.Errorf("walrelay run: exit %d after SIGTERM", code)
	}
	// Idempotent.
	again := wantOK(t, twoTables, "setup")
	for _, line := range strings.Split(strings.TrimSpace(again), "\n") {
		if !strings.HasSuffix(line, "already exists") {
			t.Errorf("setup again: %q, want already exists", line)
		}
	}
}

// waitLockWait waits until a server process of dsn's database waits for
// a lock on table (pg_stat_activity's wait_event_type Lock, pg_locks'
// ungranted lock on it), failing the test if c exits first.
func waitLockWait(t *testing.T, dsn string, c *child, table string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if testenv.QueryValue[bool](t, dsn, `SELECT EXISTS (SELECT FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE NOT l.granted AND l.locktype = 'relation' AND l.relation = $1::regclass
			  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND a.wait_event_type = 'Lock')`, table) {
			return
		}
		if c.exited() {
			t.Fatalf("walrelay %v exited (%d) without waiting for a lock on %s\nstdout:\n%s\nstderr:\n%s", c.args, c.code, table, c.stdout.String(), c.stderr.String())
		}
		if time.Now().After(deadline) {
			t.Fatalf("walrelay %v does not wait for a lock on %s after 30s", c.args, table)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// slot create --accept-gap counts the gap over every listed table, in
// one snapshot.
func TestSlotCreateAcceptGapCountsEveryTable(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	setupOutbox(t, dsn)
	// billing.outbox listed second and published, made by hand so that
	// only the counting is under test.
	testenv.Exec(t, dsn, `CREATE SCHEMA billing`)
	testenv.Exec(t, dsn, `CREATE TABLE billing.outbox (LIKE public.outbox INCLUDING ALL)`)
	testenv.Exec(t, dsn, `ALTER PUBLICATION walrelay_outbox ADD TABLE billing.outbox`)
	conn := testenv.Connect(t, dsn)
	for i := range 7 {
		table := "public.outbox"
		if i >= 3 {
			table = "billing.outbox"
		}
		mustInsertInto(t, conn, table, "k")
	}
	testenv.Exec(t, dsn, `SELECT pg_drop_replication_slot('walrelay')`)

	env := childEnv("WALRELAY_POSTGRES_DSN="+dsn, "WALRELAY_POSTGRES_TABLE=public.outbox,billing.outbox")
	out := wantOK(t, env, "slot", "create", "walrelay", "--accept-gap")
	if !strings.Contains(out, "the outbox holds 7 rows") {
		t.Errorf("slot create --accept-gap does not count 3 rows of public.outbox and 4 of billing.outbox:\n%s", out)
	}
}

// A record of the slot in the schema of a table listed after the first
// (the list was reordered) is refused by setup, slot create and slot
// adopt, which would otherwise read it as missing, and slot inspect says
// where it is.
func TestSlotCommandsRefuseMisplacedRecord(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	testenv.Exec(t, dsn, `CREATE SCHEMA billing`)
	base := childEnv("WALRELAY_POSTGRES_DSN=" + dsn)
	// walrelay ran with billing.outbox first: the record is in billing.
	wantOK(t, append(append([]string(nil), base...), "WALRELAY_POSTGRES_TABLE=billing.outbox,public.outbox"), "setup")
	env := append(append([]string(nil), base...), "WALRELAY_POSTGRES_TABLE=public.outbox,billing.outbox")

	const misplaced = `slot "walrelay" is recorded in billing.walrelay_slot_positions, but postgres.table lists a table of schema public first`
	stdout, stderr, code := walrelay(t, env, "slot", "adopt", "walrelay")
	wantFailure(t, stdout, stderr, code, 1, misplaced)
	// slot inspect shows where it is, not "no record".
	stdout, stderr, code = walrelay(t, env, "slot", "inspect", "walrelay")
	if !strings.Contains(stdout, misplaced) {
		t.Errorf("slot inspect (exit %d) does not say where the record is:\n%s%s", code, stdout, stderr)
	}
	testenv.Exec(t, dsn, `SELECT pg_drop_replication_slot('walrelay')`)
	stdout, stderr, code = walrelay(t, env, "setup")
	wantFailure(t, stdout, stderr, code, 1, misplaced, "nothing was created")
	stdout, stderr, code = walrelay(t, env, "slot", "create", "walrelay", "--accept-gap")
	wantFailure(t, stdout, stderr, code, 1, misplaced, "nothing was created")
	if slotExists(t, dsn, "walrelay") {
		t.Error("a command created the slot")
	}
	if testenv.QueryValue[bool](t, dsn, `SELECT to_regclass('public.walrelay_slot_positions') IS NOT NULL`) {
		t.Error("a command created a record table in public")
	}
}

// A role that owns the publication but not the table it adds is told that
// adding a table needs its ownership.
func TestSetupAddTableNeedsOwnership(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	role := createRole(t, dsn)
	quoted := pgx.Identifier{role}.Sanitize()
	testenv.Exec(t, dsn, `ALTER ROLE `+quoted+` REPLICATION`)
	testenv.Exec(t, dsn, `GRANT CREATE ON DATABASE `+pgx.Identifier{dbName(t, dsn)}.Sanitize()+` TO `+quoted)
	testenv.Exec(t, dsn, `GRANT CREATE ON SCHEMA public TO `+quoted)
	env := childEnv("WALRELAY_POSTGRES_DSN=" + withUser(t, dsn, role))
	wantOK(t, append(append([]string(nil), env...), "WALRELAY_POSTGRES_TABLE=public.outbox"), "setup")
	// billing.outbox is another role's (the superuser's).
	testenv.Exec(t, dsn, `CREATE SCHEMA billing`)
	testenv.Exec(t, dsn, `CREATE TABLE billing.outbox (LIKE public.outbox INCLUDING ALL)`)
	testenv.Exec(t, dsn, `GRANT USAGE ON SCHEMA billing TO `+quoted)
	testenv.Exec(t, dsn, `GRANT SELECT ON billing.outbox TO `+quoted)

	stdout, stderr, code := walrelay(t, append(append([]string(nil), env...), "WALRELAY_POSTGRES_TABLE=public.outbox,billing.outbox"), "setup")
	wantFailure(t, stdout, stderr, code, 1, "adding table billing.outbox to publication", "the role must own the table to add it to the publication", `LOCK TABLE "billing"."outbox" IN SHARE MODE; ALTER PUBLICATION "walrelay_outbox" ADD TABLE "billing"."outbox"`)
}
