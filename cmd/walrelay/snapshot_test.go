package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/testenv"
)

// waitStderr waits until c's stderr contains s.
func waitStderr(t *testing.T, c *child, s string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(c.stderr.String(), s) {
		if c.exited() {
			t.Fatalf("walrelay exited with %d before logging %q", c.code, s)
		}
		if time.Now().After(deadline) {
			t.Fatalf("walrelay did not log %q within %s", s, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A walrelay killed (SIGKILL) during its initial snapshot leaves no slot
// behind, and the next start snapshots again from the beginning while
// writers keep inserting: every row reaches Kafka, the rows the killed
// process had published are published once more (the documented
// duplicates), and every other row exactly once.
func TestInitialSnapshotSurvivesSIGKILL(t *testing.T) {
	e := newE2E(t)
	// Small in-flight caps and a linger make the snapshot last seconds, so
	// the kill lands in its middle.
	e.env = append(e.env, "WALRELAY_SNAPSHOT_MODE=initial", "WALRELAY_SNAPSHOT_CHUNK_ROWS=200",
		"WALRELAY_SNAPSHOT_PROGRESS_INTERVAL=200ms", "WALRELAY_RELAY_MAX_IN_FLIGHT_RECORDS=100", "WALRELAY_KAFKA_LINGER=20ms")
	stdout, stderr, code := walrelay(t, e.env, "setup")
	if code != 0 {
		t.Fatalf("walrelay setup: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "not created: walrelay run creates it after the initial snapshot") {
		t.Fatalf("walrelay setup with snapshot.mode=initial does not say it leaves the slot to walrelay run:\n%s", stdout)
	}
	for _, topic := range e.topics() {
		e.broker.CreateTopic(t, topic, 4)
	}
	conn := testenv.Connect(t, e.dsn)
	const existing = 20_000
	if _, _, err := writeTx(t.Context(), conn, existing); err != nil {
		t.Fatal(err)
	}
	arrived := counter(t, e)

	// Writers insert before, during and after both snapshots.
	ctx, stopWriting := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var writeErr error
	wg.Go(func() {
		conn, err := pgx.Connect(ctx, e.dsn)
		if err != nil {
			writeErr = err
			return
		}
		defer conn.Close(context.Background())
		for ctx.Err() == nil {
			if _, _, err := writeTx(ctx, conn, 3); err != nil && ctx.Err() == nil {
				writeErr = err
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	t.Cleanup(func() { stopWriting(); wg.Wait() })

	c := startChild(t, e.env, "run")
	waitStderr(t, c, `"msg":"snapshot: publishing rows"`, time.Minute)
	for arrived.Load() < existing/5 {
		if c.exited() {
			t.Fatalf("walrelay exited with %d", c.code)
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.signal(t, syscall.SIGKILL)
	if code := c.wait(t, 10*time.Second); code != -1 {
		t.Fatalf("walrelay exited with %d before SIGKILL", code)
	}
	if strings.Contains(c.stderr.String(), "initial snapshot done") {
		t.Fatal("the snapshot finished before the kill; the test did not kill it mid-snapshot")
	}
	// What the killed process published, and proof it left no slot (the
	// temporary one dies with its connection, once Postgres notices).
	first := map[string]bool{}
	for _, r := range e.readAll(t) {
		first[testenv.Header(r, "id")] = true
	}
	deadline := time.Now().Add(10 * time.Second)
	for testenv.QueryValue[int64](t, e.dsn, `SELECT count(*) FROM pg_replication_slots`) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("slots left after the kill: %s", testenv.QueryValue[string](t, e.dsn, `SELECT string_agg(slot_name, ',') FROM pg_replication_slots`))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("killed after %d records of the first snapshot", len(first))

	c = startChild(t, e.env, "run")
	waitStderr(t, c, "initial snapshot done", 2*time.Minute)
	time.Sleep(300 * time.Millisecond)
	stopWriting()
	wg.Wait()
	if writeErr != nil {
		t.Fatalf("writer: %v", writeErr)
	}
	_, current := e.slot(t)
	e.waitConfirmed(t, current, time.Minute)
	c.signal(t, syscall.SIGTERM)
	if code := c.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("walrelay exited %d after SIGTERM", code)
	}

	seen := map[string]int{}
	for _, r := range e.readAll(t) {
		seen[testenv.Header(r, "id")]++
	}
	ids := testenv.QueryValue[[]string](t, e.dsn, `SELECT array_agg(id::text) FROM outbox`)
	bad := 0
	for _, id := range ids {
		want := 1
		if first[id] {
			want = 2 // published by the killed snapshot, and again by the next
		}
		if seen[id] != want {
			bad++
			if bad <= 5 {
				t.Errorf("outbox row %s is on Kafka %d times, want %d", id, seen[id], want)
			}
		}
		delete(seen, id)
	}
	if bad > 0 || len(seen) > 0 {
		t.Fatalf("%d of %d rows wrong; %d records of no outbox row", bad, len(ids), len(seen))
	}
	t.Logf("%d rows on Kafka, %d of them twice (published before the kill)", len(ids), len(first))
}

// walrelay snapshot publishes the rows matching --where once, waits for
// the acks and prints the count; --dry-run only counts; a filter Postgres
// rejects is a clear error.
func TestSnapshotBackfill(t *testing.T) {
	e := newE2E(t)
	e.setup(t, "created")
	for _, topic := range e.topics() {
		e.broker.CreateTopic(t, topic, 4)
	}
	conn := testenv.Connect(t, e.dsn)
	if _, _, err := writeTx(t.Context(), conn, 500); err != nil {
		t.Fatal(err)
	}
	orders := testenv.QueryValue[int64](t, e.dsn, `SELECT count(*) FROM outbox WHERE aggregatetype = 'order'`)

	stdout, stderr, code := walrelay(t, e.env, "snapshot", "--dry-run", "-o", "json")
	if code != 0 || !strings.Contains(stdout, `"rows": 500`) || !strings.Contains(stdout, `"dry_run": true`) {
		t.Fatalf("snapshot --dry-run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if recs := e.readAll(t); len(recs) != 0 {
		t.Fatalf("--dry-run published %d records", len(recs))
	}

	stdout, stderr, code = walrelay(t, e.env, "snapshot", "--where", "aggregatetype = 'order'")
	if code != 0 || !strings.Contains(stdout, fmt.Sprintf("rows: %d published and acknowledged", orders)) {
		t.Fatalf("snapshot --where: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, fmt.Sprintf("snapshot: %d of %d rows", orders, orders)) {
		t.Errorf("no final progress line on stderr:\n%s", stderr)
	}
	recs := e.readAll(t)
	ids := map[string]bool{}
	for _, r := range recs {
		if r.Topic != e.prefix+".order" {
			t.Fatalf("record on %s: --where selected orders only", r.Topic)
		}
		ids[testenv.Header(r, "id")] = true
	}
	if int64(len(recs)) != orders || int64(len(ids)) != orders {
		t.Fatalf("%d records with %d ids for %d order rows", len(recs), len(ids), orders)
	}

	_, stderr, code = walrelay(t, e.env, "snapshot", "--where", "nope IS NULL")
	if code != 1 || !strings.Contains(stderr, `column "nope" does not exist`) || !strings.Contains(stderr, "snapshot.where") {
		t.Fatalf("snapshot with a bad --where: exit %d\n%s", code, stderr)
	}
	noStackTrace(t, "stderr", stderr)
}
