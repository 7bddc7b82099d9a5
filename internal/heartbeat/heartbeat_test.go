package heartbeat_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/heartbeat"
	"github.com/walrelay/walrelay/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// run starts e and stops it at cleanup.
func run(t *testing.T, e *heartbeat.Emitter) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// waitSent waits until e has sent at least n heartbeats.
func waitSent(t *testing.T, e *heartbeat.Emitter, n uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.Sent() < n {
		if time.Now().After(deadline) {
			t.Fatalf("sent %d heartbeats in 10s, want %d", e.Sent(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Heartbeats are non-transactional messages with walrelay's prefix in the
// slot's database, so a slot of that database decodes them; Is knows them.
func TestHeartbeatsAreDecodedBySlotsOfTheirDatabase(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	testenv.Exec(t, dsn, `SELECT pg_create_logical_replication_slot('hb', 'test_decoding')`)
	e := heartbeat.New(dsn, "hb", 50*time.Millisecond, nil)
	run(t, e)
	waitSent(t, e, 3)

	// A non-transactional message is decodable once its WAL is flushed,
	// which the WAL writer does within wal_writer_delay.
	var got []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got = testenv.QueryValue[[]string](t, dsn, `SELECT coalesce(array_agg(data), '{}') FROM pg_logical_slot_peek_changes('hb', NULL, NULL)`)
		n := 0
		for _, d := range got {
			if strings.HasPrefix(d, "message: transactional: 0 prefix: "+heartbeat.Prefix+",") {
				n++
			}
		}
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slot decoded %d heartbeats, want >= 3; changes: %q", n, got)
		}
	}

	for _, tc := range []struct {
		m    pglogrepl.LogicalDecodingMessage
		want bool
	}{
		{pglogrepl.LogicalDecodingMessage{Prefix: heartbeat.Prefix}, true},
		{pglogrepl.LogicalDecodingMessage{Prefix: heartbeat.Prefix, Transactional: true}, false},
		{pglogrepl.LogicalDecodingMessage{Prefix: "app.message"}, false},
	} {
		if got := heartbeat.Is(&tc.m); got != tc.want {
			t.Errorf("Is(prefix %q, transactional %t) = %t, want %t", tc.m.Prefix, tc.m.Transactional, got, tc.want)
		}
	}
}

// A connection lost between heartbeats (its backend terminated) is opened
// again: heartbeats go on.
func TestHeartbeatsReconnect(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	e := heartbeat.New(dsn, "hb", 50*time.Millisecond, nil)
	run(t, e)
	waitSent(t, e, 2)
	killed := testenv.QueryValue[int64](t, dsn, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%pg_logical_emit_message%'`)
	if killed == 0 {
		t.Fatal("found no heartbeat connection to terminate")
	}
	waitSent(t, e, e.Sent()+3)
	e.Seen(time.Now())
	if e.Received() != 1 {
		t.Errorf("Received = %d after one Seen, want 1", e.Received())
	}
}
